/**
 * What every route can answer besides its own success, documented in one place: an onRoute hook (installed on every
 * listener by api/app.ts) gives each route
 *   - `security`, derived from its `config.auth` model (the schemes are SECURITY_SCHEMES, in the OpenAPI components);
 *   - the error responses it can produce, each with the one error shape (core/errors.ts), never overriding a status
 *     the route declares itself;
 *   - a start-up error when it declares no response of its own: every route documents its answers.
 * The zod serializer then also checks error replies against ERROR_BODY, so the schema allows extra detail members.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';

/** What the hook reads and writes of a route (any listener's app, whatever its type provider). */
type RouteShape = Pick<RouteOptions, 'method' | 'url' | 'config'> & { schema?: unknown };
import { z } from 'zod';
import type { AuthModel } from '../core/endpoint-groups';

/**
 * The one error shape (docs/http-api.md#errors); routes add detail members (fields, limit, conflicts,
 * error_description…).
 */
export const ERROR_BODY = z
  .looseObject({
    ok: z.literal(false),
    error: z.string().describe('error code, e.g. invalid_request, unauthorized, not_found'),
    message: z.string(),
    trace_id: z.string().describe('the X-Trace header of the response'),
    fields: z
      .array(z.object({ field: z.string(), message: z.string() }))
      .optional()
      .describe('each bad field, for 400')
  })
  .describe('Error');

type SecurityRequirement = Record<string, string[]>;

/** OpenAPI security schemes, one per credential header or token kind (components.securitySchemes). */
export function securitySchemes(publicUrl: string): Record<string, Record<string, unknown>> {
  const header = (name: string, description: string) => ({ type: 'apiKey', in: 'header', name, description });
  return {
    node_id: header('X-External-Node', 'Node id from POST /a2a/register (sent together with X-External-Key)'),
    node_key: header('X-External-Key', 'Node API key from POST /a2a/register (shown once)'),
    zr_token: header('X-ZR-Token', 'Homologous token (POST /admin/homologous-tokens)'),
    did: header('X-DID', 'A registered DID (POST /admin/dids)'),
    capture_token: header('X-Capture-Token', 'Homologous token issued to the X-DID sent with it'),
    admin_token: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'ADMIN_TOKEN',
      description: 'The administrator token'
    },
    api_key: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'zk_<id>_<secret>',
      description: 'Chat gateway API key (POST /admin/api-keys)'
    },
    oauth: {
      type: 'oauth2',
      description: 'Access token (an EdDSA JWT) from the client credentials grant',
      flows: { clientCredentials: { tokenUrl: `${publicUrl}/v1/oauth/token`, scopes: {} } }
    },
    oauth_client: {
      type: 'http',
      scheme: 'basic',
      description: 'OAuth client id and secret (RFC 6749 §2.3.1; client_secret_post in the form works too)'
    },
    daemon_asset: header('X-Asset-Id', 'Daemon asset id (POST /admin/daemon-assets; sent together with X-Order-Root)'),
    daemon_order_root: header('X-Order-Root', 'Daemon order root or<version>_<secret>'),
    dpop_token: { type: 'http', scheme: 'DPoP', description: 'OAuth access token bound to a DPoP proof (RFC 9449)' },
    dpop_proof: header('DPoP', 'DPoP proof JWT (RFC 9449)'),
    partner_signature_input: header(
      'Signature-Input',
      'RFC 9421 signature parameters: ("@method" "@path" "content-digest");created;keyid="<partner id>";alg="ed25519" (sent with Signature and Content-Digest)'
    ),
    partner_signature: header(
      'Signature',
      'RFC 9421 Ed25519 signature by the partner key registered at POST /admin/partners'
    ),
    slim_group: header('X-Slim-Group', 'SLIM group id (sent together with X-Slim-Group-Key)'),
    slim_group_key: header(
      'X-Slim-Group-Key',
      "The group's current epoch key, unwrapped by the member (32 bytes, base64url)"
    )
  };
}

const NODE: SecurityRequirement = { node_id: [], node_key: [] };
const HOMOLOGOUS: SecurityRequirement[] = [{ zr_token: [] }, { did: [], capture_token: [] }];

/**
 * Each model's alternatives (OpenAPI: any one requirement object, all schemes within it). The models no route
 * serves yet and whose credential has no settled form are null: a route declaring one fails at start-up until its
 * scheme is written down here.
 */
export const SECURITY: Record<AuthModel, SecurityRequirement[] | null> = {
  none: [],
  // A node's key, or X-DID alone of a DID linked to the node (api/plugins/auth/external-node.ts).
  external_node: [NODE, { did: [] }],
  homologous: HOMOLOGOUS,
  did: [{ did: [] }],
  oauth: [{ oauth: [] }],
  api_key: [{ api_key: [] }],
  admin: [{ admin_token: [] }],
  daemon: [{ daemon_asset: [], daemon_order_root: [] }],
  node_or_homologous: [NODE, { did: [] }, ...HOMOLOGOUS],
  // HTTP Basic, or nothing in the headers: client_secret_post carries the client's id and secret in the form
  // (RFC 6749 §2.3.1), for which OpenAPI has no scheme. The route answers 401 when neither authenticates.
  oauth_client: [{ oauth_client: [] }, {}],
  dpop: [{ dpop_token: [], dpop_proof: [] }],
  group_key: [{ slim_group: [], slim_group_key: [] }],
  partner_federation: [{ partner_signature_input: [], partner_signature: [] }]
};

/** Models whose check answers 401 on a missing or wrong credential (the daemon's two-factor check answers 403). */
const ANSWERS_401 = (model: AuthModel) => model !== 'none' && model !== 'daemon';
/** Models whose check can refuse a valid credential: a rejected node; the daemon's identity check. */
const ANSWERS_403 = (model: AuthModel) =>
  model === 'external_node' || model === 'node_or_homologous' || model === 'daemon';

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request: validation failure (fields names each), malformed JSON, or a domain rule',
  401: 'Missing or wrong credentials',
  403: 'Credentials valid but not allowed',
  404: 'No such resource',
  413: 'Body larger than this endpoint accepts',
  414: 'A path parameter longer than any identifier the service accepts',
  415: 'Body media type (or charset) not accepted',
  429: 'Rate limit or quota exceeded (Retry-After)',
  500: 'Internal error (details only in the log; quote trace_id)',
  503: 'A dependency (MongoDB, Temporal) is unavailable, or the service is stopping; retry (Retry-After)'
};
const ERROR_RESPONSES = new Map(
  Object.entries(ERROR_DESCRIPTIONS).map(([status, text]) => [Number(status), ERROR_BODY.describe(text)])
);
const errorResponse = (status: number) => ERROR_RESPONSES.get(status) ?? ERROR_BODY;

/** The error statuses a route can answer, from what it declares: its auth model, its inputs, its method. */
export function errorStatuses(route: {
  method: string;
  auth: AuthModel;
  /** Further models the route accepts (config.authAlso): their refusals are answers too. */
  also?: AuthModel[];
  schema: Record<string, unknown>;
}): number[] {
  const { schema, auth } = route;
  const models = [auth, ...(route.also ?? [])];
  const hasBody = BODY_METHODS.has(route.method);
  const hasInput = hasBody || Boolean(schema.querystring || schema.params || schema.headers);
  const statuses = [429, 500, 503];
  if (hasInput) statuses.push(400, 404);
  if (models.some(ANSWERS_401)) statuses.push(401);
  if (models.some(ANSWERS_403)) statuses.push(403);
  if (hasBody) statuses.push(413, 415);
  if (schema.params) statuses.push(414);
  return statuses.sort((a, b) => a - b);
}

/**
 * One Server-Sent Event as a client parses it (the schema of a `text/event-stream` response is that of each event):
 * `data` carries the JSON text described; `event` and `id` when the stream sets them.
 */
export const sseEvent = (data: string) =>
  z
    .object({
      data: z.string().describe(data),
      event: z.string().optional(),
      id: z.string().optional(),
      retry: z.number().int().optional()
    })
    .describe('one server-sent event');

/** A response without a body (OpenAPI: no content); zod's null is a nullable string enum in OpenAPI 3.0. */
export const noBody = (description: string) => z.null().meta({ type: 'null' }).describe(description);

/** The onRoute hook: fills in security and responses for every documented route. */
export function documentRoute(route: RouteShape): void {
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (methods.includes('HEAD') && methods.length === 1) return;
  const schema = (route.schema ?? {}) as Record<string, unknown>;
  // The docs plugins' own routes (hidden, no auth model of their own) are not part of the API.
  if (schema.hide || !route.config?.auth) return;
  const auth = route.config.auth as AuthModel;
  const security = SECURITY[auth];
  if (security === null)
    throw new Error(
      `Route ${methods.join(',')} ${route.url} declares auth ${auth}, whose credential has no OpenAPI security scheme yet (api/response-docs.ts)`
    );
  const authAlso = (route.config as { authAlso?: AuthModel[] }).authAlso ?? [];
  const response = { ...((schema.response ?? {}) as Record<string, unknown>) };
  const declared = Object.keys(response);
  // Every route documents what it answers (its successes; a route that only refuses, such as the A2A operations
  // not served yet, its errors): a route that declares nothing is a mistake caught at start-up.
  if (declared.length === 0)
    throw new Error(`Route ${methods.join(',')} ${route.url} declares no response schema (schema.response[200|201|…])`);
  for (const method of methods) {
    for (const status of errorStatuses({ method, auth, also: authAlso, schema })) {
      if (!(String(status) in response)) response[String(status)] = errorResponse(status);
    }
  }
  // A route accepting further models (config.authAlso) lists their alternatives too.
  const also = authAlso.flatMap((m) => SECURITY[m] ?? []);
  const alternatives = [...security, ...also].filter(
    (r, i, all) => all.findIndex((o) => JSON.stringify(o) === JSON.stringify(r)) === i
  );
  route.schema = { ...schema, security: alternatives, response };
}

/** Installs the hook on one listener's app; before the docs plugin registers, so it sees the filled-in schemas. */
export function documentResponses(app: object): void {
  // Any listener's app: its type provider and logger types differ from the plain FastifyInstance.
  (app as FastifyInstance).addHook('onRoute', documentRoute);
}
