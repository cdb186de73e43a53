/**
 * C2SP signed notes and checkpoints (c2sp.org/signed-note, c2sp.org/tlog-checkpoint), signed with the hub's Ed25519
 * key (store/keys/hub-keys.ts): the note text, a blank line, then one line per signature
 *   — <key name> <base64(4-byte key id || 64-byte Ed25519 signature)>
 * The key id is the first 4 bytes of SHA-256(key name || 0x0A || 0x01 || 32-byte public key), and verifiers are
 * given the key as `<name>+<8 hex key id>+<base64(0x01 || public key)>` (Go: note.NewVerifier).
 */
import { createHash, createPublicKey, KeyObject, sign, verify } from 'node:crypto';

/** The signature type byte of Ed25519 in signed notes. */
const ED25519_TYPE = 0x01;

/** A key name (and a checkpoint origin) must be non-empty, with no whitespace and no `+`. */
export const KEY_NAME_PATTERN = /^[^\s+]+$/;

export function noteKeyId(name: string, publicKey: Buffer): Buffer {
  return createHash('sha256')
    .update(Buffer.from(name, 'utf8'))
    .update(Buffer.from([0x0a, ED25519_TYPE]))
    .update(publicKey)
    .digest()
    .subarray(0, 4);
}

/** The verifier key string clients pass to note.NewVerifier. */
export function noteVerifierKey(name: string, publicKey: Buffer): string {
  const keyId = noteKeyId(name, publicKey).toString('hex');
  return `${name}+${keyId}+${Buffer.concat([Buffer.from([ED25519_TYPE]), publicKey]).toString('base64')}`;
}

/** The body of a checkpoint: origin, tree size, base64 root hash, each on its own line. */
export function checkpointBody(origin: string, size: number, rootHex: string): string {
  return `${origin}\n${size}\n${Buffer.from(rootHex, 'hex').toString('base64')}\n`;
}

/** The signed note of `text` (which ends with a newline), signed by `name`'s Ed25519 key. */
export function signNote(text: string, name: string, privateKey: KeyObject, publicKey: Buffer): string {
  if (!text.endsWith('\n')) throw new Error('a note text ends with a newline');
  const signature = sign(null, Buffer.from(text, 'utf8'), privateKey);
  const blob = Buffer.concat([noteKeyId(name, publicKey), signature]).toString('base64');
  return `${text}\n\u2014 ${name} ${blob}\n`;
}

/** A checkpoint as parsed from a signed note (no signature checked: see verifyNote). */
export interface ParsedCheckpoint {
  origin: string;
  size: number;
  rootHex: string;
}

/**
 * Checks a signed note against one Ed25519 verifier key string; returns its text when a signature of that key
 * verifies, else null. Other signature lines (cosignatures) are ignored.
 */
export function verifyNote(note: string, verifierKey: string): string | null {
  // The name has no `+`; the base64 key may.
  const parts = /^([^+]+)\+([0-9a-f]{8})\+(.+)$/.exec(verifierKey);
  const [, name, idHex, keyB64] = parts ?? [];
  if (!name || !idHex || !keyB64) return null;
  const key = Buffer.from(keyB64, 'base64');
  if (key.length !== 33 || key[0] !== ED25519_TYPE) return null;
  const split = note.lastIndexOf('\n\n');
  if (split < 0) return null;
  const text = note.slice(0, split + 1);
  const publicKey = createPublicKeyFromRaw(key.subarray(1));
  for (const line of note.slice(split + 2).split('\n')) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const blob = Buffer.from(m[2]!, 'base64');
    if (blob.length !== 68 || blob.subarray(0, 4).toString('hex') !== idHex) continue;
    if (verify(null, Buffer.from(text, 'utf8'), publicKey, blob.subarray(4))) return text;
  }
  return null;
}

export function parseCheckpoint(text: string): ParsedCheckpoint {
  const [origin, size, root] = text.split('\n');
  if (!origin || !size || !/^\d+$/.test(size) || !root) throw new Error('not a checkpoint');
  return { origin, size: Number(size), rootHex: Buffer.from(root, 'base64').toString('hex') };
}

function createPublicKeyFromRaw(raw: Buffer): KeyObject {
  // An Ed25519 SubjectPublicKeyInfo is a fixed 12-byte prefix and the raw key.
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]);
  return createPublicKey({ key: spki, format: 'der', type: 'spki' });
}
