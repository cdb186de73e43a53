/**
 * store/insert-batch.ts against the embedded FerretDB: concurrent inserts share unordered insertMany commands,
 * and each caller still learns its own document's fate (a duplicate _id fails only that insert, with code 11000,
 * which the limit slots rely on to decide between processes).
 */
import { randomBytes } from 'node:crypto';
import { Db, MongoClient } from 'mongodb';
import { InsertBatcher } from '../../store/insert-batch';

let client: MongoClient;
let db: Db;
beforeAll(async () => {
  client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  db = client.db(`test_batch_${randomBytes(4).toString('hex')}`);
});
afterAll(async () => {
  await db.dropDatabase().catch(() => undefined);
  await client.close();
});

it('fails only the duplicate documents of a batch, with code 11000, and inserts the others', async () => {
  const c = db.collection<{ _id: string }>('dups');
  await c.insertOne({ _id: 'taken' });
  const batcher = new InsertBatcher(c);
  const ids = ['a', 'taken', 'b', 'b', 'c'];
  const results = await Promise.allSettled(ids.map((_id) => batcher.insert({ _id })));
  expect(results.map((r) => (r.status === 'fulfilled' ? 'ok' : (r.reason as { code?: number }).code))).toEqual([
    'ok',
    11000,
    'ok',
    11000,
    'ok'
  ]);
  expect((await c.find({}).toArray()).map((d) => d._id).sort()).toEqual(['a', 'b', 'c', 'taken']);
});

it('sends concurrent inserts in fewer commands than documents, and a lone insert at once', async () => {
  const c = db.collection<{ _id: string; n: number }>('group');
  const batcher = new InsertBatcher(c);
  let commands = 0;
  const count = (e: { commandName: string }) => {
    if (e.commandName === 'insert') commands++;
  };
  client.on('commandStarted', count);
  try {
    await Promise.all(Array.from({ length: 50 }, (_, n) => batcher.insert({ _id: `d${n}`, n })));
    expect(await c.countDocuments({})).toBe(50);
    expect(commands).toBeLessThan(50);
    commands = 0;
    await batcher.insert({ _id: 'alone', n: -1 });
    expect(commands).toBe(1);
  } finally {
    client.off('commandStarted', count);
  }
});
