/**
 * The secure channel's envelope (POST /v1/kunlun/secure, docs/partner.md): a partner encrypts to the hub's
 * X25519 key-agreement key (GET /v1/slim/handshake `key_agreement_key`) with a fresh ephemeral key per request:
 *   shared = X25519(ephemeral private, hub public)
 *   key    = HKDF-SHA-256(ikm = shared, salt = epk || hub public key (raw, 64 bytes), info = INFO_REQUEST, 32 bytes)
 *   AES-256-GCM, a 12-byte random iv, AAD = "kunlun/secure/v1|<partner id>|<epk>", ciphertext || 16-byte tag
 * The hub answers under a second key from the same secret (info = INFO_RESPONSE) with its own random iv. Each key
 * encrypts exactly one message (the ephemeral key is new per request, the two directions use different infos), so
 * an iv is never reused under a key.
 */
import {
  createCipheriv,
  createDecipheriv,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  KeyObject,
  randomBytes
} from 'node:crypto';

export const ENVELOPE_VERSION = 1 as const;
export const ENVELOPE_ALG = 'X25519-HKDF-SHA256-A256GCM' as const;
export const INFO_REQUEST = 'zhongshu-hub kunlun/secure v1 request';
export const INFO_RESPONSE = 'zhongshu-hub kunlun/secure v1 response';

export interface Envelope {
  v: number;
  alg: string;
  /** base64url, 12 bytes. */
  iv: string;
  /** base64url: ciphertext followed by the 16-byte GCM tag. */
  ciphertext: string;
}
export interface RequestEnvelope extends Envelope {
  /** The partner's ephemeral X25519 public key, base64url of the 32 raw bytes. */
  epk: string;
}

export class EnvelopeError extends Error {}

const b64u = (b: Buffer) => b.toString('base64url');
export const envelopeAad = (partnerId: string, epk: string) =>
  Buffer.from(`kunlun/secure/v1|${partnerId}|${epk}`, 'utf8');
const rawX25519 = (key: KeyObject) => Buffer.from((key.export({ format: 'jwk' }) as { x: string }).x, 'base64url');

function x25519Public(raw: string): KeyObject {
  const bytes = Buffer.from(raw, 'base64url');
  if (bytes.length !== 32 || b64u(bytes) !== raw)
    throw new EnvelopeError('epk must be the 32-byte X25519 public key, base64url without padding');
  return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: raw }, format: 'jwk' });
}

/** The two directional keys of one exchange. */
export function envelopeKeys(
  shared: Buffer,
  epkRaw: Buffer,
  hubPublicRaw: Buffer
): { request: Buffer; response: Buffer } {
  const salt = Buffer.concat([epkRaw, hubPublicRaw]);
  return {
    request: Buffer.from(hkdfSync('sha256', shared, salt, INFO_REQUEST, 32)),
    response: Buffer.from(hkdfSync('sha256', shared, salt, INFO_RESPONSE, 32))
  };
}

export function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Envelope {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return { v: ENVELOPE_VERSION, alg: ENVELOPE_ALG, iv: b64u(iv), ciphertext: b64u(ct) };
}

export function open(key: Buffer, envelope: Envelope, aad: Buffer): Buffer {
  const iv = Buffer.from(envelope.iv, 'base64url');
  const data = Buffer.from(envelope.ciphertext, 'base64url');
  if (iv.length !== 12 || data.length < 16)
    throw new EnvelopeError('iv must be 12 bytes and the ciphertext at least the 16-byte tag');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(aad);
    decipher.setAuthTag(data.subarray(data.length - 16));
    return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]);
  } catch {
    throw new EnvelopeError('the envelope does not decrypt: wrong key, tampered ciphertext, iv or associated data');
  }
}

/**
 * The hub's side: opens a partner's request envelope with the hub's X25519 private key, and returns the plaintext
 * and a function sealing the answer under the response key.
 */
export function openRequest(
  envelope: RequestEnvelope,
  partnerId: string,
  hub: { privateKey: KeyObject; publicKey: KeyObject }
): { plaintext: Buffer; sealResponse: (plaintext: Buffer) => Envelope } {
  if (envelope.v !== ENVELOPE_VERSION || envelope.alg !== ENVELOPE_ALG)
    throw new EnvelopeError(`unsupported envelope: v must be ${ENVELOPE_VERSION} and alg ${ENVELOPE_ALG}`);
  const epk = x25519Public(envelope.epk);
  let shared: Buffer;
  try {
    shared = diffieHellman({ privateKey: hub.privateKey, publicKey: epk });
  } catch {
    throw new EnvelopeError('epk is not a usable X25519 public key');
  }
  if (shared.every((b) => b === 0)) throw new EnvelopeError('epk is a low-order X25519 point');
  const keys = envelopeKeys(shared, Buffer.from(envelope.epk, 'base64url'), rawX25519(hub.publicKey));
  const aad = envelopeAad(partnerId, envelope.epk);
  const plaintext = open(keys.request, envelope, aad);
  return { plaintext, sealResponse: (answer) => seal(keys.response, answer, aad) };
}
