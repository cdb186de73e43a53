/**
 * Authentication: every route declares its model in `config.auth` (a route without one fails at start-up), and
 * one preHandler checks the request's credentials for that model, setting `request.principal`.
 * Failures give 401, except the daemon's two-factor check, which gives 403 as the spec asks; when the database
 * cannot be read to check a credential, 503 (retry), never 500.
 */
import { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { jwtVerify } from 'jose';
import { API_KEY_PATTERN, digestsEqual, hashSecret } from '../../core/credentials';
import { AppError, unauthorized } from '../../core/errors';
import { AuthModel } from '../../core/endpoint-groups';
import type { ServiceContext } from '../context';
import type { DirectoryDeclaration } from '../directory';

export interface Principal {
  model: AuthModel;
  /** Who: a DID, node id, token id, API key id, OAuth client id, daemon asset id, or "admin" / "anonymous". */
  id: string;
  did?: string;
  scopes?: string[];
  /** For external_node: the node's state as this process last saw it (core/federation.ts NODE_PERMISSIONS). */
  nodeState?: import('../../core/federation').NodeState;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthModel;
    directory?: DirectoryDeclaration;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

type Authenticator = (request: FastifyRequest, ctx: ServiceContext) => Promise<Principal>;

const header = (request: FastifyRequest, name: string): string | undefined => {
  const v = request.headers[name];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
};

function bearer(request: FastifyRequest): string | undefined {
  const value = header(request, 'authorization');
  const match = value ? /^Bearer\s+(\S+)$/i.exec(value) : null;
  return match?.[1];
}

async function externalNode(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  const nodeId = header(request, 'x-external-node');
  const key = header(request, 'x-external-key');
  if (!nodeId || !key) throw unauthorized('X-External-Node and X-External-Key headers are both required');
  const node = await ctx.nodeCache.get(nodeId);
  if (!node || !digestsEqual(node.api_key_hash, hashSecret(key))) throw unauthorized('Unknown node or wrong key');
  if (node.state === 'rejected') throw new AppError('forbidden', 'This node was rejected by review');
  return { model: 'external_node', id: node.node_id, nodeState: node.state };
}

async function homologous(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  const zr = header(request, 'x-zr-token');
  if (zr) {
    const token = await ctx.credentials.findHomologousToken(zr);
    if (token && !token.did) return { model: 'homologous', id: token.token_id };
    throw unauthorized('Unknown or revoked X-ZR-Token');
  }
  const did = header(request, 'x-did');
  const capture = header(request, 'x-capture-token');
  if (did && capture) {
    const token = await ctx.credentials.findHomologousToken(capture);
    if (token && token.did === did && (await ctx.credentials.activeDid(did))) return { model: 'homologous', id: token.token_id, did };
    throw unauthorized('X-Capture-Token is unknown, revoked or not issued to this X-DID');
  }
  throw unauthorized('Send X-ZR-Token, or X-DID together with X-Capture-Token');
}

async function did(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  const value = header(request, 'x-did');
  if (!value) throw unauthorized('X-DID header is required');
  if (!(await ctx.credentials.activeDid(value))) throw unauthorized('X-DID is not a registered DID');
  return { model: 'did', id: value, did: value };
}

async function oauth(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  const token = bearer(request);
  if (!token) throw unauthorized('Authorization: Bearer <access token> is required');
  const claims = await verifyAccessToken(token, ctx);
  if (!claims) throw unauthorized('Access token is invalid, expired or revoked');
  return { model: 'oauth', id: claims.client_id, scopes: claims.scope ? claims.scope.split(' ') : [] };
}

/** Verifies one of our own access tokens; null when invalid, expired or revoked. */
export async function verifyAccessToken(
  token: string,
  ctx: ServiceContext
): Promise<{ client_id: string; scope: string; jti: string; exp: number; iat: number } | null> {
  try {
    const { payload } = await jwtVerify(token, ctx.keys.publicKey, { issuer: ctx.config.publicUrl, algorithms: ['EdDSA'] });
    const jti = payload.jti;
    const clientId = payload.client_id;
    if (typeof jti !== 'string' || typeof clientId !== 'string' || !payload.exp || !payload.iat) return null;
    if (await ctx.credentials.isOAuthTokenRevoked(jti)) return null;
    if (!(await ctx.credentials.findOAuthClient(clientId))) return null;
    return { client_id: clientId, scope: typeof payload.scope === 'string' ? payload.scope : '', jti, exp: payload.exp, iat: payload.iat };
  } catch {
    return null;
  }
}

async function apiKey(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  const token = bearer(request);
  const match = token ? API_KEY_PATTERN.exec(token) : null;
  if (!token || !match) throw unauthorized('Authorization: Bearer zk_… API key is required');
  const key = await ctx.credentials.findApiKey(match[1]!);
  if (!key || key.revoked_at || !digestsEqual(key.secret_hash, hashSecret(token))) throw unauthorized('API key is invalid or revoked');
  return { model: 'api_key', id: key._id };
}

async function admin(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  const token = bearer(request);
  if (!token || !digestsEqual(ctx.adminTokenHash, hashSecret(token))) throw unauthorized('Administrator token required');
  return { model: 'admin', id: 'admin' };
}

async function daemon(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  const assetId = header(request, 'x-asset-id');
  const orderRoot = header(request, 'x-order-root');
  const fail = (why: string) => new AppError('identity_check_failed', `Identity check failed: ${why}`);
  if (!assetId || !orderRoot) throw fail('X-Asset-Id and X-Order-Root are both required');
  const version = /^or(\d+)_/.exec(orderRoot)?.[1];
  const asset = await ctx.credentials.findDaemonAsset(assetId);
  if (!asset || !digestsEqual(asset.order_root_hash, hashSecret(orderRoot))) throw fail('unknown asset or forged order root');
  if (Number(version) !== ctx.config.DAEMON_PROTOCOL_VERSION || asset.version !== ctx.config.DAEMON_PROTOCOL_VERSION) {
    throw fail(`order root version ${version} does not match protocol version ${ctx.config.DAEMON_PROTOCOL_VERSION}`);
  }
  return { model: 'daemon', id: asset._id };
}

async function nodeOrHomologous(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  if (header(request, 'x-external-node') || header(request, 'x-external-key')) return externalNode(request, ctx);
  return homologous(request, ctx);
}

/** OAuth client authentication (RFC 6749 §2.3.1): HTTP Basic, or client_id + client_secret in the body. */
async function oauthClient(request: FastifyRequest, ctx: ServiceContext): Promise<Principal> {
  let clientId: string | undefined;
  let clientSecret: string | undefined;
  const authz = header(request, 'authorization');
  const basic = authz ? /^Basic\s+(\S+)$/i.exec(authz) : null;
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) {
      clientId = decodeURIComponent(decoded.slice(0, colon));
      clientSecret = decodeURIComponent(decoded.slice(colon + 1));
    }
  } else if (request.body && typeof request.body === 'object') {
    const body = request.body as Record<string, unknown>;
    if (typeof body.client_id === 'string') clientId = body.client_id;
    if (typeof body.client_secret === 'string') clientSecret = body.client_secret;
  }
  const fail = new AppError('invalid_client', 'Client authentication failed', { error_description: 'unknown client or wrong secret' }, { 'WWW-Authenticate': 'Basic realm="oauth"' });
  if (!clientId || !clientSecret) throw fail;
  const client = await ctx.credentials.findOAuthClient(clientId);
  if (!client || !digestsEqual(client.secret_hash, hashSecret(clientSecret))) throw fail;
  return { model: 'oauth_client', id: client._id, scopes: client.scopes };
}

const anonymous = async (): Promise<Principal> => ({ model: 'none', id: 'anonymous' });

const notServedYet = (model: AuthModel): Authenticator => async () => {
  throw new AppError('unauthorized', `Authentication model ${model} is declared by the directory but no route accepts it yet`);
};

export const AUTHENTICATORS: Record<AuthModel, Authenticator> = {
  none: anonymous,
  external_node: externalNode,
  homologous,
  did,
  oauth,
  api_key: apiKey,
  admin,
  daemon,
  node_or_homologous: nodeOrHomologous,
  oauth_client: oauthClient,
  dpop: notServedYet('dpop'),
  group_key: notServedYet('group_key'),
  partner_federation: notServedYet('partner_federation')
};

/** Routes that belong to the docs plugins (they are public and declare nothing). */
const DOCS_ROUTE = /^\/(docs|openapi\.json)(\/|$)/;

function authPlugin(app: FastifyInstance, opts: { ctx: ServiceContext }): void {
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
    try {
      request.principal = await AUTHENTICATORS[model](request, opts.ctx);
    } catch (err) {
      // A credential that could not be checked is neither valid nor invalid: whatever the driver raised
      // (server selection, a connection closed mid-read, a server-side failure), the caller should retry.
      if (!(err instanceof AppError) && /^Mongo/.test((err as Error)?.name ?? '')) {
        throw new AppError('unavailable', 'Credentials could not be checked (database unavailable); retry', {}, { 'Retry-After': '5' });
      }
      throw err;
    }
  };
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config.auth !== 'oauth_client') await authenticate(request);
  });
  app.addHook('preValidation', async (request) => {
    if (request.routeOptions.config.auth === 'oauth_client') await authenticate(request);
  });
}

export default fp(authPlugin, { name: 'auth' });
