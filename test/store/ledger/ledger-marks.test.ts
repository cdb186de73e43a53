/**
 * What the status reads take from the ledger without reading entries (store/ledger/heads.ts): the head record
 * carries its last entry's time, and the marks (the size the first head record of each 5 s bucket published)
 * count recent appends. Against the embedded FerretDB.
 */
import { MongoClient } from 'mongodb';
import { LEDGER_MARKS_COLLECTION, MARK_BUCKET_MS } from '../../../store/ledger/heads';
import { Ledger } from '../../../store/ledger/ledger';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('ledger_marks');

const bucketOf = (ms: number) => Math.floor(ms / MARK_BUCKET_MS);

it('gives the last entry time with the head, from this process and from another that only reads records', async () => {
  const writer = new Ledger(testDb.db);
  expect(await writer.headWithTime()).toMatchObject({ size: 0, last_entry_at: null });
  await writer.append({ kind: 'truth', key: 'marks.a', value: { n: 1 } });
  const second = await writer.append({ kind: 'truth', key: 'marks.b', value: { n: 2 } });
  // Before and after its head record is inserted.
  expect(await writer.headWithTime()).toEqual({
    size: 2,
    root: second.entry.root,
    last_entry_at: second.entry.created_at
  });
  await writer.headPublished();
  expect(await new Ledger(testDb.db).headWithTime()).toEqual({
    size: 2,
    root: second.entry.root,
    last_entry_at: second.entry.created_at
  });
});

it('counts appends since a time from the marks, and says when no mark is that old', async () => {
  const ledger = new Ledger(testDb.db);
  const marks = testDb.db.collection<{ _id: number; size: number; at: string }>(LEDGER_MARKS_COLLECTION);
  await ledger.append({ kind: 'truth', key: 'marks.c', value: { n: 3 } });
  await ledger.headPublished();
  const now = Date.now();
  // Only marks of this run exist, none a minute old, and the ledger began within the minute: every entry counts.
  expect(await ledger.appendsSince(new Date(now - 60_000))).toEqual({ appends: 3, marked: true });
  // A ledger that began before the window, with no mark that old (written before marks existed): the caller counts.
  const entry1 = (await testDb.db.collection<{ _id: number; created_at: string }>('ledger').findOne({ _id: 1 }))!;
  await testDb.db
    .collection<{ _id: number; created_at: string }>('ledger')
    .updateOne({ _id: 1 }, { $set: { created_at: new Date(now - 3_600_000).toISOString() } });
  expect(await new Ledger(testDb.db).appendsSince(new Date(now - 60_000))).toEqual({ appends: 3, marked: false });
  await testDb.db
    .collection<{ _id: number; created_at: string }>('ledger')
    .updateOne({ _id: 1 }, { $set: { created_at: entry1.created_at } });

  // A ledger that was written two minutes ago (size 0 then), and again in this bucket.
  await marks.insertOne({ _id: bucketOf(now - 120_000), size: 0, at: new Date(now - 120_000).toISOString() });
  const first = (await marks
    .find({ _id: { $gt: bucketOf(now - 60_000) } })
    .sort({ _id: 1 })
    .limit(1)
    .next())!;
  const head = await ledger.head();
  expect(await ledger.appendsSince(new Date(now - 60_000))).toEqual({ appends: head.size - first.size, marked: true });
  // Nothing was appended after now (no mark of a later bucket): zero, not what the last bucket held.
  expect(await ledger.appendsSince(new Date(now + MARK_BUCKET_MS))).toEqual({ appends: 0, marked: true });
});

it("never answers a head older than its own acknowledged write, even when that write's head record lands during the read", async () => {
  // Each head() right after an append races the insert of that append's head record: the record may land while
  // the read is running (and be missing from what it returns). Before the fix 47 of these 150 writes read stale.
  const ledger = new Ledger(testDb.db);
  const stale: number[] = [];
  for (let i = 0; i < 150; i++) {
    const { entry } = await ledger.append({ kind: 'truth', key: `marks.race.${i}`, value: { i } });
    const heads = await Promise.all([
      ledger.head(),
      new Promise((r) => setTimeout(r, i % 5)).then(() => ledger.head())
    ]);
    for (const head of heads) if (head.size < entry.seq) stale.push(entry.seq);
  }
  expect(stale).toEqual([]);
  // Its last head record (published after the position lists) must not land in the next test's marks.
  await ledger.headPublished();
});

it('keeps no tally on a ledger begun before tallies existed, and starts one on a new ledger', async () => {
  // A ledger whose entries carry no tally (written by an earlier version): its head says so, and what follows has none.
  const ledger = new Ledger(testDb.db);
  const { entry } = await ledger.append({ kind: 'truth', key: 'marks.tally.1', value: { n: 1 } });
  await ledger.headPublished();
  expect((await ledger.headWithTally()).tally).toMatchObject({ untyped: expect.any(Number) });
  await testDb.db.collection('ledger').updateMany({}, { $unset: { tally: '' } });
  await testDb.db.collection('ledger_head').updateMany({}, { $unset: { tally: '' } });
  const fresh = new Ledger(testDb.db);
  const next = await fresh.append({ kind: 'event', key: 'marks.tally.2', value: { n: 2 } });
  expect(next.entry.seq).toBe(entry.seq + 1);
  expect(next.entry.tally).toBeUndefined();
  expect((await fresh.headWithTally()).tally).toBeNull();
  await fresh.headPublished();
});

it('reads the marks around a past window start once, and those of a recent one at every call', async () => {
  const ledger = new Ledger(testDb.db);
  const marks = testDb.db.collection<{ _id: number; size: number; at: string }>(LEDGER_MARKS_COLLECTION);
  await ledger.append({ kind: 'truth', key: 'marks.span', value: { n: 1 } });
  await ledger.headPublished();
  const head = await ledger.head();
  const now = Date.now();
  const at = (ms: number) => ({ _id: bucketOf(now - ms), at: new Date(now - ms).toISOString() });
  await marks.insertMany([
    { ...at(1_010_000), size: 0 },
    { ...at(990_000), size: 1 }
  ]);
  const since = new Date(now - 1_000_000);
  expect(await ledger.appendsSince(since)).toEqual({ appends: head.size - 1, marked: true });
  // Marks of past buckets never change: the second call answers from what the first read (the marks are gone now).
  await marks.deleteMany({ _id: { $in: [bucketOf(now - 1_010_000), bucketOf(now - 990_000)] } });
  expect(await ledger.appendsSince(since)).toEqual({ appends: head.size - 1, marked: true });
  // A window whose next mark is of the last seconds (this append's) is read again: another writer's clock may be
  // a little behind.
  const recent = new Date(now - 30_000);
  // A mark before it, whatever the earlier tests left (a ledger begun within the window would count every entry).
  await marks.insertOne({ ...at(60_000), size: 0 }).catch(() => undefined);
  const expected = async () => {
    const next = await marks
      .find({ _id: { $gt: bucketOf(now - 30_000) } })
      .sort({ _id: 1 })
      .limit(1)
      .next();
    return { appends: next ? head.size - next.size : 0, marked: true };
  };
  expect(await ledger.appendsSince(recent)).toEqual(await expected());
  await marks.deleteMany({ _id: { $gt: bucketOf(now - 30_000) } });
  expect(await ledger.appendsSince(recent)).toEqual({ appends: 0, marked: true });
});
