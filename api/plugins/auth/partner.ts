/**
 * Model `partner_federation`: a partner registered by an administrator (POST /admin/partners, with its Ed25519
 * public key) signs each request with HTTP Message Signatures (RFC 9421, docs/partner.md):
 *   Signature-Input: sig1=("@method" "@path" "content-digest");created=<unix s>;keyid="<partner id>";alg="ed25519"
 *   Signature: sig1=:<base64 Ed25519 signature over the signature base>:
 * covering at least @method, @path and content-digest (RFC 9530, checked against the body by the partner routes
 * once it is read), created within PARTNER_SIGNATURE_WINDOW_S of the hub's clock, and never seen before: the
 * digest of every accepted signature is kept in MongoDB until it would be stale anyway, so a replay is refused by
 * every API process. Any failure is 401 with the precise reason.
 */
import { createHash, createPublicKey, KeyObject } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { unauthorized } from '../../../core/errors';
import {
  parseSignatureInput,
  signatureBase,
  signatureBytes,
  SignatureFormatError,
  verifyEd25519,
  type SignatureInput
} from '../../../core/partner/http-signature.node';
import { Authenticator, header } from './principal';

/** How far (seconds) a signature's `created` may lie behind the hub's clock; ahead, at most PARTNER_CLOCK_SKEW_S. */
export const PARTNER_SIGNATURE_WINDOW_S = 300;
export const PARTNER_CLOCK_SKEW_S = 30;
export const REQUIRED_COMPONENTS = ['@method', '@path', 'content-digest'] as const;

/** What the authenticator established about a request, for the route (response binding). */
export interface PartnerRequestSignature {
  partnerId: string;
  /** base64url SHA-256 of the request's signature bytes. */
  digest: string;
  label: string;
}
const verified = new WeakMap<FastifyRequest, PartnerRequestSignature>();
export const partnerSignatureOf = (request: FastifyRequest): PartnerRequestSignature | undefined =>
  verified.get(request);

const keys = new Map<string, KeyObject>();
function ed25519Key(raw: string): KeyObject {
  let key = keys.get(raw);
  if (!key) {
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw }, format: 'jwk' });
    if (keys.size > 10_000) keys.clear();
    keys.set(raw, key);
  }
  return key;
}

const param = (input: SignatureInput, name: string) => input.params.find(([n]) => n === name)?.[1];

export const partner: Authenticator = async (request, deps) => {
  const inputField = header(request, 'signature-input');
  const signatureField = header(request, 'signature');
  if (!inputField || !signatureField)
    throw unauthorized('Signature-Input and Signature headers (RFC 9421) are both required');
  let inputs: SignatureInput[];
  try {
    inputs = parseSignatureInput(inputField);
  } catch (err) {
    throw unauthorized(err instanceof SignatureFormatError ? err.message : 'Signature-Input is malformed');
  }
  const input = inputs.find((i) => signatureBytes(signatureField, i.label));
  if (!input) throw unauthorized('Signature has no member labelled like one of Signature-Input');
  const signature = signatureBytes(signatureField, input.label)!;

  const missing = REQUIRED_COMPONENTS.filter((c) => !input.components.includes(c));
  if (missing.length) throw unauthorized(`the signature must cover ${missing.join(', ')}`);
  const keyid = param(input, 'keyid');
  const created = param(input, 'created');
  const alg = param(input, 'alg');
  const expires = param(input, 'expires');
  if (typeof keyid !== 'string' || keyid.length === 0)
    throw unauthorized('the signature needs a keyid parameter (the partner id)');
  if (typeof created !== 'number') throw unauthorized('the signature needs a created parameter (Unix seconds)');
  if (alg !== undefined && alg !== 'ed25519') throw unauthorized('alg must be ed25519');
  const now = Math.floor(Date.now() / 1000);
  if (created < now - PARTNER_SIGNATURE_WINDOW_S)
    throw unauthorized(`stale signature: created is more than ${PARTNER_SIGNATURE_WINDOW_S} s ago`);
  if (created > now + PARTNER_CLOCK_SKEW_S) throw unauthorized('created lies in the future');
  if (expires !== undefined && (typeof expires !== 'number' || expires < now))
    throw unauthorized('the signature has expired');
  if (!header(request, 'content-digest')) throw unauthorized('Content-Digest header (RFC 9530) is required');

  const found = await deps.partners.active(keyid);
  if (!found) throw unauthorized('unknown or revoked partner (keyid)');
  let base: string;
  try {
    base = signatureBase(input, {
      method: request.method,
      target: request.url,
      authority: request.headers.host,
      headers: request.headers
    });
  } catch (err) {
    throw unauthorized(err instanceof SignatureFormatError ? err.message : 'cannot build the signature base');
  }
  if (!verifyEd25519(base, signature, ed25519Key(found.public_key)))
    throw unauthorized('bad signature: it does not verify with the partner key');

  const digest = createHash('sha256').update(signature).digest('base64url');
  const fresh = await deps.partners.rememberSignature(
    digest,
    keyid,
    new Date((created + PARTNER_SIGNATURE_WINDOW_S + PARTNER_CLOCK_SKEW_S) * 1000)
  );
  if (!fresh) throw unauthorized('replayed signature: this exact signed request was already accepted');
  verified.set(request, { partnerId: keyid, digest, label: input.label });
  return { model: 'partner_federation', id: keyid };
};
