/**
 * The platform over real HTTP against the embedded stack: listeners and health, the error shape, X-Trace,
 * the endpoint directory and summary, the agent card, OpenAPI, administration and the OAuth flow.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { http, startTestService, TestService } from '../support/service';

let svc: TestService;
const admin = () => ({ authorization: `Bearer ${svc.adminToken}` });

beforeAll(async () => {
  svc = await startTestService({ HOST: '0.0.0.0' }, { worker: false });
});
afterAll(async () => {
  await svc?.close();
});

describe('listeners', () => {
  it('answers /health on every listener, the commercial one under /api/v1', async () => {
    for (const [name, url] of Object.entries(svc.urls)) {
      const path = name === 'commercial' ? '/api/v1/health' : '/health';
      const res = await http('GET', `${url}${path}`);
      expect({ name, status: res.status, ok: res.body.ok, listener: res.body.listener, mongo: res.body.mongo }).toEqual(
        { name, status: 200, ok: true, listener: name, mongo: 'up' }
      );
    }
  });

  it('binds the daemon to 127.0.0.1 even when HOST says 0.0.0.0', async () => {
    // This service runs with HOST=0.0.0.0 (see beforeAll): the daemon must still be loopback only.
    const listening = fs
      .readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .slice(1)
      .filter((l) => / 0A /.test(l))
      .map((l) => l.trim().split(/\s+/)[1]!);
    const port = Number(svc.env.DAEMON_PORT).toString(16).toUpperCase().padStart(4, '0');
    const main = Number(svc.env.PORT).toString(16).toUpperCase().padStart(4, '0');
    expect(listening).toContain(`0100007F:${port}`);
    expect(listening.filter((a) => a.endsWith(`:${port}`))).toEqual([`0100007F:${port}`]);
    expect(listening).toContain(`00000000:${main}`);
  });
});

describe('errors and tracing', () => {
  it('gives unknown paths a 404 in the one error shape, with the X-Trace id inside', async () => {
    const res = await http('GET', `${svc.urls.main}/no/such/path`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      ok: false,
      error: 'not_found',
      message: 'No route GET /no/such/path',
      trace_id: res.headers.get('x-trace')
    });
  });

  it('keeps a caller-supplied X-Trace id', async () => {
    const res = await http('GET', `${svc.urls.main}/health`, { headers: { 'x-trace': 'caller-trace-1234' } });
    expect(res.headers.get('x-trace')).toBe('caller-trace-1234');
  });

  it('answers a validation failure with 400 naming each bad field', async () => {
    const res = await http('POST', `${svc.urls.main}/admin/dids`, {
      headers: admin(),
      body: { did: 'not-a-did', label: 42 }
    });
    expect(res.status).toBe(400);
    expect(res.body.ok).toBe(false);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.fields.map((f: { field: string }) => f.field).sort()).toEqual(['body.did', 'body.label']);
    expect(res.text).not.toMatch(/at .*\.ts:\d+/);
  });

  it('answers malformed JSON with a clean 400, not a stack trace', async () => {
    const res = await http('POST', `${svc.urls.main}/admin/dids`, {
      headers: { ...admin(), 'content-type': 'application/json' },
      raw: '{"did": '
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ok: false, error: 'invalid_json' });
    expect(res.text).not.toMatch(/node_modules|\.ts:\d+/);
  });
});

describe('endpoint directory', () => {
  it('has the spec summary shape, with counts equal to the routes that exist', async () => {
    const summary = await http('GET', `${svc.urls.main}/a2a/endpoints/summary`);
    const directory = await http('GET', `${svc.urls.main}/a2a/endpoints`);
    expect(summary.status).toBe(200);
    expect(Object.keys(summary.body).sort()).toEqual(
      [
        'ok',
        'gateway',
        'summary',
        'quick_start',
        'endpoint_groups',
        'auth_models_quick',
        'full_directory_url',
        'doc_url',
        'join_url'
      ].sort()
    );
    expect(Object.keys(summary.body.quick_start)).toEqual(['step1', 'step2', 'step3', 'step4', 'step5']);
    expect(Object.keys(summary.body.endpoint_groups)).toEqual([
      'a2a_standard',
      'directory_tree_collab',
      'review_admin',
      'zhongshu_truth_api',
      'federated_compute',
      'oauth_oidc',
      'kunlun_federation'
    ]);
    expect(summary.body.endpoint_groups.federated_compute.public_read).toBe('partial');
    expect(Object.keys(summary.body.auth_models_quick)).toEqual(['none', 'external_node', 'homologous', 'oauth']);
    expect(summary.body.summary.auth_models).toBe(13);
    for (const [group, info] of Object.entries<{ count: number }>(summary.body.endpoint_groups)) {
      const listed = directory.body.endpoints.filter((e: { group: string }) => e.group === group).length;
      expect({ group, count: info.count }).toEqual({ group, count: listed });
    }
    expect(summary.body.summary.total_endpoints).toBe(directory.body.endpoints.length);
    expect(directory.body.auth_models).toHaveLength(13);
  });

  it('lists the OAuth group with method, path, auth model and public_read', async () => {
    const directory = await http('GET', `${svc.urls.main}/a2a/endpoints`);
    const oauth = directory.body.endpoints.filter((e: { group: string }) => e.group === 'oauth_oidc');
    expect(oauth.map((e: { method: string; path: string }) => `${e.method} ${e.path}`).sort()).toEqual([
      'GET /.well-known/openid-configuration',
      'POST /v1/oauth/introspect',
      'POST /v1/oauth/revoke',
      'POST /v1/oauth/token'
    ]);
    expect(oauth.every((e: { public_read: boolean }) => e.public_read)).toBe(true);
  });
});

describe('agent card', () => {
  it('serves one A2A v1.0 card at both discovery paths, with ETag and Cache-Control', async () => {
    const a = await http('GET', `${svc.urls.main}/a2a/.well-known/agent.json`);
    const b = await http('GET', `${svc.urls.main}/.well-known/agent-card.json`);
    expect(a.status).toBe(200);
    expect(a.text).toBe(b.text);
    for (const field of [
      'name',
      'description',
      'supportedInterfaces',
      'version',
      'provider',
      'capabilities',
      'defaultInputModes',
      'defaultOutputModes',
      'skills',
      'securitySchemes'
    ]) {
      expect(a.body).toHaveProperty(field);
    }
    expect(a.body.version).toBe('2.0.0');
    expect(a.body.supportedInterfaces[0]).toEqual({
      url: `${svc.env.PUBLIC_URL}/a2a`,
      protocolBinding: 'HTTP+JSON',
      protocolVersion: '1.0'
    });
    for (const skill of a.body.skills)
      expect(Object.keys(skill)).toEqual(expect.arrayContaining(['id', 'name', 'description', 'tags']));
    expect(a.headers.get('cache-control')).toMatch(/max-age/);
    const etag = a.headers.get('etag')!;
    const again = await fetch(`${svc.urls.main}/a2a/.well-known/agent.json`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
  });
});

describe('OpenAPI', () => {
  it('serves an OpenAPI 3 document generated from the zod schemas, and the docs UI', async () => {
    const doc = await http('GET', `${svc.urls.main}/openapi.json`);
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toMatch(/^3\./);
    const didBody = doc.body.paths['/admin/dids'].post.requestBody.content['application/json'].schema;
    expect(didBody.properties.did.pattern).toBeDefined();
    const ui = await fetch(`${svc.urls.main}/docs/`);
    expect(ui.status).toBe(200);
  });
});

describe('administration', () => {
  it('rejects a missing or forged administrator token', async () => {
    expect((await http('POST', `${svc.urls.main}/admin/dids`, { body: {} })).status).toBe(401);
    const forged = await http('POST', `${svc.urls.main}/admin/dids`, {
      body: {},
      headers: { authorization: 'Bearer adm_forged_forged_forged_forged' }
    });
    expect(forged.status).toBe(401);
    expect(forged.body.error).toBe('unauthorized');
  });

  it('registers a DID idempotently and records it in the ledger', async () => {
    const first = await http('POST', `${svc.urls.main}/admin/dids`, {
      headers: admin(),
      body: { did: 'did:example:alpha', label: 'alpha' }
    });
    expect(first.status).toBe(201);
    const second = await http('POST', `${svc.urls.main}/admin/dids`, {
      headers: admin(),
      body: { did: 'did:example:alpha' }
    });
    expect(second.status).toBe(200);
    expect(second.body.created).toBe(false);
    const events = await svc.db.collection('ledger').find({ key: 'hub.admin.did_registered' }).toArray();
    expect(events.filter((e) => JSON.parse(e.value_json).did === 'did:example:alpha')).toHaveLength(1);
  });

  it('issues, revokes and regenerates zk_ API keys, storing only digests', async () => {
    const issued = await http('POST', `${svc.urls.main}/admin/api-keys`, {
      headers: admin(),
      body: { label: 'server-1' }
    });
    expect(issued.status).toBe(201);
    expect(issued.body.api_key).toMatch(/^zk_[a-f0-9]{16}_/);
    const stored = await svc.db
      .collection<{ _id: string; secret_hash: string }>('api_keys')
      .findOne({ _id: issued.body.key_id });
    const secretPart = issued.body.api_key.slice('zk_'.length + 16 + 1);
    expect(secretPart).toHaveLength(43);
    expect(JSON.stringify(stored)).not.toContain(secretPart);
    expect(stored!.secret_hash).toBe(createHash('sha256').update(issued.body.api_key).digest('hex'));

    const regenerated = await http('POST', `${svc.urls.main}/admin/api-keys/${issued.body.key_id}/regenerate`, {
      headers: admin()
    });
    expect(regenerated.status).toBe(200);
    expect(regenerated.body.api_key).not.toBe(issued.body.api_key);
    const revoked = await http('POST', `${svc.urls.main}/admin/api-keys/${issued.body.key_id}/revoke`, {
      headers: admin()
    });
    expect(revoked.body.revoked).toBe(true);
    const missing = await http('POST', `${svc.urls.main}/admin/api-keys/0000000000000000/revoke`, { headers: admin() });
    expect(missing.status).toBe(404);
  });

  it('refuses a capture token for a DID that is not registered', async () => {
    const res = await http('POST', `${svc.urls.main}/admin/homologous-tokens`, {
      headers: admin(),
      body: { did: 'did:example:nobody' }
    });
    expect(res.status).toBe(400);
    expect(res.body.fields[0].field).toBe('body.did');
  });
});

describe('daemon two-factor identity', () => {
  it('answers /status 200 with both factors, 403 with a missing or forged factor', async () => {
    const asset = await http('POST', `${svc.urls.main}/admin/daemon-assets`, {
      headers: admin(),
      body: { label: 'local' }
    });
    expect(asset.status).toBe(201);
    const status = (headers: Record<string, string>) => http('GET', `${svc.urls.daemon}/status`, { headers });
    const ok = await status({ 'x-asset-id': asset.body.asset_id, 'x-order-root': asset.body.order_root });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ ok: true, asset_id: asset.body.asset_id, protocol_version: 1 });
    expect((await status({ 'x-asset-id': asset.body.asset_id })).status).toBe(403);
    const forged = await status({
      'x-asset-id': asset.body.asset_id,
      'x-order-root': `${asset.body.order_root.slice(0, -2)}xx`
    });
    expect(forged.status).toBe(403);
    expect(forged.body.error).toBe('identity_check_failed');
    const wrongVersion = await status({
      'x-asset-id': asset.body.asset_id,
      'x-order-root': asset.body.order_root.replace(/^or1_/, 'or2_')
    });
    expect(wrongVersion.status).toBe(403);
  });
});

describe('OAuth 2.0 client credentials', () => {
  it('issues a token, introspects it as active, revokes it, then introspects it as inactive', async () => {
    const client = await http('POST', `${svc.urls.main}/admin/oauth-clients`, {
      headers: admin(),
      body: { label: 'partner', scopes: ['truth:read'] }
    });
    expect(client.status).toBe(201);
    const basic = `Basic ${Buffer.from(`${client.body.client_id}:${client.body.client_secret}`).toString('base64')}`;

    const token = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
      headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
      raw: 'grant_type=client_credentials'
    });
    expect(token.status).toBe(200);
    expect(token.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'truth:read' });
    expect(token.headers.get('cache-control')).toBe('no-store');

    const introspect = (t: string) =>
      http('POST', `${svc.urls.main}/v1/oauth/introspect`, {
        headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
        raw: `token=${t}`
      });
    const active = await introspect(token.body.access_token);
    expect(active.body).toMatchObject({ active: true, client_id: client.body.client_id, scope: 'truth:read' });

    const revoke = await http('POST', `${svc.urls.main}/v1/oauth/revoke`, {
      headers: { authorization: basic },
      body: { token: token.body.access_token }
    });
    expect(revoke.status).toBe(200);
    expect((await introspect(token.body.access_token)).body).toEqual({ active: false });
  });

  it('rejects a wrong client secret, an unsupported grant and a scope the client does not have', async () => {
    const client = await http('POST', `${svc.urls.main}/admin/oauth-clients`, {
      headers: admin(),
      body: { scopes: [] }
    });
    const wrong = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
      body: { grant_type: 'client_credentials', client_id: client.body.client_id, client_secret: 'cs_wrong' }
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_client');
    const creds = { client_id: client.body.client_id, client_secret: client.body.client_secret };
    const grant = await http('POST', `${svc.urls.main}/v1/oauth/token`, { body: { grant_type: 'password', ...creds } });
    expect(grant.body.error).toBe('unsupported_grant_type');
    const scope = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
      body: { grant_type: 'client_credentials', scope: 'admin', ...creds }
    });
    expect(scope.body.error).toBe('invalid_scope');
  });

  it('publishes discovery metadata and the signing key', async () => {
    const meta = await http('GET', `${svc.urls.main}/.well-known/openid-configuration`);
    expect(meta.body.issuer).toBe(svc.env.PUBLIC_URL);
    expect(meta.body.grant_types_supported).toEqual(['client_credentials']);
    const jwks = await http('GET', meta.body.jwks_uri);
    expect(jwks.body.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' });
  });
});
