/**
 * The ledger's seeding fast path (Ledger.appendBulk, used by bench:ledger to fill a large ledger) against the
 * embedded FerretDB: the entries it writes are the entries appends would write (verify recomputes the same root),
 * and ordinary appends continue after them, from this process and from another.
 */
import { MongoClient } from 'mongodb';
import { Ledger } from '../../../store/ledger/ledger';
import { verifyLedger } from '../../../store/ledger/ledger-verify';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('ledger_bulk');

it('writes a valid ledger in chunks, and appends continue after it', async () => {
  const ledger = new Ledger(testDb.db);
  await ledger.append({ kind: 'truth', key: 'before.bulk', value: { n: 0 } });
  const size = await ledger.appendBulk(
    Array.from({ length: 2500 }, (_, i) => ({
      kind: 'truth' as const,
      key: `bulk.${i}`,
      value: { i },
      truth_type: 'data',
      did: 'did:example:seeder'
    })),
    1000
  );
  expect(size).toBe(2501);
  const after = await ledger.append({ kind: 'truth', key: 'after.bulk', value: { n: 1 } });
  expect(after.entry.seq).toBe(2502);
  // Another process, which has never seen the tail, appends at the right place too.
  const otherLedger = new Ledger(testDb.db);
  const other = await otherLedger.append({ kind: 'truth', key: 'other.process', value: {} });
  expect(other.entry.seq).toBe(2503);
  // Its head record follows its answer (store/ledger/commit-engine.ts, publish).
  await otherLedger.headPublished();
  const report = await verifyLedger(ledger);
  expect(report).toMatchObject({ consistent: true, first_bad_seq: null });
  expect(await ledger.head()).toEqual({ size: 2503, root: other.entry.root });
});
