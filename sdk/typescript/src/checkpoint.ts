/**
 * C2SP signed notes and tlog checkpoints (c2sp.org/signed-note, c2sp.org/tlog-checkpoint), verified with a key the
 * application pins: `<name>+<key id hex>+<base64 of 0x01 ‖ Ed25519 public key>`, the key id being the first four
 * bytes of SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key). A checkpoint is accepted only with a valid signature of that
 * key; unknown signature lines are ignored, as the spec says. Witness cosignatures (c2sp.org/tlog-cosignature,
 * cosignature/v1) are checked against the witness keys the application pins, `<name>+<key id hex>+<base64 of 0x04 ‖
 * Ed25519 public key>` (the key id over 0x04): a line naming a pinned witness that does not verify is a forgery.
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { sha256 } from './merkle';

export interface VerifierKey {
  name: string;
  keyId: Buffer;
  publicKey: KeyObject;
  /** The key as the application gave it (public: safe to log). */
  text: string;
}

export interface Checkpoint {
  origin: string;
  size: number;
  root: Buffer;
  /** The note exactly as served (body and signatures), kept to compare with the next one. */
  text: string;
}

/** Why a checkpoint or proof was refused; `kind` says which check failed. */
export class VerificationError extends Error {
  constructor(
    readonly kind:
      | 'checkpoint_format'
      | 'checkpoint_signature'
      | 'checkpoint_cosignature'
      | 'checkpoint_origin'
      | 'checkpoint_rollback'
      | 'checkpoint_fork'
      | 'consistency'
      | 'inclusion'
      | 'entry_mismatch',
    message: string,
    readonly details: Record<string, unknown> = {}
  ) {
    super(message);
    this.name = 'VerificationError';
  }
}

const NAME = /^[^\s+]+$/;

/** A checkpoint verifier key (type 0x01: the log's note signature). */
export function parseVerifierKey(text: string): VerifierKey {
  return parseKey(text, 0x01);
}

/** A witness's cosignature verifier key (type 0x04: cosignature/v1), as the witness publishes it. */
export function parseWitnessKey(text: string): VerifierKey {
  return parseKey(text, 0x04);
}

function parseKey(text: string, type: number): VerifierKey {
  const trimmed = text.trim();
  // The base64 key may itself hold '+': split at the first two only.
  const first = trimmed.indexOf('+');
  const second = first < 0 ? -1 : trimmed.indexOf('+', first + 1);
  if (second < 0) throw new TypeError('a verifier key is <name>+<key id hex>+<base64 key>');
  const name = trimmed.slice(0, first);
  const idHex = trimmed.slice(first + 1, second);
  const b64 = trimmed.slice(second + 1);
  if (!NAME.test(name)) throw new TypeError('the verifier key name has white space or a plus sign');
  if (!/^[0-9a-f]{8}$/.test(idHex)) throw new TypeError('the verifier key id is not 8 hex digits');
  const raw = Buffer.from(b64, 'base64');
  if (raw.length !== 33 || raw[0] !== type || raw.toString('base64') !== b64)
    throw new TypeError(`the verifier key is not base64 of 0x0${type} and a 32-byte Ed25519 key`);
  const keyId = sha256(Buffer.from(`${name}\n`, 'utf8'), raw).subarray(0, 4);
  if (keyId.toString('hex') !== idHex) throw new TypeError('the verifier key id does not match its name and key');
  const publicKey = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: raw.subarray(1).toString('base64url') },
    format: 'jwk'
  });
  return { name, keyId, publicKey, text: trimmed };
}

/** Verifies a signed note with `key`; returns its body (the signed text, ending in a newline). */
export function openNote(text: string, key: VerifierKey): string {
  const split = text.indexOf('\n\n');
  if (split < 0 || !text.endsWith('\n')) throw new VerificationError('checkpoint_format', 'not a signed note');
  const body = text.slice(0, split + 1);
  const sigLines = text.slice(split + 2, -1).split('\n');
  let verified = false;
  for (const line of sigLines) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
    if (!m) throw new VerificationError('checkpoint_format', 'a malformed signature line');
    if (m[1] !== key.name) continue;
    const sig = Buffer.from(m[2]!, 'base64');
    if (sig.length < 5 || !sig.subarray(0, 4).equals(key.keyId)) continue;
    if (sig.length !== 68 || !verify(null, Buffer.from(body, 'utf8'), key.publicKey, sig.subarray(4)))
      throw new VerificationError('checkpoint_signature', `the signature of ${key.name} does not verify`);
    verified = true;
  }
  if (!verified) throw new VerificationError('checkpoint_signature', `no signature of ${key.name} on the note`);
  return body;
}

/** Verifies and parses a checkpoint; its origin must be the key's name (as the hub signs). */
export function verifyCheckpoint(text: string, key: VerifierKey, origin = key.name): Checkpoint {
  const body = openNote(text, key);
  const lines = body.slice(0, -1).split('\n');
  if (lines.length < 3) throw new VerificationError('checkpoint_format', 'a checkpoint has at least three lines');
  const [first, sizeText, rootText] = lines as [string, string, string];
  if (first !== origin)
    throw new VerificationError('checkpoint_origin', `the checkpoint is of ${first}, not ${origin}`, { origin: first });
  if (!/^(0|[1-9][0-9]*)$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText)))
    throw new VerificationError('checkpoint_format', 'the checkpoint size is not a decimal number');
  const root = Buffer.from(rootText, 'base64');
  if (root.length !== 32 || root.toString('base64') !== rootText)
    throw new VerificationError('checkpoint_format', 'the checkpoint root is not base64 of 32 bytes');
  return { origin: first, size: Number(sizeText), root, text };
}

/**
 * The pinned witnesses whose cosignature/v1 on the checkpoint note `text` verifies (their names). A line with a
 * pinned witness's name and key id that does not verify throws `checkpoint_cosignature`; lines of other keys are
 * ignored.
 */
export function verifiedCosigners(text: string, witnesses: VerifierKey[]): string[] {
  const split = text.indexOf('\n\n');
  if (split < 0 || !text.endsWith('\n')) throw new VerificationError('checkpoint_format', 'not a signed note');
  const body = text.slice(0, split + 1);
  const cosigners = new Set<string>();
  for (const line of text.slice(split + 2, -1).split('\n')) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
    if (!m) throw new VerificationError('checkpoint_format', 'a malformed signature line');
    const blob = Buffer.from(m[2]!, 'base64');
    const witness = witnesses.find((w) => w.name === m[1] && blob.length >= 4 && blob.subarray(0, 4).equals(w.keyId));
    if (!witness) continue;
    const timestamp = blob.length === 76 ? blob.readBigUInt64BE(4) : 0n;
    const message = Buffer.from(`cosignature/v1\ntime ${timestamp}\n${body}`, 'utf8');
    if (timestamp === 0n || !verify(null, message, witness.publicKey, blob.subarray(12)))
      throw new VerificationError(
        'checkpoint_cosignature',
        `the cosignature of witness ${witness.name} does not verify`,
        {
          witness: witness.name
        }
      );
    cosigners.add(witness.name);
  }
  return [...cosigners];
}
