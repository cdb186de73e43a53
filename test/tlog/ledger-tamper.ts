/**
 * A hub's database altered behind its back, the way someone who knows the ledger's layout would do it so that the
 * hub itself does not notice: the entries rewritten with every Merkle field recomputed (leaf hashes, completed
 * subtrees, roots), the head record replaced, and the hub's record of the checkpoints it signed (`tlog_checkpoints`),
 * of its witnesses' progress (`tlog_cosignatures`) and the tiles it served (`tlog_tiles`) deleted, as a doctored
 * backup restored without them would be. The hub then signs the rewritten tree as if it were its first: only its witnesses, which keep their own
 * record of what they cosigned, can catch it. (Altering the ledger without covering the tracks is caught by the hub
 * itself: test/api/tlog.test.ts, 500 ledger_fork.) For the federation drill of test/api/tlog-federation.test.ts.
 */
import type { Db } from 'mongodb';
import { LedgerEntryDocument, ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import { appendToFrontier, Hash, leafHash, rootFromFrontier, toHex } from '../../core/ledger/merkle.node';

const pad = (size: number) => String(size).padStart(16, '0');

/** Every entry of a (small) ledger, oldest first. */
async function allEntries(db: Db): Promise<LedgerEntryDocument[]> {
  return db.collection<LedgerEntryDocument>('ledger').find({}).sort({ _id: 1 }).toArray();
}

/**
 * Rewrites the ledger to `entries` (numbered again from 1, in order) with the Merkle state recomputed, replacing
 * the stored documents from the first that differs; then the head record, then (last, so that the hub cannot sign
 * anything in between: while its record is there, a changed tree is a fork it refuses) the tlog records.
 */
async function rewrite(db: Db, before: LedgerEntryDocument[], entries: LedgerEntryDocument[]): Promise<void> {
  const ledger = db.collection<LedgerEntryDocument>('ledger');
  let frontier: Hash[] = [];
  const rebuilt = entries.map((e, i) => {
    const seq = i + 1;
    const leaf = leafHash(ledgerLeafBytes({ ...e, seq }, e.value_json));
    const next = appendToFrontier(frontier, i, leaf);
    frontier = next.frontier;
    const { frontier: _stale, ...doc } = e;
    return {
      ...doc,
      _id: seq,
      seq,
      leaf_hash: toHex(leaf),
      completed: next.completed.map(toHex),
      root: toHex(rootFromFrontier(frontier))
    };
  });
  const firstChanged = rebuilt.findIndex((d, i) => before[i]?.root !== d.root || before[i]?.leaf_hash !== d.leaf_hash);
  if (firstChanged < 0) throw new Error('the rewritten ledger is the same');
  await ledger.deleteMany({ _id: { $gt: firstChanged } });
  await ledger.insertMany(rebuilt.slice(firstChanged));
  const last = rebuilt[rebuilt.length - 1]!;
  const heads = db.collection<{ _id: string }>('ledger_head');
  await heads.replaceOne(
    { _id: pad(last._id) },
    {
      size: last._id,
      root: last.root,
      frontier: frontier.map(toHex),
      last_entry_at: last.created_at,
      ...(last.tally ? { tally: last.tally } : {}),
      updated_at: new Date().toISOString()
    },
    { upsert: true }
  );
  await heads.deleteMany({ _id: { $ne: pad(last._id) } });
  await db.collection('tlog_checkpoints').deleteMany({});
  await db.collection('tlog_cosignatures').deleteMany({});
  await db.collection('tlog_tiles').deleteMany({});
}

/** Changes the value of entry `seq` (the size stays; the root at every size from `seq` on changes). */
export async function changeEntry(db: Db, seq: number, valueJson: string): Promise<void> {
  const before = await allEntries(db);
  const entries = before.map((e) => (e._id === seq ? { ...e, value_json: valueJson } : e));
  await rewrite(db, before, entries);
}

/** Removes entry `seq`; the entries after it move down one seq (the ledger is one entry shorter). */
export async function removeEntry(db: Db, seq: number): Promise<void> {
  const before = await allEntries(db);
  await rewrite(
    db,
    before,
    before.filter((e) => e._id !== seq)
  );
}
