/**
 * Merkle tree hashing and proofs as in RFC 6962 / RFC 9162 (Certificate Transparency):
 *   leaf hash = SHA-256(0x00 || leaf bytes), node hash = SHA-256(0x01 || left || right), empty root = SHA-256("").
 * The ledger keeps a "frontier" (the roots of the perfect subtrees that make up the tree, largest first) so an
 * append costs O(log n) hashes, and records each perfect subtree it completes so proofs need O(log n) reads.
 * Pure code: no I/O. Proof generation takes an async range-hash oracle so storage stays outside.
 */
import { createHash } from 'node:crypto';

export type Hash = Buffer;

export function leafHash(leafBytes: Buffer | string): Hash {
  return createHash('sha256')
    .update(Buffer.from([0]))
    .update(leafBytes)
    .digest();
}

export function nodeHash(left: Hash, right: Hash): Hash {
  return createHash('sha256')
    .update(Buffer.from([1]))
    .update(left)
    .update(right)
    .digest();
}

export const EMPTY_ROOT: Hash = createHash('sha256').digest();

/** Largest power of two strictly smaller than n (n >= 2). */
export function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

const isPowerOfTwo = (n: number) => n > 0 && (n & (n - 1)) === 0;

/**
 * Appends one leaf to a frontier of a tree of `size` leaves.
 * Returns the new frontier and the perfect subtrees completed by this leaf: completed[0] is the leaf itself
 * (level 0), completed[i] the subtree of 2^i leaves that ends at this leaf.
 */
export function appendToFrontier(frontier: Hash[], size: number, leaf: Hash): { frontier: Hash[]; completed: Hash[] } {
  const next = frontier.slice();
  const completed: Hash[] = [leaf];
  let acc = leaf;
  let m = size;
  while (m & 1) {
    const left = next.pop();
    if (!left) throw new Error(`frontier of size ${size} has too few subtrees`);
    acc = nodeHash(left, acc);
    completed.push(acc);
    m = Math.floor(m / 2);
  }
  next.push(acc);
  return { frontier: next, completed };
}

/**
 * Where the frontier of a tree of `size` leaves was recorded: for each of its perfect subtrees, largest first, the
 * leaf that completed it (`seq`, 1-based) and its level (2^level leaves), so frontier[i] = completed[level] of entry
 * seq (appendToFrontier). E.g. size 6: the subtree of 4 leaves completed by leaf 4, then the one of 2 by leaf 6.
 */
export function frontierEnds(size: number): { seq: number; level: number }[] {
  const ends: { seq: number; level: number }[] = [];
  let seq = 0;
  for (let level = Math.floor(Math.log2(Math.max(size, 1))) + 1; level >= 0; level--) {
    const leaves = 2 ** level;
    if (Math.floor(size / leaves) % 2 === 1) {
      seq += leaves;
      ends.push({ seq, level });
    }
  }
  return ends;
}

/** The root of the tree whose perfect-subtree decomposition is `frontier` (largest first). */
export function rootFromFrontier(frontier: Hash[]): Hash {
  if (frontier.length === 0) return EMPTY_ROOT;
  let acc = frontier[frontier.length - 1]!;
  for (let i = frontier.length - 2; i >= 0; i--) acc = nodeHash(frontier[i]!, acc);
  return acc;
}

/** The root over a whole list of leaf hashes (used by tests and the verifier). */
export function rootOfLeaves(leaves: Hash[]): Hash {
  let frontier: Hash[] = [];
  leaves.forEach((leaf, i) => {
    frontier = appendToFrontier(frontier, i, leaf).frontier;
  });
  return rootFromFrontier(frontier);
}

/** Hash of the leaf range [start, end); `perfect(level, index)` returns the perfect subtree of 2^level leaves at index. */
export type PerfectSubtree = (level: number, index: number) => Promise<Hash>;

export async function rangeHash(start: number, end: number, perfect: PerfectSubtree): Promise<Hash> {
  const n = end - start;
  if (n <= 0) return EMPTY_ROOT;
  if (isPowerOfTwo(n) && start % n === 0) return perfect(Math.log2(n), start / n);
  const k = splitPoint(n);
  const [left, right] = await Promise.all([rangeHash(start, start + k, perfect), rangeHash(start + k, end, perfect)]);
  return nodeHash(left, right);
}

/**
 * RFC 6962 PATH(m, D[0:n]): the audit path of leaf `index` in the tree of `size` leaves, deepest sibling first. The
 * ranges are worked out first and their hashes read at once (one round of lookups, not one per level).
 */
export async function inclusionProof(index: number, size: number, perfect: PerfectSubtree): Promise<Hash[]> {
  if (!(index >= 0 && index < size)) throw new RangeError(`leaf index ${index} is outside a tree of ${size}`);
  const ranges: [number, number][] = [];
  const path = (m: number, start: number, end: number): void => {
    const n = end - start;
    if (n === 1) return;
    const k = splitPoint(n);
    if (m < k) {
      path(m, start, start + k);
      ranges.push([start + k, end]);
    } else {
      path(m - k, start + k, end);
      ranges.push([start, start + k]);
    }
  };
  path(index, 0, size);
  return Promise.all(ranges.map(([start, end]) => rangeHash(start, end, perfect)));
}

/**
 * RFC 6962 PROOF(m, D[0:n]): proves that the tree of `first` leaves is a prefix of the tree of `second` leaves. As
 * for inclusionProof, every range's hash is read at once.
 */
export async function consistencyProof(first: number, second: number, perfect: PerfectSubtree): Promise<Hash[]> {
  if (!(first >= 0 && first <= second))
    throw new RangeError(`consistency needs 0 <= first <= second, got ${first}, ${second}`);
  if (first === 0 || first === second) return [];
  const ranges: [number, number][] = [];
  const sub = (m: number, start: number, end: number, complete: boolean): void => {
    const n = end - start;
    if (m === n) {
      if (!complete) ranges.push([start, end]);
      return;
    }
    const k = splitPoint(n);
    if (m <= k) {
      sub(m, start, start + k, complete);
      ranges.push([start + k, end]);
    } else {
      sub(m - k, start + k, end, false);
      ranges.push([start, start + k]);
    }
  };
  sub(first, 0, second, true);
  return Promise.all(ranges.map(([start, end]) => rangeHash(start, end, perfect)));
}

/** RFC 9162 §2.1.3.2: checks an inclusion proof. */
export function verifyInclusion(index: number, size: number, leaf: Hash, proof: Hash[], root: Hash): boolean {
  if (!(index >= 0 && index < size)) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn & 1 || fn === sn) {
      r = nodeHash(p, r);
      if (!(fn & 1)) {
        while (!(fn & 1) && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r.equals(root);
}

/** RFC 9162 §2.1.4.2: checks a consistency proof between two roots. */
export function verifyConsistency(
  first: number,
  second: number,
  firstRoot: Hash,
  secondRoot: Hash,
  proof: Hash[]
): boolean {
  if (first > second || first < 0) return false;
  if (first === second) return proof.length === 0 && firstRoot.equals(secondRoot);
  if (first === 0) return proof.length === 0;
  if (proof.length === 0) return false;
  const path = isPowerOfTwo(first) ? [firstRoot, ...proof] : proof.slice();
  let fn = first - 1;
  let sn = second - 1;
  while (fn & 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn & 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!(fn & 1)) {
        while (!(fn & 1) && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return fr.equals(firstRoot) && sr.equals(secondRoot) && sn === 0;
}

export const toHex = (h: Hash): string => h.toString('hex');
export const fromHex = (s: string): Hash => Buffer.from(s, 'hex');
