/**
 * Shapes of the credentials the hub issues. Every secret is 256 bits of randomness, shown to its owner once and
 * stored only as its SHA-256 hex digest: for secrets that carry their own entropy a slow KDF adds nothing, and a
 * digest lets the hub find a credential by it in one indexed read.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export function sha256Hex(input: string | Buffer): string {
  return createHash('sha256').update(input).digest('hex');
}

/** A fresh secret: `<prefix><43 url-safe base64 chars>`. */
export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

/** A short public identifier (not a secret): `<prefix><16 hex>`. */
export function newId(prefix: string): string {
  return prefix + randomBytes(8).toString('hex');
}

export const hashSecret = (secret: string): string => sha256Hex(secret);

/** Constant-time comparison of two hex digests. */
export function digestsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** API keys for the chat gateway: `zk_<key_id>_<secret>`; the key id is public, the secret part is hashed. */
export const API_KEY_PATTERN = /^zk_([a-f0-9]{16})_([A-Za-z0-9_-]{43})$/;
export function newApiKey(keyId: string): string {
  return `zk_${keyId}_${randomBytes(32).toString('base64url')}`;
}
