/**
 * store/mongo.ts writeInCommands against the embedded FerretDB: bulk writes of many statements, several at once, all
 * land. Sent as one command each, these three would hold some 180 of FerretDB 1.24's 50 PostgreSQL connections and
 * hang it for every client (its update handler keeps each statement's query open until the command ends).
 */
import { COMMANDS_AT_ONCE, STATEMENTS_PER_COMMAND, deleteByIds, writeInCommands } from '../../store/mongo';
import { useStoreDb } from '../support/store-db';

const store = useStoreDb('write_in_commands', { indexes: false });

it('lands three bulk writes of 60 upserts each, sent at once, and deletes by id the same way', async () => {
  const docs = store.db.collection<{ _id: string; n: number; writer?: number }>('docs');
  await docs.insertMany(Array.from({ length: 90 }, (_, i) => ({ _id: `d${i}`, n: 0 })));
  // Each writer updates 60 documents: 45 that exist, 15 new (upserts).
  await Promise.all(
    [0, 1, 2].map((writer) =>
      writeInCommands(
        docs,
        Array.from({ length: 60 }, (_, i) => {
          const _id = i < 45 ? `d${writer * 15 + i}` : `new${writer}_${i}`;
          return { updateOne: { filter: { _id }, update: { $set: { [`w${writer}`]: i } }, upsert: true } };
        }),
        { retryUpserts: true }
      )
    )
  );
  const all = await docs.find({}).toArray();
  expect(all).toHaveLength(90 + 3 * 15);
  for (const writer of [0, 1, 2])
    expect(all.filter((d) => (d as Record<string, unknown>)[`w${writer}`] !== undefined)).toHaveLength(60);
  await deleteByIds(
    docs,
    all.map((d) => d._id)
  );
  expect(await docs.countDocuments({})).toBe(0);
  expect(STATEMENTS_PER_COMMAND * COMMANDS_AT_ONCE).toBeLessThan(50 / 2);
}, 60_000);
