/**
 * POST /v1/chat/stream takes an OAuth access token from the hub's own token endpoint as well as an API key (auth
 * `oauth` or `api_key`): the stream, the scope it needs, refusals in OpenAI's error body, per-client limits (the
 * CHAT_OAUTH_PLAN's numbers), the client's own usage on GET /v1/usage (token from openid-client) and the admin's
 * view of it, and the OpenAPI document listing both credentials. /v1/chat/completions stays API-key only.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as oidc from 'openid-client';
import { startFakeOpenAi, FakeOpenAi } from '../support/fake-openai';
import { eventually, http, startTestService, TestService, waitAwayFromMinuteEnd } from '../support/service';

let svc: TestService;
let upstream: FakeOpenAi;
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-chat-oauth-'));

const admin = (method: string, p: string, body?: unknown) =>
  http(method, `${svc.urls.main}${p}`, { headers: { authorization: `Bearer ${svc.adminToken}` }, body });

async function tokenFor(scopes: string[]): Promise<{ token: string; clientId: string }> {
  const client = await admin('POST', '/admin/oauth-clients', { label: 'federated node', scopes });
  expect(client.status).toBe(201);
  const basic = Buffer.from(`${client.body.client_id}:${client.body.client_secret}`).toString('base64');
  const res = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    raw: `grant_type=client_credentials&scope=${encodeURIComponent(scopes.join(' '))}`
  });
  expect(res.status).toBe(200);
  expect(res.body.token_type).toBe('Bearer');
  return { token: res.body.access_token, clientId: client.body.client_id };
}

const stream = (authorization: string, content = 'hello federated world') =>
  http('POST', `${svc.urls.main}/v1/chat/stream`, {
    headers: { authorization },
    body: { model: 'node-chat', messages: [{ role: 'user', content }] }
  });

/** The SSE data lines of a stream, parsed (the final [DONE] kept as a string). */
const events = (text: string) =>
  text
    .split('\n\n')
    .map((e) => e.trim())
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));

beforeAll(async () => {
  upstream = await startFakeOpenAi('node-upstream');
  const file = path.join(configDir, 'providers.json');
  fs.writeFileSync(
    file,
    JSON.stringify([
      { name: 'nodes', base_url: upstream.baseUrl, models: [{ id: 'node-chat' }, { id: 'premium', plans: ['S5'] }] }
    ])
  );
  svc = await startTestService(
    {
      CHAT_PROVIDERS_FILE: file,
      CHAT_UPSTREAM_RETRIES: '0',
      CHAT_OAUTH_PLAN: 'S2',
      CHAT_PLANS: JSON.stringify({ S2: { requests_per_minute: 3 } })
    },
    { worker: false }
  );
});
afterAll(async () => {
  await svc?.close();
  await upstream?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
});

it('streams chat for a bearer token from the hub token endpoint: chunks, the usage chunk, [DONE]', async () => {
  const { token } = await tokenFor(['chat']);
  const res = await stream(`Bearer ${token}`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const data = events(res.text);
  expect(data.at(-1)).toBe('[DONE]');
  const chunks = data.slice(0, -1) as Record<string, any>[];
  expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'node-chat')).toBe(true);
  expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('echo: hello federated world');
  expect(chunks.at(-1)!.usage).toMatchObject({ total_tokens: expect.any(Number) });
  expect(res.headers.get('x-ratelimit-limit-requests')).toBe('3');
});

it('limits and counts per OAuth client with CHAT_OAUTH_PLAN numbers, and gives that plan’s models only', async () => {
  const a = await tokenFor(['chat']);
  const b = await tokenFor(['chat']);
  await waitAwayFromMinuteEnd();
  for (let i = 0; i < 3; i++) expect((await stream(`Bearer ${a.token}`)).status).toBe(200);
  const limited = await stream(`Bearer ${a.token}`);
  expect(limited.status).toBe(429);
  expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  // Another client has its own window.
  expect((await stream(`Bearer ${b.token}`)).status).toBe(200);
  const premium = await http('POST', `${svc.urls.main}/v1/chat/stream`, {
    headers: { authorization: `Bearer ${b.token}` },
    body: { model: 'premium', messages: [{ role: 'user', content: 'x' }] }
  });
  expect(premium.status).toBe(403);
  expect(premium.body.error.code).toBe('model_not_permitted');
  // Usage is recorded under oauth:<client id> (each record waits up to 25 ms to share an insert).
  const count = () => svc.db.collection('chat_usage').countDocuments({ key_id: `oauth:${a.clientId}` });
  await eventually(async () => ((await count()) === 3 ? true : undefined), 5000, 'three usage records');
});

it('refuses a token without the chat scope (403), a bad token (401), and tokens on /v1/chat/completions (401)', async () => {
  const other = await tokenFor(['compute']);
  const noScope = await stream(`Bearer ${other.token}`);
  expect(noScope.status).toBe(403);
  expect(noScope.body.error).toMatchObject({ type: 'permission_error', code: 'insufficient_scope' });
  const forged = await stream('Bearer eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln');
  expect(forged.status).toBe(401);
  expect(forged.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
  const { token } = await tokenFor(['chat']);
  const completions = await http('POST', `${svc.urls.main}/v1/chat/completions`, {
    headers: { authorization: `Bearer ${token}` },
    body: { model: 'node-chat', messages: [{ role: 'user', content: 'x' }] }
  });
  expect(completions.status).toBe(401);
});

it('still takes API keys, and the OpenAPI document lists both credentials for the stream', async () => {
  const key = await admin('POST', '/admin/api-keys', { label: 'node key', plan: 'S1' });
  const res = await stream(`Bearer ${key.body.api_key}`);
  expect(res.status).toBe(200);
  expect(events(res.text).at(-1)).toBe('[DONE]');
  const doc = await http('GET', `${svc.urls.main}/openapi.json`);
  expect(doc.body.paths['/v1/chat/stream'].post.security).toEqual([{ api_key: [] }, { oauth: [] }]);
  expect(doc.body.paths['/v1/chat/completions'].post.security).toEqual([{ api_key: [] }]);
});

it('reads an OAuth client’s own usage on GET /v1/usage (token from openid-client), and the admin reads it too', async () => {
  const client = await admin('POST', '/admin/oauth-clients', { label: 'usage reader', scopes: ['chat'] });
  expect(client.status).toBe(201);
  const config = await oidc.discovery(
    new URL(svc.env.PUBLIC_URL!),
    client.body.client_id,
    client.body.client_secret,
    undefined,
    { execute: [oidc.allowInsecureRequests] }
  );
  const token = (await oidc.clientCredentialsGrant(config, { scope: 'chat' })).access_token;
  for (let i = 0; i < 2; i++) expect((await stream(`Bearer ${token}`, `count me ${i}`)).status).toBe(200);
  // A request shows in its usage shortly after its answer (records wait up to 25 ms to share an insert).
  const usage = await eventually(
    async () => {
      const r = await http('GET', `${svc.urls.main}/v1/usage?days=1`, {
        headers: { authorization: `Bearer ${token}` }
      });
      return r.status !== 200 || r.body?.days?.[0]?.requests === 2 ? r : undefined;
    },
    10_000,
    'both streams in the usage'
  );
  expect(usage.status).toBe(200);
  expect(usage.body).toMatchObject({
    object: 'usage',
    key_id: `oauth:${client.body.client_id}`,
    plan: 'S2',
    limits: { requests_per_minute: 3 }
  });
  expect(usage.body.days).toHaveLength(1);
  expect(usage.body.days[0]).toMatchObject({ requests: 2, errors: 0 });
  expect(usage.body.days[0].total_tokens).toBeGreaterThan(0);
  expect(usage.headers.get('x-ratelimit-limit-requests')).toBe('3');
  // The same through openid-client's protected resource request.
  const viaSdk = await oidc.fetchProtectedResource(config, token, new URL(`${svc.urls.main}/v1/usage`), 'GET');
  expect(viaSdk.status).toBe(200);
  expect(((await viaSdk.json()) as { key_id: string }).key_id).toBe(`oauth:${client.body.client_id}`);
  // A token without the chat scope reads nothing.
  const other = await tokenFor(['compute']);
  expect(
    (await http('GET', `${svc.urls.main}/v1/usage`, { headers: { authorization: `Bearer ${other.token}` } })).status
  ).toBe(403);
  // The administrator's view of the same client, and 404 for a client never issued.
  const adminView = await admin('GET', `/admin/oauth-clients/${client.body.client_id}/chat-usage?days=1`);
  expect(adminView.status).toBe(200);
  expect(adminView.body.usage).toEqual(usage.body);
  expect((await admin('GET', '/admin/oauth-clients/client_0123456789abcdef/chat-usage')).status).toBe(404);
  const doc = await http('GET', `${svc.urls.main}/openapi.json`);
  expect(doc.body.paths['/v1/usage'].get.security).toEqual([{ api_key: [] }, { oauth: [] }]);
});
