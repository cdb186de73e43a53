/**
 * OAuth 2.0 / OIDC (group oauth_oidc): discovery (RFC 8414 and OIDC), client-credentials token (RFC 6749 §4.4),
 * introspection (RFC 7662), revocation (RFC 7009), the JWKS the discovery document points to, and DPoP-bound tokens
 * (RFC 9449). Access tokens are EdDSA-signed JWTs (typ at+jwt, iss = PUBLIC_URL, lifetime OAUTH_TOKEN_TTL_S, a jti
 * for revocation, the signing key's kid) signed with the rotating OAuth keys (api/oauth-keys.ts), never the ledger's.
 * The token, introspection and revocation endpoints answer errors in RFC 6749 §5.2's shape
 * `{ error, error_description }`, as OAuth clients parse them; everything else keeps the service's error shape.
 * Request bodies may be application/x-www-form-urlencoded (as the RFCs say) or JSON.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  type FastifyPluginAsyncZod,
  type ZodTypeProvider
} from 'fastify-type-provider-zod';
import { SignJWT } from 'jose';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { AppError } from '../../../core/errors';
import { DPOP_ALGS, DPOP_IAT_WINDOW_S, DPOP_NONCE_TTL_S, verifyDpopProof } from '../../../core/oauth/dpop.node';
import type { CredentialStore } from '../../../store/credentials';
import type { HubKeys } from '../../keys';
import { verifyAccessToken } from '../../plugins/auth';
import { requestUrls } from '../../plugins/auth/oauth';
import { parseForm } from './form';

// grant_type stays a string for validation, so another grant answers RFC 6749's unsupported_grant_type rather than
// a generic validation failure; the document lists the one grant served.
const tokenBody = z.object({
  grant_type: z
    .string()
    .min(1)
    .max(200)
    .meta({
      enum: ['client_credentials'],
      description: 'only client_credentials (another gives 400 unsupported_grant_type)'
    }),
  scope: z.string().max(1000).optional(),
  client_id: z.string().max(200).optional(),
  client_secret: z.string().max(200).optional()
});

const tokenParam = z.object({
  token: z.string().min(1).max(8192),
  token_type_hint: z.string().max(100).optional(),
  client_id: z.string().max(200).optional(),
  client_secret: z.string().max(200).optional()
});

/** The RFCs define these bodies as form-urlencoded; JSON is accepted too. */
const consumes = ['application/x-www-form-urlencoded', 'application/json'];

/** RFC 6749 §5.2 (also RFC 7009 §2.2.1, RFC 9449 §5 and §8). */
const oauthErrorBody = z
  .object({
    error: z
      .string()
      .describe(
        'invalid_request, invalid_client, invalid_grant, unsupported_grant_type, invalid_scope, invalid_dpop_proof, use_dpop_nonce'
      ),
    error_description: z.string()
  })
  .describe('OAuth error (RFC 6749 §5.2)');
const oauthErrors = {
  400: oauthErrorBody.describe('RFC 6749 §5.2 error; use_dpop_nonce comes with a DPoP-Nonce header'),
  401: oauthErrorBody.describe('invalid_client, with WWW-Authenticate: Basic')
};

/** What this server does, and nothing it does not (RFC 8414 §2; the OIDC discovery document is the same). */
const discoveryResponse = z.object({
  issuer: z.string(),
  token_endpoint: z.string(),
  introspection_endpoint: z.string(),
  revocation_endpoint: z.string(),
  jwks_uri: z.string(),
  grant_types_supported: z.array(z.string()),
  response_types_supported: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  token_endpoint_auth_methods_supported: z.array(z.string()),
  introspection_endpoint_auth_methods_supported: z.array(z.string()),
  revocation_endpoint_auth_methods_supported: z.array(z.string()),
  dpop_signing_alg_values_supported: z.array(z.string())
});
const jwksResponse = z.object({ keys: z.array(z.record(z.string(), z.string())) });
const tokenResponse = z.object({
  access_token: z.string(),
  token_type: z.enum(['Bearer', 'DPoP']),
  expires_in: z.number().int(),
  scope: z.string()
});
const introspectionResponse = z.object({
  active: z.boolean(),
  client_id: z.string().optional(),
  scope: z.string().optional(),
  token_type: z.enum(['Bearer', 'DPoP']).optional(),
  exp: z.number().int().optional(),
  iat: z.number().int().optional(),
  jti: z.string().optional(),
  iss: z.string().optional(),
  sub: z.string().optional(),
  cnf: z.object({ jkt: z.string() }).optional().describe('RFC 9449 §6.2: the DPoP key the token is bound to')
});
const revocationResponse = z.object({ ok: z.literal(true), revoked: z.boolean() });
const rotationResponse = z.object({
  ok: z.literal(true),
  kid: z.string(),
  retired: z.string(),
  retired_verify_until: z.string()
});

const dpopVerifyBody = z.object({
  proof: z.string().min(1).max(8192).describe('the DPoP proof JWT'),
  htm: z
    .string()
    .min(1)
    .max(16)
    .regex(/^[A-Z]+$/)
    .describe('the HTTP method the proof is for'),
  htu: z.string().min(1).max(2048).describe('the HTTP URL the proof is for (query and fragment ignored)'),
  access_token: z.string().min(1).max(8192).optional().describe('when given, the proof must carry ath = its SHA-256')
});
const dpopVerifyResponse = z.object({
  valid: z.boolean(),
  jkt: z.string().optional().describe('RFC 7638 thumbprint of the proof key'),
  jti: z.string().optional(),
  check: z
    .enum(['jwt', 'typ', 'alg', 'jwk', 'signature', 'claims', 'htm', 'htu', 'iat', 'ath', 'nonce', 'jti'])
    .optional()
    .describe('the first RFC 9449 §4.3 check that failed'),
  error: z.enum(['invalid_dpop_proof', 'use_dpop_nonce']).optional(),
  message: z.string().optional()
});

/** An OAuth-protocol error of the token endpoint (RFC 9449's DPoP errors have no code in the service's table). */
class OAuthProtocolError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly headers: Record<string, string> = {}
  ) {
    super(description);
  }
}

/** The codes RFC 6749 §5.2 defines that this server answers; any other 400/401 becomes invalid_request. */
const RFC_CODES = new Set([
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unsupported_grant_type',
  'invalid_scope'
]);

/** Errors of the three OAuth endpoints in RFC 6749 §5.2's shape; other statuses go to the service's handler. */
function oauthErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.header('X-Trace', request.id).header('Cache-Control', 'no-store');
  if (err instanceof OAuthProtocolError) {
    for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
    return reply.code(400).send({ error: err.error, error_description: err.description });
  }
  if (err instanceof AppError && (err.status === 400 || err.status === 401)) {
    for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
    return reply
      .code(err.status)
      .send({ error: RFC_CODES.has(err.code) ? err.code : 'invalid_request', error_description: err.message });
  }
  if (hasZodFastifySchemaValidationErrors(err) || err.validation) {
    const what = (err.validation ?? [])
      .map((v) => `${v.instancePath.replace(/^\//, '') || 'body'}: ${v.message ?? 'is invalid'}`)
      .join('; ');
    return reply.code(400).send({ error: 'invalid_request', error_description: `Invalid request: ${what}` });
  }
  // Anything else (415, 413, 429, dependency outages, internal errors): the service's handler and shape.
  throw err;
}

type OAuthDeps = { config: Config; keys: HubKeys; credentials: CredentialStore };

export const oauthRoutes: FastifyPluginAsyncZod<OAuthDeps> = async (app, deps) => {
  const { config, keys, credentials } = deps;
  const base = config.publicUrl;

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

  app.get(
    '/.well-known/openid-configuration',
    {
      config: { auth: 'none', directory: { group: 'oauth_oidc', summary: 'OIDC discovery document' } },
      schema: { response: { 200: discoveryResponse } }
    },
    async () => discovery()
  );
  app.get(
    '/.well-known/oauth-authorization-server',
    {
      config: { auth: 'none' },
      schema: {
        description: 'RFC 8414 authorization server metadata (the same document)',
        response: { 200: discoveryResponse }
      }
    },
    async () => discovery()
  );

  app.get(
    '/.well-known/jwks.json',
    { config: { auth: 'none' }, schema: { response: { 200: jwksResponse } } },
    async (_request, reply) => {
      // Short: a client that meets a new kid refetches anyway; a retired key leaves the set when its tokens expire.
      reply.header('Cache-Control', 'public, max-age=300');
      return { keys: keys.oauth.jwks() };
    }
  );

  app.post(
    '/admin/oauth-keys/rotate',
    {
      config: { auth: 'admin' },
      schema: {
        description: 'Rotate the OAuth signing key (npm run admin -- rotate-oauth-key)',
        response: { 200: rotationResponse }
      }
    },
    async () => ({ ok: true as const, ...keys.oauth.rotate(config.OAUTH_TOKEN_TTL_S) })
  );

  app.post(
    '/v1/dpop/verify',
    {
      config: {
        auth: 'none',
        directory: { group: 'federated_compute', summary: 'DPoP proof verification (RFC 9449 §4.3)', publicRead: true }
      },
      schema: { body: dpopVerifyBody, response: { 200: dpopVerifyResponse } }
    },
    async (request, reply) => {
      const { proof, htm, htu, access_token: accessToken } = request.body;
      const result = await verifyDpopProof({
        proof,
        htm,
        htu: [htu],
        ...(accessToken ? { accessToken } : {}),
        windowS: DPOP_IAT_WINDOW_S,
        nowS: Math.floor(Date.now() / 1000),
        requireNonce: true,
        nonceValid: (n) => credentials.dpopNonceValid(n),
        rememberJti: (id, until) => credentials.rememberDpopJti(id, until)
      });
      // Every answer carries a fresh nonce for the caller's next proof (RFC 9449 §8).
      reply
        .header('DPoP-Nonce', await credentials.issueDpopNonce(DPOP_NONCE_TTL_S))
        .header('Cache-Control', 'no-store');
      if (result.valid) return { valid: true, jkt: result.jkt, jti: result.jti };
      return {
        valid: false,
        check: result.check,
        error: result.error,
        message: result.message,
        ...(result.jkt ? { jkt: result.jkt } : {})
      };
    }
  );

  // The three OAuth endpoints: their own error shape (RFC 6749 §5.2) and form bodies.
  await app.register(async (scope) => {
    const endpoints = scope.withTypeProvider<ZodTypeProvider>();
    endpoints.setErrorHandler(oauthErrorHandler);
    endpoints.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 16 * 1024 },
      (_req, body, done) => {
        try {
          done(null, parseForm(body as string));
        } catch (err) {
          done(err as Error, undefined);
        }
      }
    );

    endpoints.post(
      '/v1/oauth/token',
      {
        config: {
          auth: 'oauth_client',
          directory: {
            group: 'oauth_oidc',
            summary: 'Access token, client credentials flow (DPoP-bound with a DPoP proof)',
            publicRead: true
          }
        },
        schema: { body: tokenBody, consumes, response: { 200: tokenResponse, ...oauthErrors } }
      },
      async (request, reply) => {
        const body = request.body;
        if (body.grant_type !== 'client_credentials') {
          throw new AppError(
            'unsupported_grant_type',
            `grant_type ${body.grant_type} is not supported; use client_credentials`
          );
        }
        const allowed = request.principal!.scopes ?? [];
        const requested = body.scope ? body.scope.split(' ').filter(Boolean) : allowed;
        const refused = requested.filter((s) => !allowed.includes(s));
        if (refused.length > 0)
          throw new AppError('invalid_scope', `Scopes not granted to this client: ${refused.join(' ')}`);
        const jkt = await dpopBinding(request);
        const ttl = config.OAUTH_TOKEN_TTL_S;
        const scope = requested.join(' ');
        const key = keys.oauth.current();
        const token = await new SignJWT({ client_id: request.principal!.id, scope, ...(jkt ? { cnf: { jkt } } : {}) })
          .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'at+jwt' })
          .setIssuer(base)
          .setSubject(request.principal!.id)
          .setAudience(base)
          .setIssuedAt()
          .setExpirationTime(`${ttl}s`)
          .setJti(randomBytes(16).toString('hex'))
          .sign(key.privateKey);
        reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
        return {
          access_token: token,
          token_type: jkt ? ('DPoP' as const) : ('Bearer' as const),
          expires_in: ttl,
          scope
        };
      }
    );

    /** RFC 9449 §5: a DPoP header at the token endpoint binds the token to the proof's key; a bad proof is refused. */
    async function dpopBinding(request: FastifyRequest): Promise<string | null> {
      const proof = request.headers.dpop;
      if (proof === undefined) return null;
      if (typeof proof !== 'string') throw new OAuthProtocolError('invalid_dpop_proof', 'Send exactly one DPoP header');
      const result = await verifyDpopProof({
        proof,
        htm: 'POST',
        htu: requestUrls(request, base),
        windowS: DPOP_IAT_WINDOW_S,
        nowS: Math.floor(Date.now() / 1000),
        requireNonce: true,
        nonceValid: (n) => credentials.dpopNonceValid(n),
        rememberJti: (id, until) => credentials.rememberDpopJti(id, until)
      });
      if (result.valid) return result.jkt;
      const headers: Record<string, string> =
        result.error === 'use_dpop_nonce' ? { 'DPoP-Nonce': await credentials.issueDpopNonce(DPOP_NONCE_TTL_S) } : {};
      throw new OAuthProtocolError(result.error, `DPoP proof refused (${result.check}): ${result.message}`, headers);
    }

    endpoints.post(
      '/v1/oauth/introspect',
      {
        config: {
          auth: 'oauth_client',
          directory: { group: 'oauth_oidc', summary: 'Token introspection (RFC 7662)', publicRead: true }
        },
        schema: { body: tokenParam, consumes, response: { 200: introspectionResponse, ...oauthErrors } }
      },
      async (request, reply) => {
        reply.header('Cache-Control', 'no-store');
        const claims = await verifyAccessToken(request.body.token, deps);
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
    );

    endpoints.post(
      '/v1/oauth/revoke',
      {
        config: {
          auth: 'oauth_client',
          directory: { group: 'oauth_oidc', summary: 'Token revocation (RFC 7009)', publicRead: true }
        },
        schema: { body: tokenParam, consumes, response: { 200: revocationResponse, ...oauthErrors } }
      },
      async (request) => {
        // RFC 7009: answer 200 whether or not the token was valid; only the owning client may revoke it. The
        // revocation is a MongoDB record, so every API process refuses the token, after restarts too.
        const claims = await verifyAccessToken(request.body.token, deps);
        const owned = claims !== null && claims.client_id === request.principal!.id;
        if (owned) await credentials.revokeOAuthToken(claims.jti, new Date(claims.exp * 1000));
        return { ok: true as const, revoked: owned };
      }
    );
  });
};
