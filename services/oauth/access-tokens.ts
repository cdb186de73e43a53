/**
 * The hub's OAuth 2.0 authorization server, as use cases: the discovery document, client-credentials access
 * tokens (RFC 6749 §4.4; DPoP-bound, RFC 9449 §5, when a proof comes with the request), introspection (RFC 7662),
 * revocation (RFC 7009) and the public DPoP proof check. Access tokens are EdDSA-signed JWTs (typ at+jwt,
 * iss = PUBLIC_URL, lifetime OAUTH_TOKEN_TTL_S, a jti for revocation, the signing key's kid) signed with the rotating
 * OAuth keys (store/keys/oauth-keys.ts), never the ledger's. api/routes/oauth/ turns the results into replies.
 */
import { randomBytes } from 'node:crypto';
import { SignJWT } from 'jose';
import type { Config, OauthConfig } from '../../core/config.node';
import { AppError } from '../../core/errors';
import { DPOP_ALGS, DPOP_IAT_WINDOW_S, DPOP_NONCE_TTL_S, verifyDpopProof } from '../../core/oauth/dpop.node';
import type { CredentialStore } from '../../store/credentials';
import type { OAuthKeyRing } from '../../store/keys/oauth-keys';

/**
 * An OAuth-protocol error of the token endpoint, answered in RFC 6749 §5.2's shape with its headers (RFC 9449's
 * DPoP errors have no code in the service's error table).
 */
export class OAuthProtocolError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly headers: Record<string, string> = {}
  ) {
    super(description);
  }
}

/** What a valid access token says (api/plugins/auth/oauth.ts verifyAccessToken). */
export interface VerifiedToken {
  client_id: string;
  scope: string;
  jti: string;
  exp: number;
  iat: number;
  jkt?: string;
}

export interface AccessTokenDeps {
  config: Pick<Config, 'publicUrl'> & Pick<OauthConfig, 'OAUTH_TOKEN_TTL_S'>;
  oauthKeys: Pick<OAuthKeyRing, 'current' | 'rotate'>;
  credentials: CredentialStore;
  /** Verifies one of the hub's own access tokens; null when invalid, expired or revoked. */
  verifyToken: (token: string) => Promise<VerifiedToken | null>;
}

export function createAccessTokens({ config, oauthKeys, credentials, verifyToken }: AccessTokenDeps) {
  const base = config.publicUrl;

  /** What this server does, and nothing it does not (RFC 8414 §2; the OIDC discovery document is the same). */
  const discovery = () => ({
    issuer: base,
    token_endpoint: `${base}/v1/oauth/token`,
    introspection_endpoint: `${base}/v1/oauth/introspect`,
    revocation_endpoint: `${base}/v1/oauth/revoke`,
    jwks_uri: `${base}/.well-known/jwks.json`,
    grant_types_supported: ['client_credentials'],
    // No authorization endpoint: no response type is served.
    response_types_supported: [],
    scopes_supported: [],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    dpop_signing_alg_values_supported: [...DPOP_ALGS]
  });

  const dpopChecks = () => ({
    windowS: DPOP_IAT_WINDOW_S,
    nowS: Math.floor(Date.now() / 1000),
    requireNonce: true,
    nonceValid: (n: string) => credentials.dpopNonceValid(n),
    rememberJti: (id: string, until: Date) => credentials.rememberDpopJti(id, until)
  });

  /** POST /v1/dpop/verify: a proof checked as the hub checks its own, with a fresh nonce for the caller's next. */
  async function verifyProof(input: { proof: string; htm: string; htu: string; access_token?: string }) {
    const { proof, htm, htu, access_token: accessToken } = input;
    const result = await verifyDpopProof({
      proof,
      htm,
      htu: [htu],
      ...(accessToken ? { accessToken } : {}),
      ...dpopChecks()
    });
    const nonce = await credentials.issueDpopNonce(DPOP_NONCE_TTL_S);
    const answer = result.valid
      ? { valid: true, jkt: result.jkt, jti: result.jti }
      : {
          valid: false,
          check: result.check,
          error: result.error,
          message: result.message,
          ...(result.jkt ? { jkt: result.jkt } : {})
        };
    return { nonce, answer };
  }

  /** RFC 9449 §5: a DPoP header at the token endpoint binds the token to the proof's key; a bad proof is refused. */
  async function dpopBinding(proof: string | string[] | undefined, htu: string[]): Promise<string | null> {
    if (proof === undefined) return null;
    if (typeof proof !== 'string') throw new OAuthProtocolError('invalid_dpop_proof', 'Send exactly one DPoP header');
    const result = await verifyDpopProof({ proof, htm: 'POST', htu, ...dpopChecks() });
    if (result.valid) return result.jkt;
    const headers: Record<string, string> =
      result.error === 'use_dpop_nonce' ? { 'DPoP-Nonce': await credentials.issueDpopNonce(DPOP_NONCE_TTL_S) } : {};
    throw new OAuthProtocolError(result.error, `DPoP proof refused (${result.check}): ${result.message}`, headers);
  }

  /**
   * The client-credentials grant for `client` (its granted scopes), with the request's DPoP header (if any) and the
   * URLs the request may have been made to (a proof's htu).
   */
  async function issueToken(
    client: { id: string; scopes: string[] },
    body: { grant_type: string; scope?: string },
    dpop: { proof: string | string[] | undefined; htu: string[] }
  ) {
    if (body.grant_type !== 'client_credentials') {
      throw new AppError(
        'unsupported_grant_type',
        `grant_type ${body.grant_type} is not supported; use client_credentials`
      );
    }
    const allowed = client.scopes;
    const requested = body.scope ? body.scope.split(' ').filter(Boolean) : allowed;
    const refused = requested.filter((s) => !allowed.includes(s));
    if (refused.length > 0)
      throw new AppError('invalid_scope', `Scopes not granted to this client: ${refused.join(' ')}`);
    const jkt = await dpopBinding(dpop.proof, dpop.htu);
    const ttl = config.OAUTH_TOKEN_TTL_S;
    const scope = requested.join(' ');
    const key = oauthKeys.current();
    const token = await new SignJWT({ client_id: client.id, scope, ...(jkt ? { cnf: { jkt } } : {}) })
      .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'at+jwt' })
      .setIssuer(base)
      .setSubject(client.id)
      .setAudience(base)
      .setIssuedAt()
      .setExpirationTime(`${ttl}s`)
      .setJti(randomBytes(16).toString('hex'))
      .sign(key.privateKey);
    return {
      access_token: token,
      token_type: jkt ? ('DPoP' as const) : ('Bearer' as const),
      expires_in: ttl,
      scope
    };
  }

  async function introspect(token: string) {
    const claims = await verifyToken(token);
    if (!claims) return { active: false };
    return {
      active: true,
      client_id: claims.client_id,
      scope: claims.scope,
      token_type: claims.jkt ? ('DPoP' as const) : ('Bearer' as const),
      exp: claims.exp,
      iat: claims.iat,
      jti: claims.jti,
      iss: base,
      sub: claims.client_id,
      ...(claims.jkt ? { cnf: { jkt: claims.jkt } } : {})
    };
  }

  /**
   * RFC 7009: the answer is the same whether or not the token was valid; only the owning client revokes it. The
   * revocation is a MongoDB record, so every API process refuses the token, after restarts too.
   */
  async function revoke(token: string, caller: string) {
    const claims = await verifyToken(token);
    const owned = claims !== null && claims.client_id === caller;
    if (owned) await credentials.revokeOAuthToken(claims.jti, new Date(claims.exp * 1000));
    return { ok: true as const, revoked: owned };
  }

  const rotateKey = () => ({ ok: true as const, ...oauthKeys.rotate(config.OAUTH_TOKEN_TTL_S) });

  return { discovery, verifyProof, issueToken, introspect, revoke, rotateKey };
}
