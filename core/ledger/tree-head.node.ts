/**
 * Signed tree heads (as in RFC 6962 §3.5): Ed25519 over the canonical JSON of
 *   {"root_hash":"<hex>","timestamp":"<ISO 8601>","tree_size":<n>}
 * and the offline verifier clients (and the tests) use: tree head signature, entry leaf hash, inclusion.
 */
import { createPublicKey, KeyObject, sign, verify } from 'node:crypto';
import { canonicalJson } from './canonical-json';
import { ledgerLeafBytes, LedgerLeafFields } from './ledger-entry';
import { fromHex, leafHash, toHex, verifyConsistency, verifyInclusion } from './merkle.node';

export interface TreeHead {
  tree_size: number;
  root_hash: string;
  timestamp: string;
}

export interface SignedTreeHead extends TreeHead {
  algorithm: 'Ed25519';
  key_id: string;
  /** base64 Ed25519 signature over treeHeadBytes(). */
  signature: string;
}

export function treeHeadBytes(head: TreeHead): Buffer {
  return Buffer.from(
    canonicalJson({ root_hash: head.root_hash, timestamp: head.timestamp, tree_size: head.tree_size }),
    'utf8'
  );
}

export function signTreeHead(head: TreeHead, privateKey: KeyObject, keyId: string): SignedTreeHead {
  return {
    ...head,
    algorithm: 'Ed25519',
    key_id: keyId,
    signature: sign(null, treeHeadBytes(head), privateKey).toString('base64')
  };
}

/** `publicKeyBase64` is the raw 32-byte Ed25519 key as published in /api/status and the agent card. */
export function verifyTreeHead(sth: SignedTreeHead, publicKeyBase64: string): boolean {
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKeyBase64, 'base64').toString('base64url') },
    format: 'jwk'
  });
  return verify(null, treeHeadBytes(sth), key, Buffer.from(sth.signature, 'base64'));
}

/** An entry as the read endpoints return it: enough to recompute its leaf hash. */
export interface PublishedEntry extends LedgerLeafFields {
  value: unknown;
}

export function entryLeafHash(entry: PublishedEntry): string {
  return toHex(leafHash(ledgerLeafBytes(entry, canonicalJson(entry.value))));
}

/** Checks, offline, that `entry` is in the tree a signed tree head commits to. */
export function verifyEntryInTreeHead(
  entry: PublishedEntry,
  auditPath: string[],
  sth: SignedTreeHead,
  publicKeyBase64: string
): boolean {
  if (!verifyTreeHead(sth, publicKeyBase64)) return false;
  return verifyInclusion(
    entry.seq - 1,
    sth.tree_size,
    fromHex(entryLeafHash(entry)),
    auditPath.map(fromHex),
    fromHex(sth.root_hash)
  );
}

/** Checks that an older tree head is a prefix of a newer one (nothing rewritten in between). */
export function verifyTreeHeadsConsistent(older: TreeHead, newer: TreeHead, proof: string[]): boolean {
  return verifyConsistency(
    older.tree_size,
    newer.tree_size,
    fromHex(older.root_hash),
    fromHex(newer.root_hash),
    proof.map(fromHex)
  );
}
