/**
 * Authentication: every route declares its model in `config.auth` (a route without one fails at start-up), and one
 * hook checks the request's credentials for that model with the model's authenticator (one module each, in this
 * folder), setting `request.principal`. Failures give 401, except the daemon's two-factor check (403,
 * docs/daemon.md); when the database cannot be read to check a credential, the error handler answers 503 (retry),
 * never 500.
 */
import { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AuthModel } from '../../../core/endpoint-groups';
import type { DirectoryDeclaration } from '../../directory';
import { admin } from './admin';
import { apiKey } from './api-key';
import { daemon } from './daemon';
import { did } from './did';
import { externalNode } from './external-node';
import { groupKey } from './group-key';
import { homologous } from './homologous';
import { nodeOrHomologous } from './node-or-homologous';
import { none } from './none';
import { dpop, oauth } from './oauth';
import { oauthClient } from './oauth-client';
import { partner } from './partner';
import type { AuthDeps, Authenticator, Principal } from './principal';

export type { AuthDeps, Principal } from './principal';
export { verifyAccessToken } from './oauth';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthModel;
    /** Further models the route also accepts: tried in order when `auth`'s check answers 401 (e.g. api_key, then oauth). */
    authAlso?: AuthModel[];
    directory?: DirectoryDeclaration;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

/** The registry: one authenticator per model the directory declares. */
export const AUTHENTICATORS: Record<AuthModel, Authenticator> = {
  none,
  external_node: externalNode,
  homologous,
  did,
  oauth,
  api_key: apiKey,
  admin,
  daemon,
  node_or_homologous: nodeOrHomologous,
  oauth_client: oauthClient,
  dpop,
  group_key: groupKey,
  partner_federation: partner
};

/** Routes that belong to the docs plugins (they are public and declare nothing). */
const DOCS_ROUTE = /^\/(docs|openapi\.json)(\/|$)/;

function authPlugin(app: FastifyInstance, opts: { deps: AuthDeps }): void {
  app.decorateRequest('principal', null);
  app.addHook('onRoute', (route) => {
    route.config = route.config ?? {};
    if (!route.config.auth) {
      if (DOCS_ROUTE.test(route.url)) route.config.auth = 'none';
      else throw new Error(`Route ${route.method} ${route.url} declares no auth model (config.auth)`);
    }
  });
  // Credentials are checked before anything else about the request (path parameters, query, body), so an
  // anonymous or forged caller learns nothing about which identifiers or bodies are well formed, and its body is
  // never read. The one exception is OAuth client authentication, whose credentials may be in the form body
  // (RFC 6749 §2.3.1): it runs after parsing, before validation.
  const authenticate = async (request: FastifyRequest) => {
    const model = request.routeOptions.config.auth;
    if (!model) return;
    const also = request.routeOptions.config.authAlso ?? [];
    if (also.length === 0) {
      request.principal = await AUTHENTICATORS[model](request, opts.deps);
      return;
    }
    // Each model in turn; a 401 moves on to the next, anything else (a 403, a 503) is the answer. All refused:
    // the declared model's refusal.
    let refusal: unknown = null;
    for (const candidate of [model, ...also]) {
      try {
        request.principal = await AUTHENTICATORS[candidate](request, opts.deps);
        return;
      } catch (err) {
        if ((err as { status?: number }).status !== 401) throw err;
        refusal ??= err;
      }
    }
    throw refusal;
  };
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config.auth !== 'oauth_client') await authenticate(request);
  });
  app.addHook('preValidation', async (request) => {
    if (request.routeOptions.config.auth === 'oauth_client') await authenticate(request);
  });
}

export default fp(authPlugin, { name: 'auth' });
