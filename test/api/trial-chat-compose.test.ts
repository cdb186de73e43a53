/**
 * Trial chat with TRIAL_SEMANTIC_COMPOSE=local: a semantic answer is written by the local model from the passages
 * retrieval found (given to it in a system message before the user's messages), and is the passages themselves when
 * the local model fails. Cards still answer without any model call.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeOpenAi, FakeOpenAi } from '../support/fake-openai';
import { registerDid } from '../support/credentials';
import { http, startTestService, TestService } from '../support/service';

let svc: TestService;
let local: FakeOpenAi;
const DID = 'did:zhongshu:compose-tester';
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-trial-compose-'));
let n = 0;
const ask = (content: string) =>
  http('POST', `${svc.urls.main}/try/chat`, {
    headers: { 'x-did': DID, 'x-forwarded-for': `198.51.100.${++n}` },
    body: { messages: [{ role: 'user', content }] }
  });

beforeAll(async () => {
  local = await startFakeOpenAi('local');
  const file = path.join(configDir, 'providers.json');
  fs.writeFileSync(
    file,
    JSON.stringify([{ name: 'local', base_url: local.baseUrl, models: [{ id: 'qwen-1.5b', kind: 'local' }] }])
  );
  svc = await startTestService(
    {
      CHAT_PROVIDERS_FILE: file,
      CHAT_UPSTREAM_RETRIES: '0',
      CHAT_BREAKER_FAILURES: '1000',
      TRIAL_TRUSTED_PROXIES: '127.0.0.1,::1',
      TRIAL_SEMANTIC_COMPOSE: 'local',
      TRIAL_RATE_LIMIT: '1000'
    },
    { worker: false }
  );
  await registerDid(svc.urls.main, svc.adminToken, DID);
  const imported = await http('POST', `${svc.urls.main}/admin/knowledge/import/markdown`, {
    headers: { authorization: `Bearer ${svc.adminToken}` },
    body: {
      markdown: [
        '## Q: What is the Zhongshu hub?',
        'The Zhongshu hub is the federation hub for AI agent nodes.',
        '',
        '## 节点注册',
        '联邦节点通过 POST /a2a/register 注册，管理员审核通过后节点上线。'
      ].join('\n')
    }
  });
  expect(imported.status).toBe(200);
});
afterAll(async () => {
  await svc?.close();
  await local?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
});
beforeEach(() => local.reset());

it('composes a semantic answer through the local model, from the passages found', async () => {
  local.behaviour.reply = '节点用 POST /a2a/register 注册，审核后上线。';
  const res = await ask('节点怎么注册？');
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({
    ok: true,
    source: 'semantic',
    reply: '节点用 POST /a2a/register 注册，审核后上线。'
  });
  expect(local.calls).toBe(1);
  const sent = local.bodies[0] as { messages: { role: string; content: string }[] };
  expect(sent.messages[0]!.role).toBe('system');
  expect(sent.messages[0]!.content).toContain('联邦节点通过 POST /a2a/register 注册');
  expect(sent.messages.at(-1)).toEqual({ role: 'user', content: '节点怎么注册？' });
});

it('answers with the passages when the local model fails, and with a card without any model', async () => {
  local.behaviour.failNext = { count: 1, status: 503 };
  const res = await ask('节点怎么注册？');
  expect(res.body).toMatchObject({ source: 'semantic' });
  expect(res.body.reply).toContain('联邦节点通过 POST /a2a/register 注册');
  const card = await ask('what is the zhongshu hub');
  expect(card.body).toMatchObject({
    source: 'knowledge-card',
    reply: 'The Zhongshu hub is the federation hub for AI agent nodes.'
  });
  expect(local.calls).toBe(1);
});
