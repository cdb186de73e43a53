/**
 * The SLIM group cryptography (protocol `zh-slim/v1`), in one place so docs/compute.md can point at the exact bytes:
 *
 *   epoch key      32 random bytes, made by the hub when an epoch starts and then forgotten: the hub stores only
 *                  the per-member wraps and a key commitment, never the key, never a member's private key.
 *   wrap           per member: Z = X25519(epoch ephemeral private key, member's X25519 public key);
 *                  K = HKDF-SHA-256(ikm Z, salt = ephemeral public ‖ member public (raw, 64 bytes),
 *                                   info "zh-slim/v1 wrap|<group>|<epoch>|<member>", 32 bytes);
 *                  wrapped = AES-256-GCM(K, random 12-byte iv, epoch key, aad "zh-slim/v1 wrap|<group>|<epoch>|<member>").
 *                  The member recomputes Z with its private key and the published ephemeral public key.
 *   commitment     HKDF-SHA-256(ikm epoch key, salt empty, info "zh-slim/v1 commitment|<group>|<epoch>", 32 bytes):
 *                  lets members check that they all unwrapped the same key, and the hub check a presented key,
 *                  without the hub being able to recover it.
 *   message        per message: salt = 16 random bytes, iv = 12 random bytes;
 *                  message key = HKDF-SHA-256(ikm epoch key, salt, info "zh-slim/v1 message|<group>|<epoch>", 32);
 *                  AES-256-GCM(message key, iv, plaintext, aad "zh-slim/v1 message|<group>|<epoch>" [+ "|" + aad]).
 *                  Every message has its own key, so a (key, nonce) pair repeats only if a 128-bit salt repeats.
 *   ballot         Ed25519 over "zh-slim/v1 ballot|<group>|<epoch>|<consensus>|<member>|<choice>" (core/compute/consensus.ts).
 * All binary values travel as base64url without padding. Node-only (node:crypto).
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  KeyObject,
  randomBytes,
  timingSafeEqual,
  verify
} from 'node:crypto';

export const SLIM_GROUP_PROTOCOL = 'zh-slim/v1' as const;
const KEY_BYTES = 32;

export const b64u = (buf: Uint8Array): string => Buffer.from(buf).toString('base64url');
export const fromB64u = (text: string): Buffer => Buffer.from(text, 'base64url');

const hkdf = (ikm: Uint8Array, salt: Uint8Array, info: string): Buffer =>
  Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from(info, 'utf8'), KEY_BYTES));

export const wrapInfo = (groupId: string, epoch: number, memberId: string) =>
  `${SLIM_GROUP_PROTOCOL} wrap|${groupId}|${epoch}|${memberId}`;
export const commitmentInfo = (groupId: string, epoch: number) =>
  `${SLIM_GROUP_PROTOCOL} commitment|${groupId}|${epoch}`;
export const messageInfo = (groupId: string, epoch: number) => `${SLIM_GROUP_PROTOCOL} message|${groupId}|${epoch}`;

/** An OKP public key (raw 32 bytes) as a KeyObject. */
export function okpPublicKey(crv: 'X25519' | 'Ed25519', raw: Uint8Array): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv, x: b64u(raw) }, format: 'jwk' });
}

export interface MemberWrap {
  member_id: string;
  /** The member's X25519 public key (raw, base64url), as it was wrapped to. */
  x25519: string;
  iv: string;
  /** AES-256-GCM ciphertext of the epoch key followed by the 16-byte tag. */
  wrapped_key: string;
}

export interface EpochKeyMaterial {
  /** The epoch's ephemeral X25519 public key (raw, base64url); its private key is dropped after wrapping. */
  ephemeral_public: string;
  commitment: string;
  wraps: MemberWrap[];
}

export function keyCommitment(groupId: string, epoch: number, key: Uint8Array): Buffer {
  return hkdf(key, Buffer.alloc(0), commitmentInfo(groupId, epoch));
}

/** True when `key` is the epoch key the commitment was made for (constant-time comparison). */
export function matchesCommitment(groupId: string, epoch: number, key: Uint8Array, commitment: string): boolean {
  const expected = fromB64u(commitment);
  const actual = keyCommitment(groupId, epoch, key);
  return key.length === KEY_BYTES && expected.length === actual.length && timingSafeEqual(expected, actual);
}

/**
 * Starts an epoch: a fresh random epoch key and ephemeral X25519 key pair, one wrap per member, the commitment.
 * Neither the epoch key nor the ephemeral private key leaves this function.
 */
export function startEpoch(
  groupId: string,
  epoch: number,
  members: { member_id: string; x25519: string }[]
): EpochKeyMaterial {
  const epochKey = randomBytes(KEY_BYTES);
  const ephemeral = generateKeyPairSync('x25519');
  const ephemeralRaw = fromB64u(ephemeral.publicKey.export({ format: 'jwk' }).x!);
  try {
    const wraps = members.map((m): MemberWrap => {
      const memberRaw = fromB64u(m.x25519);
      const shared = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: okpPublicKey('X25519', memberRaw) });
      const info = wrapInfo(groupId, epoch, m.member_id);
      const wrapKey = hkdf(shared, Buffer.concat([ephemeralRaw, memberRaw]), info);
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', wrapKey, iv);
      cipher.setAAD(Buffer.from(info, 'utf8'));
      const wrapped = Buffer.concat([cipher.update(epochKey), cipher.final(), cipher.getAuthTag()]);
      return { member_id: m.member_id, x25519: m.x25519, iv: b64u(iv), wrapped_key: b64u(wrapped) };
    });
    return { ephemeral_public: b64u(ephemeralRaw), commitment: b64u(keyCommitment(groupId, epoch, epochKey)), wraps };
  } finally {
    epochKey.fill(0);
  }
}

/** What a member does with its private key (here for the example in docs/compute.md and the tests' cross-check). */
export function unwrapEpochKey(
  groupId: string,
  epoch: number,
  memberId: string,
  memberPrivate: KeyObject,
  ephemeralPublic: string,
  wrap: Pick<MemberWrap, 'iv' | 'wrapped_key'>
): Buffer {
  const memberRaw = fromB64u(createPublicKey(memberPrivate).export({ format: 'jwk' }).x!);
  const ephemeralRaw = fromB64u(ephemeralPublic);
  const shared = diffieHellman({ privateKey: memberPrivate, publicKey: okpPublicKey('X25519', ephemeralRaw) });
  const info = wrapInfo(groupId, epoch, memberId);
  const wrapKey = hkdf(shared, Buffer.concat([ephemeralRaw, memberRaw]), info);
  const data = fromB64u(wrap.wrapped_key);
  const decipher = createDecipheriv('aes-256-gcm', wrapKey, fromB64u(wrap.iv));
  decipher.setAAD(Buffer.from(info, 'utf8'));
  decipher.setAuthTag(data.subarray(data.length - 16));
  return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]);
}

export interface SealedMessage {
  v: 1;
  group_id: string;
  epoch: number;
  salt: string;
  iv: string;
  /** AES-256-GCM ciphertext followed by the 16-byte tag. */
  ciphertext: string;
}

const messageAad = (groupId: string, epoch: number, aad: string | undefined) =>
  Buffer.from(aad === undefined ? messageInfo(groupId, epoch) : `${messageInfo(groupId, epoch)}|${aad}`, 'utf8');

export function sealMessage(
  groupId: string,
  epoch: number,
  epochKey: Uint8Array,
  plaintext: Uint8Array,
  aad?: string
): SealedMessage {
  const salt = randomBytes(16);
  const iv = randomBytes(12);
  const key = hkdf(epochKey, salt, messageInfo(groupId, epoch));
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(messageAad(groupId, epoch, aad));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return { v: 1, group_id: groupId, epoch, salt: b64u(salt), iv: b64u(iv), ciphertext: b64u(ciphertext) };
}

/** The plaintext, or null when the ciphertext, its tag, its salt/iv or the bound group, epoch or aad were altered. */
export function openMessage(epochKey: Uint8Array, message: SealedMessage, aad?: string): Buffer | null {
  const data = fromB64u(message.ciphertext);
  const salt = fromB64u(message.salt);
  const iv = fromB64u(message.iv);
  if (data.length < 16 || salt.length !== 16 || iv.length !== 12) return null;
  try {
    const key = hkdf(epochKey, salt, messageInfo(message.group_id, message.epoch));
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(messageAad(message.group_id, message.epoch, aad));
    decipher.setAuthTag(data.subarray(data.length - 16));
    return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]);
  } catch {
    return null;
  }
}

/** Ed25519 verification of a ballot (or any message) against a raw public key; false for any malformed input. */
export function verifyEd25519(publicKeyRaw: string, message: string, signature: string): boolean {
  try {
    const sig = fromB64u(signature);
    if (sig.length !== 64) return false;
    return verify(null, Buffer.from(message, 'utf8'), okpPublicKey('Ed25519', fromB64u(publicKeyRaw)), sig);
  } catch {
    return false;
  }
}

const PROBE = generateKeyPairSync('x25519');

/** True when `raw` (base64url) is a usable OKP public key of the curve: 32 bytes that Node accepts. */
export function isOkpPublicKey(crv: 'X25519' | 'Ed25519', raw: string): boolean {
  try {
    const bytes = fromB64u(raw);
    if (bytes.length !== 32 || b64u(bytes) !== raw) return false;
    const key = okpPublicKey(crv, bytes);
    // A low-order X25519 point gives an all-zero shared secret, which OpenSSL refuses: refuse it here, at parse time.
    if (crv === 'X25519') diffieHellman({ privateKey: PROBE.privateKey, publicKey: key });
    return true;
  } catch {
    return false;
  }
}

export const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
