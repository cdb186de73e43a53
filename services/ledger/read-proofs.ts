/**
 * The ledger's public proofs (GET /api/proof/inclusion, /api/proof/consistency: RFC 6962 audit paths over the
 * Merkle tree) and the check of the execution-seed hash chain (GET /api/verify-seed): each value under the seed
 * prefix names the leaf hash of the seed record before it.
 */
import { AppError } from '../../core/errors';
import { publicEntry } from '../../core/ledger/ledger-entry';
import { consistencyProof, inclusionProof, toHex } from '../../core/ledger/merkle.node';
import { SEED_KEY_PREFIX } from '../../core/ledger/truth-record';
import type { Ledger } from '../../store/ledger/ledger';

export function createLedgerProofs(ledger: Ledger) {
  /** The audit path of entry `seq` in the tree of `treeSize` entries (the current size when not given). */
  async function inclusion(seq: number, treeSize: number | undefined) {
    const head = await ledger.head();
    const size = treeSize ?? head.size;
    if (size > head.size) throw new AppError('not_found', `tree_size ${size} is larger than the ledger (${head.size})`);
    if (seq > head.size) throw new AppError('not_found', `no entry ${seq}: the ledger has ${head.size}`);
    if (seq > size)
      throw new AppError('invalid_request', `seq ${seq} is not in a tree of ${size} entries`, {
        fields: [{ field: 'querystring.seq', message: 'must be <= tree_size' }]
      });
    // The two entries and the path's subtrees in one round of lookups.
    const [entry, atSize, path] = await Promise.all([
      ledger.get(seq),
      ledger.get(size),
      inclusionProof(seq - 1, size, (l, i) => ledger.perfectSubtree(l, i)).catch((err: Error) => err)
    ]);
    if (!entry || !atSize) throw new AppError('not_found', `entry ${!entry ? seq : size} is missing from the ledger`);
    if (path instanceof Error) throw path;
    return {
      ok: true as const,
      seq,
      leaf_index: seq - 1,
      tree_size: size,
      leaf_hash: entry.leaf_hash,
      root: atSize.root,
      audit_path: path.map(toHex),
      entry: publicEntry(entry)
    };
  }

  /** The proof that the tree of `first` entries is a prefix of the tree of `second`. */
  async function consistency(first: number, second: number) {
    if (first > second)
      throw new AppError('invalid_request', 'first must be <= second', {
        fields: [{ field: 'querystring.first', message: 'must be <= second' }]
      });
    const head = await ledger.head();
    if (second > head.size)
      throw new AppError('not_found', `second ${second} is larger than the ledger (${head.size})`);
    const [a, b, proof] = await Promise.all([
      ledger.get(first),
      ledger.get(second),
      consistencyProof(first, second, (l, i) => ledger.perfectSubtree(l, i)).catch((err: Error) => err)
    ]);
    if (!a || !b) throw new AppError('not_found', 'an entry of the requested sizes is missing from the ledger');
    if (proof instanceof Error) throw proof;
    return { ok: true as const, first, second, first_root: a.root, second_root: b.root, proof: proof.map(toHex) };
  }

  /** Walks every seed record in order and reports the chain's length, head and first break. */
  async function verifySeedChain() {
    let previous: string | null = null;
    let length = 0;
    let firstBreak: { seq: number; expected_prev_seed_hash: string | null; found: unknown } | null = null;
    for (let after = 0; ;) {
      const batch = await ledger.after(after, 500, { keyPrefix: SEED_KEY_PREFIX });
      if (batch.length === 0) break;
      for (const e of batch) {
        const found = (JSON.parse(e.value_json) as Record<string, unknown>).prev_seed_hash ?? null;
        if (!firstBreak && found !== previous) firstBreak = { seq: e.seq, expected_prev_seed_hash: previous, found };
        previous = e.leaf_hash;
        length += 1;
      }
      // A short batch is the last: no read of an empty one after it.
      if (batch.length < 500) break;
      after = batch[batch.length - 1]!.seq;
    }
    return {
      ok: firstBreak === null,
      chain_length: length,
      head_hash: previous,
      first_break: firstBreak,
      rule: `each ${SEED_KEY_PREFIX}* value carries prev_seed_hash = leaf_hash of the previous seed record (null for the first)`,
      checked_at: new Date().toISOString()
    };
  }

  return { inclusion, consistency, verifySeedChain };
}
