/**
 * Recomputes the Merkle root from every stored entry, streaming (memory stays flat: one batch plus the O(log n)
 * frontier), and checks each entry against what was recorded when it was appended. Names the first bad seq:
 * an entry whose content no longer hashes to its leaf hash, whose position is wrong, that is missing, or after
 * which the recomputed root differs from the root recorded then, or whose tally (entries by category, what
 * /api/status-data/assets reads) differs from the entries before it.
 * The stored root is the head record's (what /api/status publishes), so dropping the newest entries shows too;
 * a client can also check a signed tree head it kept with /api/proof/consistency.
 */
import { ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import { appendToFrontier, Hash, leafHash, rootFromFrontier, toHex } from '../../core/ledger/merkle.node';
import { addToTally, LedgerTally, talliesEqual, tallyCategory } from '../../core/ledger/tally';
import { Ledger } from './ledger';

export interface VerifyReport {
  consistent: boolean;
  computed: string;
  stored: string;
  ledger_lines: number;
  first_bad_seq: number | null;
  problem: string | null;
}

export async function verifyLedger(ledger: Ledger): Promise<VerifyReport> {
  let frontier: Hash[] = [];
  let size = 0;
  let firstBad: { seq: number; problem: string } | null = null;
  const head = await ledger.headWithTally();
  let lastRecordedRoot = toHex(rootFromFrontier([]));
  let tally: LedgerTally = {};
  for await (const doc of ledger.scan()) {
    const expected = size + 1;
    if (!firstBad && (doc._id !== expected || doc.seq !== expected)) {
      firstBad =
        doc._id > expected
          ? { seq: expected, problem: `entry ${expected} is missing` }
          : { seq: expected, problem: `entry at position ${expected} carries seq ${doc.seq}` };
    }
    const leaf = leafHash(ledgerLeafBytes(doc, doc.value_json));
    if (!firstBad && toHex(leaf) !== doc.leaf_hash)
      firstBad = {
        seq: doc.seq,
        problem: `entry ${doc.seq} does not hash to its recorded leaf hash (content altered)`
      };
    frontier = appendToFrontier(frontier, size, leaf).frontier;
    size += 1;
    const root = toHex(rootFromFrontier(frontier));
    if (!firstBad && root !== doc.root)
      firstBad = { seq: doc.seq, problem: `root after entry ${doc.seq} differs from the root recorded at append time` };
    tally = addToTally(tally, tallyCategory(doc.kind, doc.truth_type));
    if (!firstBad && doc.tally && !talliesEqual(doc.tally, tally))
      firstBad = {
        seq: doc.seq,
        problem: `the tally recorded with entry ${doc.seq} differs from the entries up to it`
      };
    lastRecordedRoot = doc.root;
  }
  if (!firstBad && head.size > size)
    firstBad = {
      seq: size + 1,
      problem: `entries ${size + 1}..${head.size} are missing (the head records ${head.size})`
    };
  // The head record's tally is what /api/status-data/assets serves.
  if (!firstBad && head.size === size && head.tally && !talliesEqual(head.tally, tally))
    firstBad = { seq: size, problem: `the tally of the head record at ${size} differs from the entries` };
  const computed = toHex(rootFromFrontier(frontier));
  // A head that lags the entries (a writer stopped between its insert and its head update) is not damage.
  const stored = head.size === size ? head.root : lastRecordedRoot;
  return {
    consistent: firstBad === null && computed === stored,
    computed,
    stored,
    ledger_lines: size,
    first_bad_seq: firstBad?.seq ?? null,
    problem: firstBad?.problem ?? (computed === stored ? null : 'recomputed root differs from the stored root')
  };
}
