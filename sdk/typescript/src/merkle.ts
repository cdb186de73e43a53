/**
 * RFC 6962 / RFC 9162 Merkle tree hashing and proof verification, implemented here so that the SDK trusts no
 * answer of the hub it has not recomputed: leaf = SHA-256(0x00 ‖ bytes), node = SHA-256(0x01 ‖ left ‖ right).
 * Inclusion and consistency checks follow RFC 9162 sections 2.1.3.2 and 2.1.4.2; sizes and indexes are BigInts
 * inside, so trees past 2^32 entries verify as well as small ones.
 */
import { createHash } from 'node:crypto';

export function sha256(...parts: Uint8Array[]): Buffer {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
}

export function leafHash(bytes: Uint8Array): Buffer {
  return sha256(Buffer.from([0]), bytes);
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  return sha256(Buffer.from([1]), left, right);
}

/** The root of a list of leaf hashes (the reference definition: split at the largest power of two below n). */
export function rootOf(leaves: Uint8Array[]): Buffer {
  if (leaves.length === 0) return sha256();
  if (leaves.length === 1) return Buffer.from(leaves[0]!);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(rootOf(leaves.slice(0, k)), rootOf(leaves.slice(k)));
}

const isOdd = (n: bigint) => (n & 1n) === 1n;

/** The root an inclusion proof leads to from leaf `index` of a tree of `size` leaves; null if malformed. */
export function rootFromInclusionProof(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: Uint8Array[]
): Buffer | null {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return null;
  let fn = BigInt(index);
  let sn = BigInt(size) - 1n;
  let r: Buffer = Buffer.from(leaf);
  for (const p of proof) {
    if (sn === 0n) return null;
    if (isOdd(fn) || fn === sn) {
      r = nodeHash(p, r);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n ? r : null;
}

export function verifyInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: Uint8Array[],
  root: Uint8Array
): boolean {
  const computed = rootFromInclusionProof(index, size, leaf, proof);
  return computed !== null && computed.equals(root);
}

/** Whether `proof` shows the tree of `first` leaves (root `firstRoot`) to be a prefix of the tree of `second`. */
export function verifyConsistency(
  first: number,
  second: number,
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
  proof: Uint8Array[]
): boolean {
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(second) || first < 0 || first > second) return false;
  if (first === second) return proof.length === 0 && Buffer.from(firstRoot).equals(secondRoot);
  if (first === 0) return proof.length === 0; // the empty tree is a prefix of every tree
  const path = [...proof];
  const f = BigInt(first);
  // A perfect first tree is itself the first node of the proof.
  if ((f & (f - 1n)) === 0n) path.unshift(firstRoot);
  if (path.length === 0) return false;
  let fn = f - 1n;
  let sn = BigInt(second) - 1n;
  while (isOdd(fn)) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr: Buffer = Buffer.from(path[0]!);
  let sr: Buffer = Buffer.from(path[0]!);
  for (const c of path.slice(1)) {
    if (sn === 0n) return false;
    if (isOdd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && fr.equals(firstRoot) && sr.equals(secondRoot);
}

/** Decodes a 64-digit hex hash; null if it is not one. */
export function hashFromHex(text: unknown): Buffer | null {
  return typeof text === 'string' && /^[0-9a-f]{64}$/.test(text) ? Buffer.from(text, 'hex') : null;
}
