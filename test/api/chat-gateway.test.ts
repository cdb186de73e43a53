/**
 * The chat gateway under /v1, driven by the stock `openai` SDK with only baseURL and apiKey changed, against local
 * OpenAI-compatible upstreams (test/support/fake-openai.ts): models, completions, streams with usage, each error
 * status as the SDK's own class, retries, fallback and cool-down, client disconnects, usage accounting, limits
 * across two API processes, and the provider key never leaving the environment.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startFakeOpenAi, FakeOpenAi } from '../support/fake-openai';
import { eventually, http, startTestService, TestService, waitAwayFromMinuteEnd } from '../support/service';
import { registerDid } from '../support/credentials';

let svc: TestService;
let primary: FakeOpenAi;
let backup: FakeOpenAi;
const PROVIDER_KEY = `sk-test-${randomBytes(18).toString('hex')}`;
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-chat-'));

const admin = (method: string, p: string, body?: unknown) =>
  http(method, `${svc.urls.main}${p}`, { headers: { authorization: `Bearer ${svc.adminToken}` }, body });
async function issueKey(plan: string): Promise<{ key: string; id: string }> {
  const res = await admin('POST', '/admin/api-keys', { label: `chat ${plan}`, plan });
  expect(res.status).toBe(201);
  return { key: res.body.api_key, id: res.body.key_id };
}
const sdk = (apiKey: string, baseURL = `${svc.urls.main}/v1`) => new OpenAI({ apiKey, baseURL, maxRetries: 0 });

beforeAll(async () => {
  [primary, backup] = await Promise.all([startFakeOpenAi('primary'), startFakeOpenAi('backup')]);
  const file = path.join(configDir, 'providers.yaml');
  fs.writeFileSync(
    file,
    [
      'providers:',
      '  - name: primary',
      `    base_url: ${primary.baseUrl}`,
      '    api_key_env: PRIMARY_PROVIDER_KEY',
      '    timeout_ms: 5000',
      '    models:',
      '      - { id: gpt-test, upstream: upstream-gpt, owned_by: primary-co, price: { prompt_per_1k: 1, completion_per_1k: 2 }, fallbacks: [backup-model] }',
      '      - { id: premium, plans: [S5] }',
      '  - name: backup',
      `    base_url: ${backup.baseUrl}`,
      '    models:',
      '      - { id: backup-model, upstream: small }',
      '      - { id: local-small, upstream: qwen-1.5b, kind: local }'
    ].join('\n')
  );
  svc = await startTestService(
    {
      LOG_LEVEL: 'debug',
      CHAT_PROVIDERS_FILE: file,
      PRIMARY_PROVIDER_KEY: PROVIDER_KEY,
      CHAT_UPSTREAM_RETRIES: '1',
      CHAT_RETRY_MAX_WAIT_MS: '50',
      CHAT_BREAKER_FAILURES: '4',
      CHAT_BREAKER_COOLDOWN_S: '2',
      CHAT_PLANS: JSON.stringify({
        S1: { requests_per_minute: 1000, requests_per_day: 100000 },
        S2: { requests_per_minute: 3 },
        S3: { requests_per_minute: 1000, requests_per_day: 10 }
      })
    },
    { worker: false, logFiles: true }
  );
});
afterAll(async () => {
  await svc?.close();
  await Promise.all([primary?.close(), backup?.close()]);
  fs.rmSync(configDir, { recursive: true, force: true });
});
beforeEach(() => {
  primary.reset();
  backup.reset();
});

it('lists the models a key may use, in the OpenAI list shape', async () => {
  const { key } = await issueKey('S1');
  const page = await sdk(key).models.list();
  const ids = page.data.map((m) => m.id).sort();
  expect(ids).toEqual(['backup-model', 'gpt-test', 'local-small']);
  const gpt = page.data.find((m) => m.id === 'gpt-test')!;
  expect(gpt).toMatchObject({ object: 'model', owned_by: 'primary-co' });
  expect(typeof gpt.created).toBe('number');
  const s5 = await issueKey('S5');
  expect((await sdk(s5.key).models.list()).data.map((m) => m.id)).toContain('premium');
});

it('answers a completion through the SDK with our id, the provider key sent upstream and temperature 1.0 by default', async () => {
  const { key } = await issueKey('S1');
  const res = await sdk(key).chat.completions.create({
    model: 'gpt-test',
    messages: [{ role: 'user', content: 'hello there' }]
  });
  expect(res.id).toMatch(/^chatcmpl-/);
  expect(res.model).toBe('gpt-test');
  expect(res.choices[0]!.message.content).toBe('echo: hello there');
  expect(res.usage).toMatchObject({ prompt_tokens: 8, completion_tokens: 3, total_tokens: 11 });
  expect(primary.calls).toBe(1);
  expect(primary.bodies[0]).toMatchObject({ model: 'upstream-gpt', temperature: 1 });
  expect(primary.authorizations[0]).toBe(`Bearer ${PROVIDER_KEY}`);
});

it('streams chunks with incremental deltas and a final usage chunk when asked', async () => {
  const { key, id } = await issueKey('S1');
  const stream = await sdk(key).chat.completions.create({
    model: 'gpt-test',
    messages: [{ role: 'user', content: 'one two three four' }],
    stream: true,
    stream_options: { include_usage: true }
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    expect(chunk.object).toBe('chat.completion.chunk');
    expect(chunk.model).toBe('gpt-test');
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  expect(text).toBe('echo: one two three four');
  expect(chunks).toBeGreaterThan(5);
  expect(usage).toEqual({ prompt_tokens: 8, completion_tokens: 5, total_tokens: 13 });
  // Recorded exactly as the upstream counted it.
  const usageRes = await eventually(async () => {
    const r = await http('GET', `${svc.urls.main}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
    return r.body?.days?.[0]?.requests === 1 ? r : undefined;
  });
  expect(usageRes.body.days[0]).toMatchObject({
    requests: 1,
    errors: 0,
    prompt_tokens: 8,
    completion_tokens: 5,
    total_tokens: 13,
    estimated_requests: 0,
    cost: 0.018
  });
  const adminView = await admin('GET', `/admin/api-keys/${id}/usage`);
  expect(adminView.status).toBe(200);
  expect(adminView.body.usage.days[0]).toMatchObject({ requests: 1, total_tokens: 13 });
});

it('counts a stream itself when the upstream sends no usage', async () => {
  const { key } = await issueKey('S1');
  primary.behaviour.omitUsage = true;
  const stream = await sdk(key).chat.completions.create({
    model: 'gpt-test',
    messages: [{ role: 'user', content: 'count me please' }],
    stream: true,
    stream_options: { include_usage: true }
  });
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  expect(usage!.completion_tokens).toBeGreaterThan(0);
  expect(usage!.total_tokens).toBe(usage!.prompt_tokens + usage!.completion_tokens);
  const rec = await eventually(
    async () => (await svc.db.collection('chat_usage').findOne({ estimated: true })) ?? undefined
  );
  expect(rec).toMatchObject({ stream: true, error: null, completion_tokens: usage!.completion_tokens });
});

it('answers each error status in the OpenAI body, so the SDK raises its own classes', async () => {
  const { key } = await issueKey('S1');
  const client = sdk(key);
  const msgs = [{ role: 'user' as const, content: 'x' }];
  await expect(sdk('zk_0123456789abcdef_' + 'A'.repeat(43)).models.list()).rejects.toBeInstanceOf(
    OpenAI.AuthenticationError
  );
  await expect(sdk('not-a-key').chat.completions.create({ model: 'gpt-test', messages: msgs })).rejects.toBeInstanceOf(
    OpenAI.AuthenticationError
  );
  const notFound = await client.chat.completions.create({ model: 'nope', messages: msgs }).catch((e: unknown) => e);
  expect(notFound).toBeInstanceOf(OpenAI.NotFoundError);
  expect((notFound as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
  await expect(client.chat.completions.create({ model: 'premium', messages: msgs })).rejects.toBeInstanceOf(
    OpenAI.PermissionDeniedError
  );
  const bad = await client.chat.completions
    .create({ model: 'gpt-test', messages: msgs, temperature: 3 })
    .catch((e: unknown) => e);
  expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
  expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('temperature');
  const raw = await http('POST', `${svc.urls.main}/v1/chat/completions`, {
    headers: { authorization: `Bearer ${key}` },
    body: { model: 'gpt-test' }
  });
  expect(raw.status).toBe(400);
  expect(raw.body.error).toMatchObject({ type: 'invalid_request_error', param: 'messages' });
  // Every upstream failing: 502, the SDK's InternalServerError.
  primary.behaviour.failNext = { count: 100, status: 500 };
  backup.behaviour.failNext = { count: 100, status: 503 };
  const failed = await client.chat.completions.create({ model: 'gpt-test', messages: msgs }).catch((e: unknown) => e);
  expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
  expect((failed as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
});

it('rate limits per key per minute with 429, Retry-After and x-ratelimit headers on every answer', async () => {
  const { key } = await issueKey('S2'); // 3 per minute
  await waitAwayFromMinuteEnd();
  const call = () =>
    http('POST', `${svc.urls.main}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${key}` },
      body: { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }
    });
  const answers = [await call(), await call(), await call()];
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
  expect(answers.map((a) => a.headers.get('x-ratelimit-remaining-requests'))).toEqual(['2', '1', '0']);
  expect(answers[0]!.headers.get('x-ratelimit-limit-requests')).toBe('3');
  expect(answers[0]!.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+s$/);
  const refused = await call();
  expect(refused.status).toBe(429);
  expect(refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(refused.headers.get('x-ratelimit-remaining-requests')).toBe('0');
  const viaSdk = await sdk(key)
    .chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] })
    .catch((e: unknown) => e);
  expect(viaSdk).toBeInstanceOf(OpenAI.RateLimitError);
});

it('retries an upstream 429 honouring Retry-After, then falls back, then cools the failing upstream down', async () => {
  const { key } = await issueKey('S1');
  const client = sdk(key);
  const ask = () =>
    client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'again' }] });

  primary.behaviour.failNext = { count: 1, status: 429, retryAfterS: 0 };
  expect((await ask()).choices[0]!.message.content).toBe('echo: again');
  expect(primary.calls).toBe(2);
  expect(backup.calls).toBe(0);

  // Fails twice (the try and its one retry): the fallback answers.
  primary.reset();
  primary.behaviour.failNext = { count: 2, status: 500 };
  const fb = await ask();
  expect(fb.choices[0]!.message.content).toBe('echo: again');
  expect(primary.calls).toBe(2);
  expect(backup.calls).toBe(1);
  expect(backup.bodies[0]).toMatchObject({ model: 'small' });

  // Two more failures reach CHAT_BREAKER_FAILURES (4 in a row): the primary is skipped while it cools down.
  primary.reset();
  backup.reset();
  primary.behaviour.dropNext = 2;
  await ask();
  expect(primary.calls).toBe(2);
  const health = await http('GET', `${svc.urls.main}/health`);
  expect(health.body.upstreams.find((u: { name: string }) => u.name === 'primary')).toMatchObject({
    state: 'open',
    consecutive_failures: 4
  });
  primary.reset();
  backup.reset();
  await ask();
  expect(primary.calls).toBe(0);
  expect(backup.calls).toBe(1);
  // After the cool-down one trial goes through, and its success closes the breaker.
  await eventually(
    async () =>
      (await http('GET', `${svc.urls.main}/health`)).body.upstreams[0].state === 'half_open' ? true : undefined,
    10_000
  );
  await ask();
  expect(primary.calls).toBe(1);
  expect((await http('GET', `${svc.urls.main}/health`)).body.upstreams[0].state).toBe('closed');
});

it('cancels the upstream call when the client disconnects mid-stream', async () => {
  const { key } = await issueKey('S1');
  primary.behaviour.chunkDelayMs = 100;
  primary.behaviour.reply = Array.from({ length: 100 }, (_, i) => `w${i} `).join('');
  const ac = new AbortController();
  const res = await fetch(`${svc.urls.main}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'long' }] }),
    signal: ac.signal
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const reader = res.body!.getReader();
  const first = await reader.read();
  expect(new TextDecoder().decode(first.value)).toMatch(/^data: \{/);
  ac.abort();
  await eventually(
    async () => (primary.abandoned === 1 ? true : undefined),
    10_000,
    'the upstream call to be abandoned'
  );
  const rec = await eventually(
    async () => (await svc.db.collection('chat_usage').findOne({ error: 'client_closed' })) ?? undefined
  );
  // What was used is still accounted: the prompt, and the text streamed before the client left (counted here).
  expect(rec).toMatchObject({ stream: true, estimated: true });
  expect(rec.prompt_tokens).toBeGreaterThan(0);
});

it('keeps the daily request quota exact across two API processes', async () => {
  const second = await svc.startSecondApi();
  try {
    const { key } = await issueKey('S3'); // 10 per day
    const urls = [svc.urls.main, second.url];
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        http('POST', `${urls[i % 2]}/v1/chat/completions`, {
          headers: { authorization: `Bearer ${key}` },
          body: { model: 'gpt-test', messages: [{ role: 'user', content: `n${i}` }] }
        })
      )
    );
    const ok = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 403);
    expect(ok).toBe(10);
    expect(refused.length).toBe(14);
    expect(refused[0]!.body.error).toMatchObject({ code: 'insufficient_quota' });
    expect(primary.calls + backup.calls).toBe(10);
  } finally {
    await second.stop();
  }
});

it('never writes the provider key to the database, the data dir or the logs', async () => {
  const { key } = await issueKey('S1');
  // An upstream that echoes the key in its error must not leak it either.
  primary.behaviour.failNext = { count: 1, status: 401, message: `Incorrect API key provided: ${PROVIDER_KEY}` };
  const err = await sdk(key)
    .chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.InternalServerError);
  expect(JSON.stringify((err as InstanceType<typeof OpenAI.APIError>).error)).not.toContain(PROVIDER_KEY);
  primary.behaviour.failNext = { count: 1, status: 400, message: `bad request for key ${PROVIDER_KEY}` };
  const bad = await sdk(key)
    .chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] })
    .catch((e: unknown) => e);
  expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
  expect((bad as Error).message).not.toContain(PROVIDER_KEY);
  expect((bad as Error).message).toContain('***');

  for (const name of await svc.db.listCollections().toArray()) {
    const docs = await svc.db.collection(name.name).find({}).toArray();
    expect(JSON.stringify(docs)).not.toContain(PROVIDER_KEY);
  }
  const logs: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else {
        const content = fs.readFileSync(p);
        expect(content.includes(PROVIDER_KEY)).toBe(false);
        if (entry.name.endsWith('.log')) logs.push(content.toString('utf8'));
      }
    }
  };
  walk(svc.env.DATA_DIR!);
  // The logs were captured and do record the chat requests (at debug level), just never the key.
  expect(logs.join('').length).toBeGreaterThan(0);
  expect(logs.join('')).toContain('/v1/chat/completions');
});

it('chats with a self-hosted model with the kernel prompt first, and refuses a model that is not local', async () => {
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:local-chat');
  const res = await http('POST', `${svc.urls.main}/api/local-small/v1/chat`, {
    headers: { 'x-did': did },
    body: { messages: [{ role: 'user', content: '你好' }] }
  });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ object: 'chat.completion', model: 'local-small' });
  expect(res.body.choices[0].message.content).toBe('echo: 你好');
  const sent = backup.bodies[0] as { model: string; messages: { role: string; content: string }[] };
  expect(sent.model).toBe('qwen-1.5b');
  expect(sent.messages[0]!.role).toBe('system');
  expect(sent.messages[0]!.content).toMatch(/zhongshu-hub/);
  expect(sent.messages[1]).toEqual({ role: 'user', content: '你好' });
  const notLocal = await http('POST', `${svc.urls.main}/api/gpt-test/v1/chat`, {
    headers: { 'x-did': did },
    body: { messages: [{ role: 'user', content: 'x' }] }
  });
  expect(notLocal.status).toBe(404);
  expect(notLocal.body).toMatchObject({ ok: false, error: 'model_not_found' });
  expect(
    (
      await http('POST', `${svc.urls.main}/api/local-small/v1/chat`, {
        body: { messages: [{ role: 'user', content: 'x' }] }
      })
    ).status
  ).toBe(401);
});

it('streams on POST /v1/chat/stream with the usage chunk by default, listed under federated_compute', async () => {
  const { key } = await issueKey('S1');
  const res = await fetch(`${svc.urls.main}/v1/chat/stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'node says hi' }] })
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const events = (await res.text())
    .split('\n\n')
    .filter(Boolean)
    .map((e) => e.replace(/^data: /, ''));
  expect(events.at(-1)).toBe('[DONE]');
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as OpenAI.ChatCompletionChunk);
  expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('echo: node says hi');
  expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 8, completion_tokens: 4, total_tokens: 12 });
  const entries = (await http('GET', `${svc.urls.main}/a2a/endpoints`)).body.endpoints as {
    path: string;
    group: string;
    auth: string;
  }[];
  expect(entries.find((e) => e.path === '/v1/chat/stream')).toMatchObject({
    group: 'federated_compute',
    auth: 'api_key'
  });
});

it('changes plans and issues keys into key groups (S4 and above), each key with its own quota', async () => {
  const owner = await issueKey('S1');
  expect((await admin('POST', `/admin/api-keys/${owner.id}/groups`, { label: 'team' })).status).toBe(409);
  const changed = await admin('POST', `/admin/api-keys/${owner.id}/plan`, { plan: 'S4' });
  expect(changed.body).toMatchObject({ ok: true, plan: 'S4', previous_plan: 'S1' });
  const group = await admin('POST', `/admin/api-keys/${owner.id}/groups`, { label: 'team' });
  expect(group.status).toBe(201);
  const groupId = group.body.group.group_id as string;
  const member = await admin('POST', `/admin/key-groups/${groupId}/keys`, { label: 'alice', plan: 'S2' });
  expect(member.status).toBe(201);
  expect(member.body).toMatchObject({ group_id: groupId, plan: 'S2' });
  const listed = await admin('GET', `/admin/api-keys/${owner.id}/groups`);
  expect(listed.body.groups[0].keys).toEqual([
    expect.objectContaining({ key_id: member.body.key_id, plan: 'S2', revoked: false })
  ]);
  // The member's quota is its own: S2's 3 per minute here, whatever the owner's S4 allows.
  await waitAwayFromMinuteEnd();
  const ask = (k: string) =>
    http('POST', `${svc.urls.main}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${k}` },
      body: { model: 'gpt-test', messages: [{ role: 'user', content: 'g' }] }
    });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await ask(member.body.api_key)).status);
  expect(statuses).toEqual([200, 200, 200, 429]);
  expect((await ask(owner.key)).status).toBe(200);
});
