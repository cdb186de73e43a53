/**
 * Model `oauth`: an access token from POST /v1/oauth/token, valid (signed by an OAuth key the JWKS lists, named by
 * its kid), unexpired, unrevoked. An unbound token comes as `Authorization: Bearer`; a DPoP-bound one (cnf.jkt) only
 * as `Authorization: DPoP` with a proof by the bound key (RFC 9449 §7), never as a bearer token.
 */
import type { FastifyRequest } from 'fastify';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { AppError, unauthorized } from '../../../core/errors';
import { DPOP_IAT_WINDOW_S, DPOP_NONCE_TTL_S, verifyDpopProof } from '../../../core/oauth/dpop.node';
import { AuthDeps, Authenticator, header, Principal } from './principal';

export interface AccessTokenClaims {
  client_id: string;
  scope: string;
  jti: string;
  exp: number;
  iat: number;
  /** The DPoP key thumbprint the token is bound to (cnf.jkt), if any. */
  jkt?: string;
}

export const oauth: Authenticator = async (request, deps) => {
  const scheme = authorization(request);
  if (!scheme)
    throw unauthorized('Authorization: Bearer <access token> (or DPoP <token> with a DPoP proof) is required');
  const claims = await verifyAccessToken(scheme.token, deps);
  if (!claims) throw unauthorized('Access token is invalid, expired or revoked');
  if (scheme.kind === 'Bearer' && claims.jkt)
    throw dpopRefusal('invalid_token', 'This token is DPoP-bound: send it as Authorization: DPoP with a proof');
  if (scheme.kind === 'DPoP') await requireDpopProof(request, deps, scheme.token, claims);
  return principalOf(claims, 'oauth');
};

/** Model `dpop`: only DPoP-bound tokens, as `Authorization: DPoP <token>` with a matching `DPoP` proof. */
export const dpop: Authenticator = async (request, deps) => {
  const scheme = authorization(request);
  if (!scheme || scheme.kind !== 'DPoP')
    throw dpopRefusal('invalid_token', 'Authorization: DPoP <DPoP-bound access token> and a DPoP proof are required');
  const claims = await verifyAccessToken(scheme.token, deps);
  if (!claims) throw dpopRefusal('invalid_token', 'Access token is invalid, expired or revoked');
  await requireDpopProof(request, deps, scheme.token, claims);
  return principalOf(claims, 'dpop');
};

const principalOf = (claims: AccessTokenClaims, model: 'oauth' | 'dpop'): Principal => ({
  model,
  id: claims.client_id,
  scopes: claims.scope ? claims.scope.split(' ') : []
});

function authorization(request: FastifyRequest): { kind: 'Bearer' | 'DPoP'; token: string } | null {
  const value = header(request, 'authorization');
  const match = value ? /^(Bearer|DPoP)\s+(\S+)$/i.exec(value) : null;
  if (!match) return null;
  return { kind: match[1]!.toLowerCase() === 'dpop' ? 'DPoP' : 'Bearer', token: match[2]! };
}

/** RFC 9449 §7.1: a 401 with `WWW-Authenticate: DPoP error=…` (and a fresh nonce when one is what is missing). */
function dpopRefusal(error: string, message: string, nonce?: string): AppError {
  return new AppError(
    'unauthorized',
    message,
    {},
    {
      'WWW-Authenticate': `DPoP error="${error}", algs="EdDSA ES256 ES384 PS256 RS256"`,
      ...(nonce ? { 'DPoP-Nonce': nonce } : {})
    }
  );
}

/** The request URL as the client may have named it: the public URL, or the scheme and Host it connected to. */
export function requestUrls(request: FastifyRequest, publicUrl: string): string[] {
  const path = request.url.split('?')[0]!;
  return [`${publicUrl}${path}`, `${request.protocol}://${request.host}${path}`];
}

async function requireDpopProof(
  request: FastifyRequest,
  deps: Pick<AuthDeps, 'config' | 'credentials'>,
  token: string,
  claims: AccessTokenClaims
): Promise<void> {
  const proof = header(request, 'dpop');
  if (!claims.jkt) throw dpopRefusal('invalid_token', 'This token is not DPoP-bound: send it as Authorization: Bearer');
  if (!proof) throw dpopRefusal('invalid_dpop_proof', 'A DPoP proof header is required with Authorization: DPoP');
  const result = await verifyDpopProof({
    proof,
    htm: request.method,
    htu: requestUrls(request, deps.config.publicUrl),
    accessToken: token,
    windowS: DPOP_IAT_WINDOW_S,
    nowS: Math.floor(Date.now() / 1000),
    requireNonce: true,
    nonceValid: (n) => deps.credentials.dpopNonceValid(n),
    rememberJti: (id, until) => deps.credentials.rememberDpopJti(id, until)
  });
  if (!result.valid) {
    const nonce =
      result.error === 'use_dpop_nonce' ? await deps.credentials.issueDpopNonce(DPOP_NONCE_TTL_S) : undefined;
    throw dpopRefusal(result.error, `DPoP proof refused (${result.check}): ${result.message}`, nonce);
  }
  if (result.jkt !== claims.jkt)
    throw dpopRefusal(
      'invalid_dpop_proof',
      'The DPoP proof is signed by another key than the one the token is bound to'
    );
}

/** Verifies one of our own access tokens; null when invalid, expired, revoked, or its key no longer verifies. */
export async function verifyAccessToken(
  token: string,
  deps: Pick<AuthDeps, 'keys' | 'credentials'> & { config: Pick<AuthDeps['config'], 'publicUrl'> }
): Promise<AccessTokenClaims | null> {
  try {
    const kid = decodeProtectedHeader(token).kid;
    const key = typeof kid === 'string' ? deps.keys.oauth.verificationKey(kid) : null;
    if (!key) return null;
    const { payload } = await jwtVerify(token, key.publicKey, {
      issuer: deps.config.publicUrl,
      algorithms: ['EdDSA'],
      typ: 'at+jwt'
    });
    const jti = payload.jti;
    const clientId = payload.client_id;
    if (typeof jti !== 'string' || typeof clientId !== 'string' || !payload.exp || !payload.iat) return null;
    const cnf = payload.cnf;
    const jkt = cnf && typeof cnf === 'object' && 'jkt' in cnf && typeof cnf.jkt === 'string' ? cnf.jkt : undefined;
    if (await deps.credentials.isOAuthTokenRevoked(jti)) return null;
    if (!(await deps.credentials.findOAuthClient(clientId))) return null;
    return {
      client_id: clientId,
      scope: typeof payload.scope === 'string' ? payload.scope : '',
      jti,
      exp: payload.exp,
      iat: payload.iat,
      ...(jkt ? { jkt } : {})
    };
  } catch {
    return null;
  }
}
