/**
 * The tail a writer starts from when no head record gives it (a process that never wrote, the records gone): entries
 * are stored without their Merkle frontier, which is rebuilt from the `completed` hashes of the entries that
 * completed each of its subtrees; an entry of an earlier version, which stored its frontier, is read as it is.
 */
import { LEDGER_COLLECTION } from '../../../store/ledger/entries';
import { LEDGER_HEAD_COLLECTION } from '../../../store/ledger/heads';
import { Ledger } from '../../../store/ledger/ledger';
import { verifyLedger } from '../../../store/ledger/ledger-verify';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('ledger_tail');

// Each test begins an empty ledger.
beforeEach(async () => {
  await Promise.all(['ledger', 'ledger_head', 'ledger_marks'].map((name) => testDb.db.collection(name).deleteMany({})));
});

const entries = () => testDb.db.collection<Record<string, unknown> & { _id: number }>(LEDGER_COLLECTION);
const heads = () => testDb.db.collection<Record<string, unknown> & { _id: string }>(LEDGER_HEAD_COLLECTION);

it('stores entries without their frontier and rebuilds it for a writer that reads the tail', async () => {
  const ledger = new Ledger(testDb.db);
  await Promise.all(
    Array.from({ length: 300 }, (_, i) => ledger.append({ kind: 'truth', key: `tail.${i}`, value: { i } }))
  );
  await ledger.headPublished();
  const newest = await entries().findOne({ _id: 300 });
  expect(newest).toMatchObject({ seq: 300, completed: expect.any(Array) });
  expect(newest).not.toHaveProperty('frontier');
  // No head record to start from: another process reads the newest entry and rebuilds its frontier (300 = 256 + 32 + 8
  // + 4: entries 256, 288, 296 and 300).
  await heads().deleteMany({});
  const other = new Ledger(testDb.db);
  const next = await other.append({ kind: 'truth', key: 'tail.next', value: {} });
  expect(next.entry.seq).toBe(301);
  await other.headPublished();
  expect(await verifyLedger(other)).toMatchObject({ consistent: true, ledger_lines: 301, first_bad_seq: null });
  expect(await other.head()).toEqual({ size: 301, root: next.entry.root });
});

it('continues a ledger whose newest entry carries its frontier (an earlier version stored it)', async () => {
  const ledger = new Ledger(testDb.db);
  for (let i = 0; i < 10; i++) await ledger.append({ kind: 'truth', key: `earlier.${i}`, value: { i } });
  await ledger.headPublished();
  const head = await heads().find({}).sort({ _id: -1 }).limit(1).next();
  expect(head).toMatchObject({ size: 10, frontier: expect.any(Array) });
  // Entry 10 as an earlier version wrote it; entry 8's subtrees made unreadable, so only the stored frontier can serve.
  await entries().updateOne({ _id: 10 }, { $set: { frontier: head!.frontier } });
  await entries().updateOne({ _id: 8 }, { $set: { completed: [] } });
  await heads().deleteMany({});
  const other = new Ledger(testDb.db);
  const next = await other.append({ kind: 'truth', key: 'earlier.next', value: {} });
  expect(next.entry.seq).toBe(11);
  expect(await verifyLedger(other)).toMatchObject({ consistent: true, ledger_lines: 11 });
});
