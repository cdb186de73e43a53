/**
 * The OpenAPI document (/openapi.json) of a running service says what the service does: each operation's security
 * matches its route's auth model, each documents the error statuses it can answer, and the places a fuzzer found
 * wrong are right (register's 201, the truth body's required object value, the OAuth grant and form bodies).
 * The schemathesis run in .ci/run (scripts/ci/schemathesis.ts) checks the same document against behaviour.
 */
import { SECURITY } from '../../api/response-docs';
import type { AuthModel } from '../../core/endpoint-groups';
import { http, startTestService, TestService } from '../support/service';

type Operation = {
  summary?: string;
  security?: Record<string, string[]>[];
  responses: Record<string, { content?: Record<string, { schema: any }> }>;
  requestBody?: { required?: boolean; content: Record<string, { schema: any }> };
  parameters?: unknown[];
};
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, any> };
};

let svc: TestService;
let doc: Document;
/** method + OpenAPI path → auth model, from the service's own endpoint directory plus the routes it leaves out. */
let operations: { method: string; path: string; op: Operation }[];

const openapiPath = (fastifyPath: string) => fastifyPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

beforeAll(async () => {
  svc = await startTestService({}, { worker: false });
  const res = await http('GET', `${svc.urls.main}/openapi.json`);
  expect(res.status).toBe(200);
  doc = res.body;
  operations = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ method: method.toUpperCase(), path, op }))
  );
}, 120_000);

afterAll(async () => {
  await svc?.close();
});

test('every operation declares security, and the directory routes declare exactly their auth model', async () => {
  expect(operations.length).toBeGreaterThan(40);
  for (const { method, path, op } of operations) {
    expect({ method, path, security: Array.isArray(op.security) }).toEqual({ method, path, security: true });
    for (const requirement of op.security!)
      for (const scheme of Object.keys(requirement)) expect(doc.components.securitySchemes[scheme]).toBeDefined();
  }
  const directory = (await http('GET', `${svc.urls.main}/a2a/endpoints`)).body.endpoints as {
    method: string;
    path: string;
    auth: AuthModel;
    auth_also: AuthModel[];
    url: string;
  }[];
  const mainDirectory = directory.filter((e) => e.url.startsWith(svc.urls.main));
  expect(mainDirectory.length).toBeGreaterThan(20);
  // Routes that also accept further models (config.authAlso) list their alternatives after the declared one, in the
  // directory (auth_also) as in the OpenAPI document.
  expect(mainDirectory.find((e) => e.path === '/v1/chat/stream')?.auth_also).toEqual(['oauth']);
  for (const e of mainDirectory) {
    const op = doc.paths[openapiPath(e.path)]?.[e.method.toLowerCase()];
    const expected = [...(SECURITY[e.auth] ?? []), ...e.auth_also.flatMap((m) => SECURITY[m] ?? [])];
    expect({ endpoint: `${e.method} ${e.path}`, security: op?.security }).toEqual({
      endpoint: `${e.method} ${e.path}`,
      security: expected
    });
  }
  // Spot checks of the schemes themselves: two headers for a node (or X-DID alone of a DID linked to it), two
  // alternatives for homologous, Basic for clients.
  const schemes = doc.components.securitySchemes;
  expect(doc.paths['/a2a/heartbeat']!.post!.security).toEqual([{ node_id: [], node_key: [] }, { did: [] }]);
  expect([schemes.node_id.name, schemes.node_key.name]).toEqual(['X-External-Node', 'X-External-Key']);
  expect(doc.paths['/a2a/review/queue']!.get!.security).toEqual([{ zr_token: [] }, { did: [], capture_token: [] }]);
  // (Basic, or client_secret_post: the credentials in the form, which OpenAPI has no scheme for.)
  expect(doc.paths['/v1/oauth/token']!.post!.security).toEqual([{ oauth_client: [] }, {}]);
  expect(schemes.oauth_client).toMatchObject({ type: 'http', scheme: 'basic' });
  expect(doc.paths['/admin/dids']!.post!.security).toEqual([{ admin_token: [] }]);
  expect(schemes.admin_token).toMatchObject({ type: 'http', scheme: 'bearer' });
  expect(doc.paths['/api/status']!.get!.security).toEqual([]);
});

test('every operation documents the error responses it can answer, in the one error shape', () => {
  const errorShape = (op: Operation, status: string) => op.responses[status]?.content?.['application/json']?.schema;
  for (const { method, path, op } of operations) {
    const statuses = Object.keys(op.responses);
    const where = `${method} ${path}`;
    // The A2A binding's operations that the hub does not serve yet only refuse (typed A2A errors): they document
    // those errors and no success. Every other operation documents its success.
    const refusesOnly =
      typeof op.summary === 'string' &&
      op.summary.startsWith('A2A ') &&
      /not supported|TaskNotFound|not configured/.test(op.summary);
    expect({ where, success: refusesOnly || statuses.some((s) => /^[23]/.test(s)) }).toEqual({ where, success: true });
    for (const s of ['500', '503'])
      expect({ where, s, documented: s in op.responses }).toEqual({ where, s, documented: true });
    const secured = (op.security ?? []).length > 0;
    const twoFactorDaemon = op.security?.some((r) => 'daemon_asset' in r);
    if (secured && !twoFactorDaemon) expect({ where, has401: '401' in op.responses }).toEqual({ where, has401: true });
    if (op.requestBody || op.parameters?.length)
      expect({ where, has400: '400' in op.responses }).toEqual({ where, has400: true });
    if (op.requestBody)
      for (const s of ['413', '415'])
        expect({ where, s, documented: s in op.responses }).toEqual({ where, s, documented: true });
    if (path.startsWith('/a2a/') && /^\/a2a\/(message:|tasks|extendedAgentCard|jsonrpc)/.test(path)) continue; // the A2A binding's own error shape
    if (/^\/v1\/(models|usage|chat\/)/.test(path)) {
      // The OpenAI-compatible chat gateway answers OpenAI's error body, so OpenAI SDKs raise their own classes.
      for (const s of statuses.filter((x) => /^[45]/.test(x)))
        expect({ where, s, required: errorShape(op, s)?.required }).toEqual({ where, s, required: ['error'] });
      continue;
    }
    if (/^\/v1\/oauth\/(token|introspect|revoke)$/.test(path)) {
      // The OAuth endpoints answer 400 and 401 in RFC 6749 §5.2's shape, as OAuth clients parse them.
      for (const s of ['400', '401'])
        expect({ where, s, required: errorShape(op, s)?.required }).toEqual({
          where,
          s,
          required: ['error', 'error_description']
        });
      continue;
    }
    for (const s of statuses.filter((x) => /^[45]/.test(x))) {
      // C2SP tlog-witness fixes add-checkpoint's 409: the witness's tree size as text/x.tlog.size.
      if (path === '/tlog/add-checkpoint' && s === '409') {
        expect(Object.keys(op.responses[s]?.content ?? {})).toEqual(['text/x.tlog.size']);
        continue;
      }
      // A status with several documented bodies (POST /dal/deploy's 502: a failed deploy or a failed config change)
      // is a union whose every branch is the error shape.
      const schema = errorShape(op, s);
      for (const branch of schema?.anyOf ?? schema?.oneOf ?? [schema]) {
        expect({ where, s, required: branch?.required }).toEqual({
          where,
          s,
          required: expect.arrayContaining(['ok', 'error', 'message', 'trace_id'])
        });
        // Extra detail members (fields, limit, conflicts, error_description) are allowed.
        expect(branch.additionalProperties).not.toBe(false);
      }
    }
  }
  // Statuses a route declares itself are kept: the truth write's 202 (held for approval), node review's 409.
  expect(Object.keys(doc.paths['/api/report/truth']!.post!.responses)).toEqual(
    expect.arrayContaining(['200', '202', '400', '401', '413', '429'])
  );
  // A node key can be valid and refused (a rejected node): 403 besides 401.
  expect(Object.keys(doc.paths['/a2a/heartbeat']!.post!.responses)).toEqual(expect.arrayContaining(['401', '403']));
  // The daemon's two-factor check answers 403, never 401 (the daemon listener has no document, so its rule is
  // checked where it is made).
  const { errorStatuses } = require('../../api/response-docs') as typeof import('../../api/response-docs');
  expect(errorStatuses({ method: 'GET', auth: 'daemon', schema: {} })).toEqual(expect.arrayContaining([403]));
  expect(errorStatuses({ method: 'GET', auth: 'daemon', schema: {} })).not.toContain(401);
});

test('POST /a2a/register documents 201, and answers it', async () => {
  const op = doc.paths['/a2a/register']!.post!;
  expect(op.responses['201']).toBeDefined();
  expect(op.responses['200']).toBeUndefined();
  const res = await http('POST', `${svc.urls.main}/a2a/register`, {
    body: { name: 'doc-check', brand: { code: 'custom' } }
  });
  // No worker runs in this suite, but the workflow start only needs Temporal.
  expect(res.status).toBe(201);
});

test('an optional body is documented as optional (the heartbeat counts without one)', async () => {
  expect(doc.paths['/a2a/heartbeat']!.post!.requestBody!).toMatchObject({ required: false });
  expect(doc.paths['/a2a/register']!.post!.requestBody!).toMatchObject({ required: true });
});

test('the truth body requires value, as a JSON object', () => {
  const schema = doc.paths['/api/report/truth']!.post!.requestBody!.content['application/json']!.schema;
  expect(schema.required).toEqual(expect.arrayContaining(['key', 'value']));
  expect(schema.properties.value.type).toBe('object');
  expect(new RegExp(schema.properties.key.pattern).test('mysystem.deploy.x')).toBe(true);
  expect(new RegExp(schema.properties.key.pattern).test('truth-x.y')).toBe(false);
  expect(new RegExp(schema.properties.key.pattern).test('hub.x')).toBe(false);
});

test('the OAuth bodies are form-urlencoded (RFC 6749, 7662, 7009) or JSON, and grant_type is an enum', () => {
  for (const path of ['/v1/oauth/token', '/v1/oauth/introspect', '/v1/oauth/revoke']) {
    const content = doc.paths[path]!.post!.requestBody!.content;
    expect(Object.keys(content)).toEqual(['application/x-www-form-urlencoded', 'application/json']);
  }
  const grant =
    doc.paths['/v1/oauth/token']!.post!.requestBody!.content['application/x-www-form-urlencoded']!.schema.properties
      .grant_type;
  expect(grant.enum).toEqual(['client_credentials']);
});
