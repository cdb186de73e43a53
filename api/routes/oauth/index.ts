/**
 * OAuth 2.0 / OIDC (group oauth_oidc): discovery (RFC 8414 and OIDC), client-credentials token (RFC 6749 §4.4),
 * introspection (RFC 7662), revocation (RFC 7009), the JWKS the discovery document points to, and DPoP-bound tokens
 * (RFC 9449). Access tokens are EdDSA-signed JWTs (typ at+jwt, iss = PUBLIC_URL, lifetime OAUTH_TOKEN_TTL_S, a jti
 * for revocation, the signing key's kid) signed with the rotating OAuth keys (store/keys/oauth-keys.ts), never the ledger's.
 * The token, introspection and revocation endpoints answer errors in RFC 6749 §5.2's shape
 * `{ error, error_description }`, as OAuth clients parse them; everything else keeps the service's error shape.
 * Request bodies may be application/x-www-form-urlencoded (as the RFCs say) or JSON.
 */
import type { FastifyPluginAsyncZod, ZodTypeProvider } from 'fastify-type-provider-zod';
import { createAccessTokens } from '../../../services/oauth/access-tokens';
import { verifyAccessToken } from '../../plugins/auth';
import type { AuthDeps } from '../../plugins/auth/principal';
import type { Config, OauthConfig } from '../../../core/config.node';
import { requestUrls } from '../../plugins/auth/oauth';
import { oauthErrorHandler } from './errors';
import { parseForm } from './form';
import {
  consumes,
  discoveryResponse,
  dpopVerifyBody,
  dpopVerifyResponse,
  introspectionResponse,
  jwksResponse,
  oauthErrors,
  revocationResponse,
  rotationResponse,
  tokenBody,
  tokenParam,
  tokenResponse
} from './index.schema';

type OAuthDeps = Pick<AuthDeps, 'keys' | 'credentials'> & {
  config: Pick<Config, 'publicUrl'> & Pick<OauthConfig, 'OAUTH_TOKEN_TTL_S'>;
};

export const oauthRoutes: FastifyPluginAsyncZod<OAuthDeps> = async (app, deps) => {
  const { config, keys, credentials } = deps;
  const base = config.publicUrl;
  const tokens = createAccessTokens({
    config,
    oauthKeys: keys.oauth,
    credentials,
    verifyToken: (token) => verifyAccessToken(token, deps)
  });
  const discovery = tokens.discovery;

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
    async () => tokens.rotateKey()
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
      const { nonce, answer } = await tokens.verifyProof(request.body);
      // Every answer carries a fresh nonce for the caller's next proof (RFC 9449 §8).
      reply.header('DPoP-Nonce', nonce).header('Cache-Control', 'no-store');
      return answer;
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
        const client = { id: request.principal!.id, scopes: request.principal!.scopes ?? [] };
        const dpop = { proof: request.headers.dpop, htu: requestUrls(request, base) };
        const answer = await tokens.issueToken(client, request.body, dpop);
        reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
        return answer;
      }
    );

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
        return tokens.introspect(request.body.token);
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
      async (request) => tokens.revoke(request.body.token, request.principal!.id)
    );
  });
};
