/**
 * The chat gateway's admission on the fast paths (api/plugins/auth/api-key.ts, store/verified-api-keys.ts, admitChain
 * in api/routes/chat/gateway.ts): a key whose secret digest an API process verified within CHAT_KEY_CACHE_MS is not
 * read again; one verified longer ago starts its limit claims and upstream call beside its store read. Two API
 * processes: the first with CHAT_KEY_CACHE_MS at 8 s, the second with 0 (every request reads, overlapping). These
 * tests hold the guarantees that must survive both: a revocation through the first refuses the very next request on
 * both (401; an upstream call started beside the key read is aborted, nothing answered or recorded, every slot given
 * back); one through the second reaches the first within its CHAT_KEY_CACHE_MS; a wrong secret claims nothing; a plan
 * change counts at once (models and limits); the per-minute and daily caps stay exact.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeOpenAi, FakeOpenAi } from '../support/fake-openai';
import { eventually, http, startTestService, TestService, waitAwayFromMinuteEnd } from '../support/service';

let svc: TestService;
let second: { url: string; stop(): Promise<void> };
let upstream: FakeOpenAi;
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-chat-cache-'));
/** The first process's CHAT_KEY_CACHE_MS: long enough that "answered from memory" is seen on a loaded machine. */
const CACHE_MS = 8000;

const admin = (method: string, p: string, body?: unknown) =>
  http(method, `${svc.urls.main}${p}`, { headers: { authorization: `Bearer ${svc.adminToken}` }, body });
async function issueKey(plan: string): Promise<{ key: string; id: string }> {
  const res = await admin('POST', '/admin/api-keys', { label: `cache ${plan}`, plan });
  expect(res.status).toBe(201);
  return { key: res.body.api_key, id: res.body.key_id };
}
const complete = (url: string, key: string, model = 'gpt-test', body: Record<string, unknown> = {}) =>
  http('POST', `${url}/v1/chat/completions`, {
    headers: { authorization: `Bearer ${key}` },
    body: { model, messages: [{ role: 'user', content: 'hi' }], ...body }
  });
const slots = async (id: string) => ({
  rpm: await svc.db.collection('chat_limit_slots').countDocuments({ scope: `key:${id}:rpm` }),
  rpd: await svc.db.collection('chat_limit_slots').countDocuments({ scope: `key:${id}:rpd` })
});

beforeAll(async () => {
  upstream = await startFakeOpenAi('cache-upstream');
  const file = path.join(configDir, 'providers.json');
  fs.writeFileSync(
    file,
    JSON.stringify([
      { name: 'up', base_url: upstream.baseUrl, models: [{ id: 'gpt-test' }, { id: 'premium', plans: ['S5'] }] }
    ])
  );
  svc = await startTestService(
    {
      CHAT_PROVIDERS_FILE: file,
      CHAT_UPSTREAM_RETRIES: '0',
      CHAT_PLANS: JSON.stringify({
        S1: { requests_per_minute: 1000, requests_per_day: 100000 },
        S3: { requests_per_minute: 1000, requests_per_day: 10 },
        S4: { requests_per_minute: 5 },
        S5: { requests_per_minute: 500 }
      }),
      CHAT_KEY_CACHE_MS: String(CACHE_MS)
    },
    { worker: false }
  );
  second = await svc.startSecondApi({}, { CHAT_KEY_CACHE_MS: '0' });
});
afterAll(async () => {
  await second?.stop();
  await svc?.close();
  await upstream?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
});
beforeEach(() => upstream.reset());

it('refuses a revoked key at its next request on both processes while they hold it verified, giving back every slot', async () => {
  const { key, id } = await issueKey('S1');
  const urls = [svc.urls.main, second.url];
  // Twice on each process: the first verifies before admitting, the second takes the fast path.
  for (const url of [...urls, ...urls]) expect((await complete(url, key)).status).toBe(200);
  expect(await slots(id)).toEqual({ rpm: 4, rpd: 4 });
  expect((await admin('POST', `/admin/api-keys/${id}/revoke`)).status).toBe(200);
  // The four answered requests' usage records (each waits up to 25 ms to share an insert).
  const usageBefore = 4;
  await eventually(
    async () =>
      (await svc.db.collection('chat_usage').countDocuments({ key_id: id })) === usageBefore ? true : undefined,
    5000,
    'the usage records'
  );
  const callsBefore = upstream.calls;
  // An upstream slower than the key read: the call a cached key starts beside its read is seen being abandoned.
  upstream.behaviour = { delayMs: 3000 };
  for (const url of urls) {
    const refused = await complete(url, key);
    expect(refused.status).toBe(401);
    expect(refused.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
    // Whatever else is wrong with the request, a revoked key is told so first.
    expect((await complete(url, key, 'no-such-model')).status).toBe(401);
    expect((await complete(url, key, 'gpt-test', { temperature: 7 })).status).toBe(401);
    expect(
      (
        await http('POST', `${url}/v1/chat/stream`, {
          headers: { authorization: `Bearer ${key}` },
          body: { model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }
        })
      ).status
    ).toBe(401);
  }
  // Only the first request on each process (it held the key verified) may start an upstream call beside its key
  // read (when the read answers first, the call is not even sent); any that reached the upstream was aborted, and
  // nothing was answered or recorded. Every later request was verified first.
  const started = upstream.calls - callsBefore;
  expect(started).toBeLessThanOrEqual(2);
  await eventually(
    async () => (upstream.abandoned === started ? true : undefined),
    10_000,
    'the speculative upstream calls aborted'
  );
  expect(await svc.db.collection('chat_usage').countDocuments({ key_id: id })).toBe(usageBefore);
  expect(await slots(id)).toEqual({ rpm: 4, rpd: 4 });
});

it('lets a revocation through another process reach a process that holds the key verified within its CHAT_KEY_CACHE_MS', async () => {
  const { key, id } = await issueKey('S1');
  // Verified on the first process (a read just now), then answered from memory there.
  for (let i = 0; i < 2; i++) expect((await complete(svc.urls.main, key)).status).toBe(200);
  const revoked = await http('POST', `${second.url}/admin/api-keys/${id}/revoke`, {
    headers: { authorization: `Bearer ${svc.adminToken}` }
  });
  expect(revoked.status).toBe(200);
  // The second process reads at every request: refused at once.
  expect((await complete(second.url, key)).status).toBe(401);
  // The first answers from its verification, which is younger than CHAT_KEY_CACHE_MS (the documented window) ...
  expect((await complete(svc.urls.main, key)).status).toBe(200);
  // ... and refuses once its background read (started when the verification is half CHAT_KEY_CACHE_MS old) or a
  // read after CHAT_KEY_CACHE_MS has seen the revocation.
  await eventually(
    async () => {
      const res = await complete(svc.urls.main, key);
      if (res.status === 200) return undefined;
      expect(res.status).toBe(401);
      return true;
    },
    CACHE_MS + 10_000,
    'the first process to refuse the revoked key'
  );
  // After that refusal the process reads the key at every request: still refused, and nothing claimed for it.
  const before = await slots(id);
  expect((await complete(svc.urls.main, key)).status).toBe(401);
  expect(await slots(id)).toEqual(before);
});

it('never claims anything for a wrong secret of a key a process holds verified, nor for a regenerated key’s old secret', async () => {
  const { key, id } = await issueKey('S1');
  for (const url of [svc.urls.main, second.url]) expect((await complete(url, key)).status).toBe(200);
  const wrong = `zk_${id}_${'A'.repeat(43)}`;
  for (const url of [svc.urls.main, second.url]) expect((await complete(url, wrong)).status).toBe(401);
  expect(await slots(id)).toEqual({ rpm: 2, rpd: 2 });
  const regenerated = await admin('POST', `/admin/api-keys/${id}/regenerate`);
  expect(regenerated.status).toBe(200);
  for (const url of [svc.urls.main, second.url]) expect((await complete(url, key)).status).toBe(401);
  expect(await slots(id)).toEqual({ rpm: 2, rpd: 2 });
  for (const url of [svc.urls.main, second.url])
    expect((await complete(url, regenerated.body.api_key)).status).toBe(200);
  expect(await slots(id)).toEqual({ rpm: 4, rpd: 4 });
});

it('applies a plan change at the next request on both processes: the new plan’s models and limits', async () => {
  const { key, id } = await issueKey('S1');
  const urls = [svc.urls.main, second.url];
  for (const url of [...urls, ...urls]) {
    const res = await complete(url, key);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit-requests')).toBe('1000');
  }
  for (const url of urls) expect((await complete(url, key, 'premium')).body.error.code).toBe('model_not_permitted');
  expect((await admin('POST', `/admin/api-keys/${id}/plan`, { plan: 'S5' })).status).toBe(200);
  for (const url of urls) {
    const res = await complete(url, key, 'premium');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit-requests')).toBe('500');
  }
  // And back: the cached S5 no longer opens the premium model.
  expect((await admin('POST', `/admin/api-keys/${id}/plan`, { plan: 'S1' })).status).toBe(200);
  for (const url of urls) {
    const res = await complete(url, key, 'premium');
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('model_not_permitted');
    const ok = await complete(url, key);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-ratelimit-limit-requests')).toBe('1000');
  }
  // 4 + 2 + 2 answered; every claim under a stale plan was given back.
  expect(await slots(id)).toEqual({ rpm: 8, rpd: 8 });
});

it('keeps the daily cap exact across two processes for a key both hold verified', async () => {
  const { key, id } = await issueKey('S3'); // 10 per day
  const urls = [svc.urls.main, second.url];
  for (const url of urls) expect((await complete(url, key)).status).toBe(200);
  const answers = await Promise.all(
    Array.from({ length: 24 }, (_, i) =>
      complete(urls[i % 2]!, key, 'gpt-test', { messages: [{ role: 'user', content: `n${i}` }] })
    )
  );
  expect(answers.filter((a) => a.status === 200)).toHaveLength(8);
  const refused = answers.filter((a) => a.status === 403);
  expect(refused).toHaveLength(16);
  expect(refused[0]!.body.error).toMatchObject({ code: 'insufficient_quota' });
  expect(upstream.calls).toBe(10);
  expect(await slots(id)).toEqual({ rpm: 10, rpd: 10 });
});

it('keeps the per-minute cap exact across two processes for a key both hold verified (429 beyond it, nothing leaked)', async () => {
  const { key, id } = await issueKey('S4'); // 5 per minute
  await waitAwayFromMinuteEnd();
  const urls = [svc.urls.main, second.url];
  for (const url of urls) expect((await complete(url, key)).status).toBe(200);
  const answers = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      complete(urls[i % 2]!, key, 'gpt-test', { messages: [{ role: 'user', content: `m${i}` }] })
    )
  );
  expect(answers.filter((a) => a.status === 200)).toHaveLength(3);
  const limited = answers.filter((a) => a.status === 429);
  expect(limited).toHaveLength(9);
  expect(limited[0]!.body.error).toMatchObject({ code: 'rate_limit_exceeded' });
  expect(limited[0]!.headers.get('x-ratelimit-remaining-requests')).toBe('0');
  expect(upstream.calls).toBe(5);
  // The refused requests gave their daily slots back.
  expect(await slots(id)).toEqual({ rpm: 5, rpd: 5 });
});
