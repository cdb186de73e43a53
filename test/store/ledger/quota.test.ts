/**
 * The quota store against the embedded FerretDB: slots are taken in order across stores (as across API
 * processes), a store that falls behind finds the next free slot, refusals take no slot, and the first use of a
 * day deletes the slots of days before yesterday. (The HTTP behaviour, 429 and exactness under a burst from two
 * API processes, is in test/api/truth-ledger.test.ts.)
 */
import { Db, MongoClient } from 'mongodb';
import { QuotaStore } from '../../../store/ledger/quota';
import { eventually } from '../../support/service';

let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!);
  db = client.db(`test_quota_${Date.now()}`);
});
afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

it('hands out slots 1..limit once each across two stores, then refuses without taking a slot', async () => {
  const [a, b] = [new QuotaStore(db), new QuotaStore(db)];
  const counts: number[] = [];
  for (let i = 0; i < 30; i++) counts.push((await a.consume('truth:did:a', '2026-11-21', 50)).count);
  // b has never seen this counter: it finds slot 31 by lookups; a still expects 31 and moves past b's slot.
  counts.push((await b.consume('truth:did:a', '2026-11-21', 50)).count);
  counts.push((await a.consume('truth:did:a', '2026-11-21', 50)).count);
  const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).consume('truth:did:a', '2026-11-21', 50)));
  counts.push(...burst.filter((r) => r.allowed).map((r) => r.count));
  expect(counts.slice(0, 32)).toEqual(Array.from({ length: 32 }, (_, i) => i + 1));
  expect([...counts].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  expect(burst.filter((r) => !r.allowed)).toHaveLength(12);
  expect(await db.collection('quota_uses').countDocuments({ scope: 'truth:did:a' })).toBe(50);
  // Other scopes and days have quotas of their own.
  expect(await b.consume('truth:did:b', '2026-11-21', 50)).toEqual({ allowed: true, count: 1 });
  expect(await b.consume('truth:did:a', '2026-11-22', 50)).toEqual({ allowed: true, count: 1 });
});

it('deletes the slots of days before yesterday on the first use of a day', async () => {
  const store = new QuotaStore(db);
  await store.consume('truth:did:c', '2026-11-18', 5);
  await store.consume('truth:did:c', '2026-11-19', 5);
  await store.consume('truth:did:c', '2026-11-20', 5);
  const days = async () => (await db.collection('quota_uses').distinct('day', { scope: 'truth:did:c' })).sort();
  await eventually(async () => ((await days()).join() === '2026-11-19,2026-11-20' ? true : undefined), 10000, 'the 2026-11-18 slots to be deleted');
});

it('serialises the callers of one process: a burst on one counter takes one slot per use in a few grouped inserts, none refused', async () => {
  const monitored = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  try {
    const inserts: { refused: boolean; documents?: number }[] = [];
    const documents = new Map<number, number>();
    monitored.on('commandStarted', (event) => {
      if (event.commandName === 'insert') documents.set(event.requestId, (event.command as { documents: unknown[] }).documents.length);
    });
    monitored.on('commandSucceeded', (event) => {
      if (event.commandName === 'insert') inserts.push({ refused: ((event.reply as { writeErrors?: unknown[] }).writeErrors?.length ?? 0) > 0, documents: documents.get(event.requestId) });
    });
    monitored.on('commandFailed', (event) => {
      if (event.commandName === 'insert') inserts.push({ refused: true });
    });
    const store = new QuotaStore(monitored.db(db.databaseName));
    const burst = await Promise.all(Array.from({ length: 64 }, () => store.consume('truth:did:burst', '2026-11-21', 1000)));
    expect(burst.map((r) => r.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 64 }, (_, i) => i + 1));
    // The first caller's insert goes alone; the 63 reserved while it runs go together in the next one.
    expect(inserts.map((i) => i.documents)).toEqual([1, 63]);
    expect(inserts.filter((i) => i.refused)).toHaveLength(0);
  } finally {
    await monitored.close();
  }
});

it('hands a refunded slot out again, in this process and to a process that starts afresh', async () => {
  const store = new QuotaStore(db);
  for (let i = 0; i < 3; i++) await store.consume('truth:did:refund', '2026-11-21', 3);
  expect((await store.consume('truth:did:refund', '2026-11-21', 3)).allowed).toBe(false);
  await store.refund('truth:did:refund', '2026-11-21', 2);
  expect(await db.collection('quota_uses').countDocuments({ scope: 'truth:did:refund' })).toBe(2);
  expect(await store.consume('truth:did:refund', '2026-11-21', 3)).toEqual({ allowed: true, count: 2 });
  expect((await store.consume('truth:did:refund', '2026-11-21', 3)).allowed).toBe(false);

  await store.refund('truth:did:refund', '2026-11-21', 1);
  const fresh = new QuotaStore(db);
  expect(await fresh.consume('truth:did:refund', '2026-11-21', 3)).toEqual({ allowed: true, count: 1 });
  expect((await fresh.consume('truth:did:refund', '2026-11-21', 3)).allowed).toBe(false);
  expect(await db.collection('quota_uses').countDocuments({ scope: 'truth:did:refund' })).toBe(3);
});
