/**
 * C2SP tlog-cosignature (cosignature/v1, Ed25519) and the checks a witness makes on a submitted checkpoint's note
 * signatures (c2sp.org/signed-note, c2sp.org/tlog-witness).
 *
 * A cosignature line is `— <witness name> base64(key id || 8-byte big-endian timestamp || 64-byte Ed25519 sig)`, the
 * key id SHA-256(name || 0x0A || 0x04 || public key)[:4], the signed message `cosignature/v1\ntime <unix s>\n`
 * followed by the checkpoint's note text (its body with the final newline, no signature lines).
 */
import { createHash, createPublicKey, KeyObject, sign, verify } from 'node:crypto';

/** Signature type bytes of C2SP signed-note: Ed25519 note signatures, Ed25519 cosignature/v1. */
export const ED25519_NOTE = 0x01;
export const ED25519_COSIGNATURE_V1 = 0x04;

function keyId(name: string, type: number, publicKey: Buffer): Buffer {
  return createHash('sha256')
    .update(Buffer.from(name, 'utf8'))
    .update(Buffer.from([0x0a, type]))
    .update(publicKey)
    .digest()
    .subarray(0, 4);
}

/** The witness verifier key (vkey with type 0x04), what note.NewVerifierForCosignatureV1 takes. */
export function cosignatureVerifierKey(name: string, publicKey: Buffer): string {
  const id = keyId(name, ED25519_COSIGNATURE_V1, publicKey).toString('hex');
  return `${name}+${id}+${Buffer.concat([Buffer.from([ED25519_COSIGNATURE_V1]), publicKey]).toString('base64')}`;
}

/** The message a cosignature/v1 signs: the header, the time line, then the checkpoint's note text. */
export function cosignatureMessage(text: string, timestamp: number): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp}\n${text}`, 'utf8');
}

/** One cosignature line (with its newline) over the checkpoint note `text`, at `timestamp` (unix seconds). */
export function cosign(text: string, timestamp: number, name: string, privateKey: KeyObject, publicKey: Buffer) {
  if (!Number.isSafeInteger(timestamp) || timestamp <= 0) throw new Error('a cosignature has a positive timestamp');
  const time = Buffer.alloc(8);
  time.writeBigUInt64BE(BigInt(timestamp));
  const signature = sign(null, cosignatureMessage(text, timestamp), privateKey);
  const blob = Buffer.concat([keyId(name, ED25519_COSIGNATURE_V1, publicKey), time, signature]);
  return `\u2014 ${name} ${blob.toString('base64')}\n`;
}

/** A parsed Ed25519 verifier key (note signatures, type 0x01, or cosignatures, type 0x04). */
export interface Ed25519VerifierKey {
  name: string;
  id: Buffer;
  type: number;
  publicKey: KeyObject;
}

export function parseVerifierKey(vkey: string): Ed25519VerifierKey | null {
  const m = /^([^\s+]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/=]+)$/.exec(vkey);
  if (!m) return null;
  const key = Buffer.from(m[3]!, 'base64');
  if (key.length !== 33 || (key[0] !== ED25519_NOTE && key[0] !== ED25519_COSIGNATURE_V1)) return null;
  const id = keyId(m[1]!, key[0], key.subarray(1));
  if (id.toString('hex') !== m[2]) return null;
  return { name: m[1]!, id, type: key[0], publicKey: rawEd25519(key.subarray(1)) };
}

/** A signed note split into its text (with its final newline) and its signature lines. */
export interface SplitNote {
  text: string;
  signatures: { name: string; blob: Buffer }[];
}

/**
 * Splits a signed note at its last blank line; null when it is not one (no blank line, a signature line not
 * `— <name> <base64>`, control characters other than newline).
 */
export function splitNote(note: string): SplitNote | null {
  if (/[\u0000-\u0009\u000b-\u001f\u007f]/.test(note) || !note.endsWith('\n')) return null;
  const split = note.lastIndexOf('\n\n');
  if (split < 0) return null;
  const signatures: SplitNote['signatures'] = [];
  for (const line of note.slice(split + 2, -1).split('\n')) {
    const m = /^\u2014 ([^\s+]+) ([A-Za-z0-9+/]+={0,2})$/.exec(line);
    if (!m) return null;
    const blob = Buffer.from(m[2]!, 'base64');
    if (blob.length < 5) return null;
    signatures.push({ name: m[1]!, blob });
  }
  return { text: note.slice(0, split + 1), signatures };
}

/**
 * Checks a note's Ed25519 note signatures (type 0x01) against trusted keys, as signed-note says: lines of other keys
 * are ignored; a line whose name and key id are a trusted key's must verify ('bad' if not); at least one must
 * ('none' if not).
 */
export function checkNoteSignatures(note: SplitNote, trusted: Ed25519VerifierKey[]): 'ok' | 'none' | 'bad' {
  let verified = false;
  for (const { name, blob } of note.signatures) {
    for (const key of trusted) {
      if (key.type !== ED25519_NOTE || key.name !== name || !blob.subarray(0, 4).equals(key.id)) continue;
      if (blob.length !== 68 || !verify(null, Buffer.from(note.text, 'utf8'), key.publicKey, blob.subarray(4)))
        return 'bad';
      verified = true;
    }
  }
  return verified ? 'ok' : 'none';
}

/** Verifies one cosignature/v1 line's blob against a witness key (type 0x04); its timestamp when it verifies. */
export function verifyCosignature(text: string, blob: Buffer, key: Ed25519VerifierKey): number | null {
  if (key.type !== ED25519_COSIGNATURE_V1 || blob.length !== 76 || !blob.subarray(0, 4).equals(key.id)) return null;
  const timestamp = Number(blob.readBigUInt64BE(4));
  return verify(null, cosignatureMessage(text, timestamp), key.publicKey, blob.subarray(12)) ? timestamp : null;
}

function rawEd25519(raw: Buffer): KeyObject {
  // An Ed25519 SubjectPublicKeyInfo is a fixed 12-byte prefix and the raw key.
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]);
  return createPublicKey({ key: spki, format: 'der', type: 'spki' });
}
