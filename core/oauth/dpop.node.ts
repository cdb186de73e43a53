/**
 * DPoP proof verification, RFC 9449 §4.3, every check in order, naming the first that fails. The replay store and
 * the server nonces are passed in (MongoDB-backed in store/credentials.ts, so exact across API processes); the jti
 * is recorded last, so a forged or misdirected proof never uses up a jti.
 */
import { createHash } from 'node:crypto';
import { calculateJwkThumbprint, compactVerify, decodeProtectedHeader, importJWK, type JWK } from 'jose';

/** Asymmetric algorithms accepted for proofs (never `none`, never HMAC). */
export const DPOP_ALGS = ['EdDSA', 'ES256', 'ES384', 'PS256', 'RS256'] as const;

/** Names of the checks, in the order they run; `check` in a failure is one of these. */
export type DpopCheck =
  'jwt' | 'typ' | 'alg' | 'jwk' | 'signature' | 'claims' | 'htm' | 'htu' | 'iat' | 'ath' | 'nonce' | 'jti';

export type DpopResult =
  | { valid: true; jkt: string; jti: string; iat: number }
  | { valid: false; check: DpopCheck; error: 'invalid_dpop_proof' | 'use_dpop_nonce'; message: string; jkt?: string };

export interface DpopExpectation {
  proof: string;
  htm: string;
  /** Every URL the proof may name (query and fragment ignored on both sides). */
  htu: string[];
  /** When given, the proof's `ath` must be its base64url SHA-256. */
  accessToken?: string;
  /** Seconds either side of now that `iat` may be. */
  windowS: number;
  nowS: number;
  requireNonce: boolean;
  nonceValid(nonce: string): Promise<boolean>;
  /** Records the jti until expiresAt; false when it was already recorded (a replay). */
  rememberJti(key: string, expiresAt: Date): Promise<boolean>;
}

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/** A URL without query and fragment, for htu comparison (RFC 9449 §4.3 step 9). */
export function htuOf(url: string): string | null {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return null;
  }
}

export const accessTokenHash = (token: string) => createHash('sha256').update(token).digest('base64url');

export async function verifyDpopProof(x: DpopExpectation): Promise<DpopResult> {
  const fail = (
    check: DpopCheck,
    message: string,
    jkt?: string,
    error: 'invalid_dpop_proof' | 'use_dpop_nonce' = 'invalid_dpop_proof'
  ): DpopResult => ({
    valid: false,
    check,
    error,
    message,
    ...(jkt ? { jkt } : {})
  });
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(x.proof))
    return fail('jwt', 'The proof is not one compact JWS (three base64url parts)');
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(x.proof);
  } catch {
    return fail('jwt', 'The proof header is not valid JSON');
  }
  if (header.typ !== 'dpop+jwt') return fail('typ', 'The proof header typ must be dpop+jwt');
  if (typeof header.alg !== 'string' || !(DPOP_ALGS as readonly string[]).includes(header.alg))
    return fail('alg', `alg must be one of ${DPOP_ALGS.join(', ')}`);
  const jwk = header.jwk as JWK | undefined;
  if (!jwk || typeof jwk !== 'object') return fail('jwk', 'The proof header carries no jwk');
  if (PRIVATE_JWK_MEMBERS.some((m) => m in jwk)) return fail('jwk', 'The jwk holds private key material');
  let jkt: string;
  let payload: Record<string, unknown>;
  try {
    jkt = await calculateJwkThumbprint(jwk, 'sha256');
    const key = await importJWK(jwk, header.alg);
    if (key instanceof Uint8Array) return fail('jwk', 'The jwk is a symmetric key');
    const verified = await compactVerify(x.proof, key, { algorithms: [header.alg] });
    payload = JSON.parse(new TextDecoder().decode(verified.payload)) as Record<string, unknown>;
    if (!payload || typeof payload !== 'object' || Array.isArray(payload))
      return fail('claims', 'The proof payload is not a JSON object', jkt);
  } catch {
    return fail('signature', 'The proof signature does not verify with its jwk');
  }
  const { jti, htm, htu, iat, ath, nonce } = payload;
  if (
    typeof jti !== 'string' ||
    jti.length < 8 ||
    jti.length > 256 ||
    typeof htm !== 'string' ||
    typeof htu !== 'string' ||
    typeof iat !== 'number'
  ) {
    return fail('claims', 'The proof needs jti (8-256 characters), htm, htu and a numeric iat', jkt);
  }
  if (htm !== x.htm) return fail('htm', `htm ${htm} does not match the request method ${x.htm}`, jkt);
  const claimed = htuOf(htu);
  if (!claimed || !x.htu.map(htuOf).includes(claimed))
    return fail('htu', `htu ${htu} does not match the request URL`, jkt);
  if (Math.abs(x.nowS - iat) > x.windowS)
    return fail('iat', `iat is more than ${x.windowS} s from the server's time`, jkt);
  if (x.accessToken !== undefined) {
    if (ath !== accessTokenHash(x.accessToken)) return fail('ath', 'ath is not the SHA-256 of the access token', jkt);
  } else if (ath !== undefined) {
    return fail('ath', 'ath is present but no access token was given', jkt);
  }
  if (nonce !== undefined || x.requireNonce) {
    if (typeof nonce !== 'string' || !(await x.nonceValid(nonce)))
      return fail('nonce', 'A fresh server nonce is required (see the DPoP-Nonce header)', jkt, 'use_dpop_nonce');
  }
  // Replays are judged per key: the same jti from another key is another proof.
  const expires = new Date((Math.max(iat, x.nowS) + x.windowS) * 1000);
  if (!(await x.rememberJti(createHash('sha256').update(`${jkt}.${jti}`).digest('hex'), expires)))
    return fail('jti', 'This proof (jti) was already used', jkt);
  return { valid: true, jkt, jti, iat };
}

/** How far a proof's iat may be from the server's clock (seconds, either side); the replay store keeps jtis this long. */
export const DPOP_IAT_WINDOW_S = 60;
/** How long a server nonce (DPoP-Nonce) is accepted. */
export const DPOP_NONCE_TTL_S = 300;
