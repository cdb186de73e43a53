/**
 * The position lists after a writer stopped between its entries and its head record (store/ledger/positions.ts):
 * every acknowledged entry is read at once through the filtered reads (entries after the newest record carrying
 * positions are read by `_id`), and the next writer publishes the positions of the entries it finds.
 */
import { LEDGER_HEAD_COLLECTION } from '../../../store/ledger/heads';
import { Ledger } from '../../../store/ledger/ledger';
import { LEDGER_POSITIONS_COLLECTION } from '../../../store/ledger/positions';
import { LEDGER_COLLECTION } from '../../../store/ledger/entries';
import type { LedgerEntryDocument } from '../../../core/ledger/ledger-entry';
import { TRUTH_TYPES } from '../../../core/ledger/truth-record';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('ledger_positions');
const PUBLIC = ['meta_law', 'rule', 'protocol', 'config', 'data'];

async function everything(): Promise<LedgerEntryDocument[]> {
  const all = await testDb.db.collection<LedgerEntryDocument>(LEDGER_COLLECTION).find({}).toArray();
  return all.sort((a, b) => a.seq - b.seq);
}

async function expectReadsExact(ledger: Ledger): Promise<void> {
  const all = await everything();
  const newestFirst = [...all].reverse();
  const seqs = (docs: LedgerEntryDocument[]) => docs.map((d) => d.seq);
  expect(seqs(await ledger.latest(200))).toEqual(seqs(newestFirst.slice(0, 200)));
  expect(seqs(await ledger.latest(200, { kind: 'truth' }))).toEqual(
    seqs(newestFirst.filter((e) => e.kind === 'truth').slice(0, 200))
  );
  expect(seqs(await ledger.latest(50, { kind: 'truth', truthTypes: PUBLIC }))).toEqual(
    seqs(newestFirst.filter((e) => e.kind === 'truth' && PUBLIC.includes(e.truth_type ?? '')).slice(0, 50))
  );
  expect(seqs(await ledger.latest(30, { kind: 'event' }))).toEqual(
    seqs(newestFirst.filter((e) => e.kind === 'event').slice(0, 30))
  );
  const seed = 'KERNEL.EVOLUTION.DIRECTIVE.';
  expect(seqs(await ledger.after(0, 500, { keyPrefix: seed }))).toEqual(
    seqs(all.filter((e) => e.key.startsWith(seed)))
  );
}

it('reads every acknowledged entry after a writer stopped before its head record, and republishes its positions', async () => {
  const a = new Ledger(testDb.db);
  const types = ['data', 'rule', 'observation', null, 'made-up'];
  const write = (ledger: Ledger, i: number) =>
    ledger.append({
      kind: i % 7 === 0 ? 'event' : 'truth',
      key: i % 11 === 0 ? `KERNEL.EVOLUTION.DIRECTIVE.${i}` : `positions.${i}`,
      value: { i },
      truth_type: types[i % types.length]
    });
  const heads = testDb.db.collection<{ _id: string; size: number }>(LEDGER_HEAD_COLLECTION);
  for (let i = 0; i < 240; i += 30) await Promise.all(Array.from({ length: 30 }, (_, j) => write(a, i + j)));
  await a.headPublished();
  const record = await heads.find({}).sort({ size: -1 }).limit(1).next();
  expect(record).toMatchObject({ size: 240, positions: expect.any(Object) });
  for (let i = 240; i < 300; i += 30) await Promise.all(Array.from({ length: 30 }, (_, j) => write(a, i + j)));
  await a.headPublished();
  await expectReadsExact(a);

  // The writer "stops" after entry 240: the head records past it are gone, and so are the positions it published
  // for the entries after it (as if its last head records and the lists before them never went out).
  await heads.deleteMany({ size: { $gt: 240 } });
  await heads.insertOne(record!).catch(() => undefined);
  const newestKept = 240;
  const positions = testDb.db.collection<Record<string, unknown> & { _id: string }>(LEDGER_POSITIONS_COLLECTION);
  for (const doc of await positions.find({}).toArray()) {
    const unset: Record<string, ''> = Object.fromEntries(
      Object.entries(doc)
        .filter(([f, v]) => f.startsWith('p') && typeof v === 'number' && v > newestKept)
        .map(([f]) => [f, '' as const])
    );
    if (Object.keys(unset).length > 0) await positions.updateOne({ _id: doc._id }, { $unset: unset });
  }

  // Another process reads everything at once: the entries after the record are read by `_id`.
  const b = new Ledger(testDb.db);
  await expectReadsExact(b);
  // Its next write publishes the positions of the entries it finds, then its own.
  for (let i = 300; i < 330; i++) await write(b, i);
  await b.headPublished();
  const newest = await heads.find({}).sort({ size: -1 }).limit(1).next();
  expect(newest).toMatchObject({ size: 330, positions: expect.any(Object) });
  await expectReadsExact(new Ledger(testDb.db));
  // Every list is complete: its length in the record equals its entries in the ledger.
  const all = await everything();
  const counts = (newest as unknown as { positions: Record<string, number> }).positions;
  expect(counts.event).toBe(all.filter((e) => e.kind === 'event').length);
  expect(counts.seed).toBe(all.filter((e) => e.key.startsWith('KERNEL.EVOLUTION.DIRECTIVE.')).length);
  const known: readonly string[] = TRUTH_TYPES;
  expect(counts.other).toBe(
    all.filter((e) => e.kind === 'truth' && e.truth_type !== null && !known.includes(e.truth_type)).length
  );
});
