/**
 * OAuth 2.0 / OIDC (group oauth_oidc): discovery, client-credentials token (RFC 6749 §4.4), introspection
 * (RFC 7662), revocation (RFC 7009), plus the JWKS the discovery document points to.
 * Access tokens are EdDSA-signed JWTs (iss = PUBLIC_URL, lifetime OAUTH_TOKEN_TTL_S, a jti for revocation).
 * Request bodies may be application/x-www-form-urlencoded (as the RFCs say) or JSON.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { SignJWT } from 'jose';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { AppError } from '../../../core/errors';
import type { CredentialStore } from '../../../store/credentials';
import type { HubKeys } from '../../keys';
import { verifyAccessToken } from '../../plugins/auth';
import { parseForm } from './form';

// grant_type stays a string for validation, so another grant answers RFC 6749's unsupported_grant_type rather than
// a generic validation failure; the document lists the one grant served.
const tokenBody = z.object({
  grant_type: z.string().min(1).meta({ enum: ['client_credentials'], description: 'only client_credentials (another gives 400 unsupported_grant_type)' }),
  scope: z.string().max(1000).optional(),
  client_id: z.string().optional(),
  client_secret: z.string().optional()
});

const tokenParam = z.object({
  token: z.string().min(1).max(8192),
  token_type_hint: z.string().optional(),
  client_id: z.string().optional(),
  client_secret: z.string().optional()
});

/** The RFCs define these bodies as form-urlencoded; JSON is accepted too. */
const consumes = ['application/x-www-form-urlencoded', 'application/json'];

const discoveryResponse = z.object({
  issuer: z.string(),
  token_endpoint: z.string(),
  introspection_endpoint: z.string(),
  revocation_endpoint: z.string(),
  jwks_uri: z.string(),
  grant_types_supported: z.array(z.string()),
  response_types_supported: z.array(z.string()),
  subject_types_supported: z.array(z.string()),
  token_endpoint_auth_methods_supported: z.array(z.string()),
  introspection_endpoint_auth_methods_supported: z.array(z.string()),
  revocation_endpoint_auth_methods_supported: z.array(z.string()),
  id_token_signing_alg_values_supported: z.array(z.string()),
  token_endpoint_auth_signing_alg_values_supported: z.array(z.string())
});
const jwksResponse = z.object({ keys: z.array(z.record(z.string(), z.string())) });
const tokenResponse = z.object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int(), scope: z.string() });
const introspectionResponse = z.object({
  active: z.boolean(),
  client_id: z.string().optional(),
  scope: z.string().optional(),
  token_type: z.string().optional(),
  exp: z.number().int().optional(),
  iat: z.number().int().optional(),
  jti: z.string().optional(),
  iss: z.string().optional(),
  sub: z.string().optional()
});
const revocationResponse = z.object({ ok: z.literal(true), revoked: z.boolean() });

export const oauthRoutes: FastifyPluginAsyncZod<{ config: Config; keys: HubKeys; credentials: CredentialStore }> = async (app, deps) => {
  const { config, keys, credentials } = deps;
  const base = config.publicUrl;

  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 16 * 1024 }, (_req, body, done) => {
    try {
      done(null, parseForm(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  app.get(
    '/.well-known/openid-configuration',
    { config: { auth: 'none', directory: { group: 'oauth_oidc', summary: 'OIDC discovery document' } }, schema: { response: { 200: discoveryResponse } } },
    async () => ({
      issuer: base,
      token_endpoint: `${base}/v1/oauth/token`,
      introspection_endpoint: `${base}/v1/oauth/introspect`,
      revocation_endpoint: `${base}/v1/oauth/revoke`,
      jwks_uri: `${base}/.well-known/jwks.json`,
      grant_types_supported: ['client_credentials'],
      response_types_supported: ['token'],
      subject_types_supported: ['public'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      id_token_signing_alg_values_supported: ['EdDSA'],
      token_endpoint_auth_signing_alg_values_supported: ['EdDSA']
    })
  );

  app.get('/.well-known/jwks.json', { config: { auth: 'none' }, schema: { response: { 200: jwksResponse } } }, async (_request, reply) => {
    reply.header('Cache-Control', 'public, max-age=3600');
    return { keys: [keys.jwk] };
  });

  app.post(
    '/v1/oauth/token',
    { config: { auth: 'oauth_client', directory: { group: 'oauth_oidc', summary: 'Access token, client credentials flow', publicRead: true } }, schema: { body: tokenBody, consumes, response: { 200: tokenResponse } } },
    async (request, reply) => {
      const body = request.body;
      if (body.grant_type !== 'client_credentials') {
        throw new AppError('unsupported_grant_type', `grant_type ${body.grant_type} is not supported; use client_credentials`, { error_description: 'only client_credentials' });
      }
      const allowed = request.principal!.scopes ?? [];
      const requested = body.scope ? body.scope.split(' ').filter(Boolean) : allowed;
      const refused = requested.filter((s) => !allowed.includes(s));
      if (refused.length > 0) throw new AppError('invalid_scope', `Scopes not granted to this client: ${refused.join(' ')}`, { error_description: 'scope not allowed' });
      const ttl = config.OAUTH_TOKEN_TTL_S;
      const scope = requested.join(' ');
      const token = await new SignJWT({ client_id: request.principal!.id, scope })
        .setProtectedHeader({ alg: 'EdDSA', kid: keys.kid, typ: 'at+jwt' })
        .setIssuer(base)
        .setSubject(request.principal!.id)
        .setAudience(base)
        .setIssuedAt()
        .setExpirationTime(`${ttl}s`)
        .setJti(randomBytes(16).toString('hex'))
        .sign(keys.privateKey);
      reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
      return { access_token: token, token_type: 'Bearer' as const, expires_in: ttl, scope };
    }
  );

  app.post(
    '/v1/oauth/introspect',
    { config: { auth: 'oauth_client', directory: { group: 'oauth_oidc', summary: 'Token introspection (RFC 7662)', publicRead: true } }, schema: { body: tokenParam, consumes, response: { 200: introspectionResponse } } },
    async (request) => {
      const claims = await verifyAccessToken(request.body.token, deps);
      if (!claims) return { active: false };
      return { active: true, client_id: claims.client_id, scope: claims.scope, token_type: 'Bearer', exp: claims.exp, iat: claims.iat, jti: claims.jti, iss: base, sub: claims.client_id };
    }
  );

  app.post(
    '/v1/oauth/revoke',
    { config: { auth: 'oauth_client', directory: { group: 'oauth_oidc', summary: 'Token revocation (RFC 7009)', publicRead: true } }, schema: { body: tokenParam, consumes, response: { 200: revocationResponse } } },
    async (request) => {
      // RFC 7009: answer 200 whether or not the token was valid; only the owning client may revoke it.
      const claims = await verifyAccessToken(request.body.token, deps);
      const owned = claims !== null && claims.client_id === request.principal!.id;
      if (owned) await credentials.revokeOAuthToken(claims.jti, new Date(claims.exp * 1000));
      return { ok: true as const, revoked: owned };
    }
  );
};
