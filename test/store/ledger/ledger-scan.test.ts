/**
 * The ledger's scan (store/ledger/reads.ts) reads the collection in its stored order, without a sort, and yields
 * entries in seq order through a bounded window: here the entries are stored shuffled, the window is small, and
 * one entry is missing.
 */
import { Ledger } from '../../../store/ledger/ledger';
import { LedgerReads } from '../../../store/ledger/reads';
import { LEDGER_COLLECTION } from '../../../store/ledger/entries';
import type { LedgerEntryDocument } from '../../../core/ledger/ledger-entry';
import { useStoreDb } from '../../support/store-db';

const source = useStoreDb('ledger_scan_source');
const shuffled = useStoreDb('ledger_scan_shuffled');

it('yields every entry once, in seq order, from a collection stored out of order, and skips a missing seq', async () => {
  const ledger = new Ledger(source.db);
  await ledger.appendBulk(
    Array.from({ length: 600 }, (_, i) => ({ kind: 'truth' as const, key: `scan.${i}`, value: { i } })),
    100
  );
  const docs = await source.db.collection<LedgerEntryDocument>(LEDGER_COLLECTION).find({}).toArray();
  // A deterministic shuffle: blocks of 50 in reverse order, each reversed every other time.
  const blocks: LedgerEntryDocument[][] = [];
  for (let i = 0; i < docs.length; i += 50) blocks.push(docs.slice(i, i + 50));
  const stored = blocks.reverse().flatMap((b, i) => (i % 2 ? b : [...b].reverse()));
  const missing = 333;
  await shuffled.db
    .collection<LedgerEntryDocument>(LEDGER_COLLECTION)
    .insertMany(stored.filter((d) => d._id !== missing));
  const other = new Ledger(shuffled.db);
  const reads = new LedgerReads(shuffled.db, other.engine, other.keyTree);
  for (const window of [8, 4096]) {
    const seen: number[] = [];
    for await (const doc of reads.scan(37, window)) seen.push(doc._id);
    expect(seen).toEqual(Array.from({ length: 600 }, (_, i) => i + 1).filter((s) => s !== missing));
  }
});
