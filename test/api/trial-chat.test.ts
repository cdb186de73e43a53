/**
 * Trial chat (POST /try/chat, X-DID) over the real stack: each routing source in turn (knowledge card, semantic
 * retrieval, external inference, the local model when the external one fails or times out, 503 when nothing can
 * answer), Chinese and English questions, the knowledge base administered under /admin/knowledge (CRUD, JSON and
 * Markdown import) and seen by a second API process at once, and the per-address limit (X-Forwarded-For trusted
 * from the configured proxy only).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { clientAddress, trustedProxies } from '../../api/client-address';
import { isAddressOrRange } from '../../core/config.node';
import { TRIAL_ANCHOR } from '../../api/routes/chat/trial';
import { startFakeOpenAi, FakeOpenAi } from '../support/fake-openai';
import { http, startTestService, TestService } from '../support/service';
import { registerDid } from '../support/credentials';

let svc: TestService;
let external: FakeOpenAi;
let local: FakeOpenAi;
const DID = 'did:zhongshu:trial-tester';
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-trial-'));
let addressNo = 0;
/** A fresh client address per test (the service trusts X-Forwarded-For from 127.0.0.1 here), so limits don't mix. */
const freshAddress = () => `198.51.100.${++addressNo}`;

/** Runs `check` again (once) when it failed because a 10-minute limit window ended meanwhile (windows are fixed). */
async function inOneWindow(check: () => Promise<void>): Promise<void> {
  const windowNo = () => Math.floor(Date.now() / 600_000);
  const before = windowNo();
  try {
    await check();
  } catch (err) {
    if (windowNo() === before) throw err;
    await check();
  }
}

const admin = (method: string, p: string, body?: unknown) =>
  http(method, `${svc.urls.main}${p}`, { headers: { authorization: `Bearer ${svc.adminToken}` }, body });
const ask = (content: string, address = freshAddress(), base = svc.urls.main) =>
  http('POST', `${base}/try/chat`, {
    headers: { 'x-did': DID, 'x-forwarded-for': `203.0.113.9, ${address}` },
    body: { messages: [{ role: 'user', content }] }
  });

beforeAll(async () => {
  [external, local] = await Promise.all([startFakeOpenAi('ark'), startFakeOpenAi('local')]);
  const file = path.join(configDir, 'providers.json');
  fs.writeFileSync(
    file,
    JSON.stringify([
      { name: 'ark', base_url: external.baseUrl, models: [{ id: 'ark-chat', kind: 'external' }] },
      { name: 'local', base_url: local.baseUrl, models: [{ id: 'qwen-1.5b', kind: 'local' }] }
    ])
  );
  svc = await startTestService(
    {
      CHAT_PROVIDERS_FILE: file,
      CHAT_UPSTREAM_RETRIES: '0',
      CHAT_BREAKER_FAILURES: '1000',
      TRIAL_TRUSTED_PROXIES: '127.0.0.1,::1',
      TRIAL_EXTERNAL_TIMEOUT_MS: '1500'
    },
    { worker: false }
  );
  await registerDid(svc.urls.main, svc.adminToken, DID);
  const imported = await admin('POST', '/admin/knowledge/import/markdown', {
    markdown: [
      '# 中枢知识库',
      '',
      '## Q: What is the Zhongshu hub?',
      'The Zhongshu hub is the federation hub for AI agent nodes.',
      '',
      '## 问：中枢的真理账本是什么？',
      '真理账本是一条只追加的 SHA-256 哈希链。',
      '',
      '## 节点注册',
      '联邦节点通过 POST /a2a/register 注册，管理员审核通过后节点上线。',
      '',
      '心跳每三十秒发送一次，九十秒没有心跳的节点被标记为离线。',
      '',
      '## Heartbeats',
      'A node stays online by sending a heartbeat to the hub every 30 seconds; after 90 seconds of silence it is marked offline.'
    ].join('\n')
  });
  expect(imported.status).toBe(200);
  expect(imported.body).toMatchObject({ ok: true, cards_created: 2, documents_created: 2 });
});
afterAll(async () => {
  await svc?.close();
  await Promise.all([external?.close(), local?.close()]);
  fs.rmSync(configDir, { recursive: true, force: true });
});
beforeEach(() => {
  external.reset();
  local.reset();
  external.behaviour.reply = 'Paris is the capital of France.';
  local.behaviour.reply = 'local small model answer';
});

const expectShape = (body: Record<string, unknown>) => {
  expect(body.ok).toBe(true);
  expect(typeof body.reply).toBe('string');
  expect(Number.isInteger(body.elapsed_ms)).toBe(true);
  expect(body['锚定']).toBe(TRIAL_ANCHOR);
};

describe('routing', () => {
  it('answers from a knowledge card, whatever the case, width and punctuation (English and Chinese)', async () => {
    const en = await ask('what is the ZHONGSHU hub');
    expect(en.status).toBe(200);
    expectShape(en.body);
    expect(en.body).toMatchObject({
      source: 'knowledge-card',
      reply: 'The Zhongshu hub is the federation hub for AI agent nodes.'
    });
    const zh = await ask('中枢的真理账本是什么?');
    expect(zh.body).toMatchObject({ source: 'knowledge-card', reply: '真理账本是一条只追加的 SHA-256 哈希链。' });
    const fullWidth = await ask('ＷＨＡＴ　ＩＳ　ＴＨＥ　ＺＨＯＮＧＳＨＵ　ＨＵＢ？');
    expect(fullWidth.body.source).toBe('knowledge-card');
    expect(external.calls + local.calls).toBe(0);
  });

  it('answers from the knowledge base by retrieval when no card matches (Chinese and English)', async () => {
    const zh = await ask('节点怎么注册？');
    expect(zh.status).toBe(200);
    expectShape(zh.body);
    expect(zh.body.source).toBe('semantic');
    expect(zh.body.reply).toContain('POST /a2a/register');
    const en = await ask('How often does a node send heartbeats to the hub?');
    expect(en.body.source).toBe('semantic');
    expect(en.body.reply).toContain('every 30 seconds');
    expect(external.calls + local.calls).toBe(0);
  });

  it('sends an out-of-system question to the external model (English and Chinese)', async () => {
    const en = await ask('What is the capital of France?');
    expect(en.status).toBe(200);
    expectShape(en.body);
    expect(en.body).toMatchObject({ source: 'ark-external', reply: 'Paris is the capital of France.' });
    const zh = await ask('法国的首都是哪里？');
    expect(zh.body.source).toBe('ark-external');
    expect(external.calls).toBe(2);
    expect(local.calls).toBe(0);
    expect(external.bodies[1]).toMatchObject({ messages: [{ role: 'user', content: '法国的首都是哪里？' }] });
  });

  it('falls back to the local model when the external one fails, and when it does not answer in time', async () => {
    external.behaviour.failNext = { count: 1, status: 500 };
    const failed = await ask('Who wrote Hamlet?');
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({ source: 'local-1.5b-fallback', reply: 'local small model answer' });
    external.behaviour.delayMs = 5000;
    const slow = await ask('谁写了哈姆雷特？');
    expect(slow.body).toMatchObject({ source: 'local-1.5b-fallback', reply: 'local small model answer' });
    expect(local.calls).toBe(2);
  });

  it('answers 503 in the one error shape when nothing can answer', async () => {
    external.behaviour.failNext = { count: 1, status: 500 };
    local.behaviour.failNext = { count: 1, status: 503 };
    const res = await ask('What is the airspeed of an unladen swallow?');
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ ok: false, error: 'unavailable' });
    expect(res.body.message).toMatch(/No answer/);
    expect(res.body.message).not.toMatch(/at .*\.ts:\d+/);
    expect(res.headers.get('retry-after')).toBeTruthy();
  });

  it('refuses callers without a registered X-DID and bodies without messages; without a user message the last message is the question', async () => {
    const anonymous = await http('POST', `${svc.urls.main}/try/chat`, {
      body: { messages: [{ role: 'user', content: 'hi' }] }
    });
    expect(anonymous.status).toBe(401);
    const bad = await http('POST', `${svc.urls.main}/try/chat`, {
      headers: { 'x-did': DID, 'x-forwarded-for': freshAddress() },
      body: { messages: [] }
    });
    expect(bad.status).toBe(400);
    const noUser = await http('POST', `${svc.urls.main}/try/chat`, {
      headers: { 'x-did': DID, 'x-forwarded-for': freshAddress() },
      body: { messages: [{ role: 'system', content: 'what is the zhongshu hub' }] }
    });
    expect(noUser.body.source).toBe('knowledge-card');
  });
});

describe('knowledge administration', () => {
  it('creates, updates and deletes a card, and the next question sees each change', async () => {
    const created = await admin('POST', '/admin/knowledge/cards', {
      question: 'Where is the ledger kept?',
      answer: 'In MongoDB.'
    });
    expect(created.status).toBe(201);
    const id = created.body.card.card_id;
    expect((await ask('where is the ledger kept')).body).toMatchObject({
      source: 'knowledge-card',
      reply: 'In MongoDB.'
    });
    expect(
      (await admin('POST', '/admin/knowledge/cards', { question: 'WHERE is the ledger kept?!', answer: 'x' })).status
    ).toBe(409);
    expect(
      (
        await admin('PUT', `/admin/knowledge/cards/${id}`, {
          question: 'Where is the ledger kept?',
          answer: 'In MongoDB or FerretDB.'
        })
      ).status
    ).toBe(200);
    // Renaming another card to this question is a conflict too.
    const other = await admin('POST', '/admin/knowledge/cards', { question: '0'.repeat(1000), answer: 'zeros' });
    expect(other.status).toBe(201);
    const clash = await admin('PUT', `/admin/knowledge/cards/${other.body.card.card_id}`, {
      question: 'where IS the ledger kept',
      answer: 'x'
    });
    expect(clash.status).toBe(409);
    expect(
      (
        await admin('PUT', `/admin/knowledge/cards/${other.body.card.card_id}`, {
          question: '0'.repeat(1000),
          answer: '0'.repeat(20000)
        })
      ).status
    ).toBe(200);
    expect((await ask('Where is the ledger kept?')).body.reply).toBe('In MongoDB or FerretDB.');
    expect((await admin('DELETE', `/admin/knowledge/cards/${id}`)).status).toBe(200);
    expect((await admin('GET', `/admin/knowledge/cards/${id}`)).status).toBe(404);
    expect((await ask('Where is the ledger kept?')).body.source).not.toBe('knowledge-card');
  });

  it('imports what it can from Markdown and lists the entries it skipped', async () => {
    const res = await admin('POST', '/admin/knowledge/import/markdown', {
      markdown: `## Q: ${'x'.repeat(1001)}\nanswer\n\n## Q: Is this card imported?\nYes.\n`
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      cards_created: 1,
      skipped: [{ kind: 'card', reason: expect.stringMatching(/question/) }]
    });
    expect((await ask('is this card imported')).body).toMatchObject({ source: 'knowledge-card', reply: 'Yes.' });
  });

  it('manages documents and imports JSON; a second API process answers from the change at once and shares the per-address limit', async () => {
    const second = await svc.startSecondApi();
    try {
      const before = await ask('光合作用需要什么？', freshAddress(), second.url);
      expect(before.body.source).toBe('ark-external');
      const imported = await admin('POST', '/admin/knowledge/import', {
        cards: [
          { question: 'Does the hub store provider keys?', answer: 'Never: keys come from the environment only.' }
        ],
        documents: [{ title: '光合作用', text: '光合作用需要阳光、水和二氧化碳，植物由此制造养分。' }]
      });
      expect(imported.status).toBe(200);
      expect(imported.body).toMatchObject({ cards_created: 1, documents_created: 1 });
      const zh = await ask('光合作用需要什么？', freshAddress(), second.url);
      expect(zh.body.source).toBe('semantic');
      expect(zh.body.reply).toContain('阳光');
      expect((await ask('does the hub store provider keys', freshAddress(), second.url)).body.source).toBe(
        'knowledge-card'
      );
      // Import again: the same entries are replaced, not duplicated.
      const again = await admin('POST', '/admin/knowledge/import', {
        cards: [{ question: 'Does the hub store provider keys?', answer: 'Never.' }],
        documents: [{ title: '光合作用', text: '光合作用需要阳光、水和二氧化碳。' }]
      });
      expect(again.body).toMatchObject({
        cards_created: 0,
        cards_updated: 1,
        documents_created: 0,
        documents_updated: 1
      });
      const docs = await admin('GET', '/admin/knowledge/documents');
      const doc = docs.body.documents.find((d: { title: string }) => d.title === '光合作用');
      expect(doc.text).toBe('光合作用需要阳光、水和二氧化碳。');
      expect((await admin('DELETE', `/admin/knowledge/documents/${doc.document_id}`)).status).toBe(200);
      expect((await ask('光合作用需要什么？', freshAddress(), second.url)).body.source).toBe('ark-external');
      const status = await http('GET', `${second.url}/admin/knowledge`, {
        headers: { authorization: `Bearer ${svc.adminToken}` }
      });
      expect(status.body.indexed_version).toBe(status.body.version);
      // The per-address limit is shared by the two processes: 3 + 2 answered, the sixth refused on either.
      await inOneWindow(async () => {
        const address = freshAddress();
        for (let i = 0; i < 3; i++) expect((await ask('What is the Zhongshu hub?', address)).status).toBe(200);
        for (let i = 0; i < 2; i++)
          expect((await ask('What is the Zhongshu hub?', address, second.url)).status).toBe(200);
        expect((await ask('What is the Zhongshu hub?', address, second.url)).status).toBe(429);
        expect((await ask('What is the Zhongshu hub?', address)).status).toBe(429);
      });
    } finally {
      await second.stop();
    }
  });
});

describe('per-address limit', () => {
  it('answers 429 with Retry-After after 5 requests from one address in 10 minutes; other addresses are not affected', async () => {
    await inOneWindow(async () => {
      const address = freshAddress();
      for (let i = 0; i < 5; i++) expect((await ask('What is the Zhongshu hub?', address)).status).toBe(200);
      const refused = await ask('What is the Zhongshu hub?', address);
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ ok: false, error: 'rate_limited' });
      const retry = Number(refused.headers.get('retry-after'));
      expect(retry).toBeGreaterThanOrEqual(1);
      expect(retry).toBeLessThanOrEqual(600);
      expect((await ask('What is the Zhongshu hub?', freshAddress())).status).toBe(200);
    });
  });

  it('trusts X-Forwarded-For only from a configured proxy, right-most untrusted hop first', () => {
    const trusted = trustedProxies(['10.0.0.1', '10.0.0.2']);
    const req = (ip: string, xff?: string) => ({ ip, headers: xff ? { 'x-forwarded-for': xff } : {} });
    expect(clientAddress(req('192.0.2.7', '198.51.100.1'), trusted)).toBe('192.0.2.7');
    expect(clientAddress(req('10.0.0.1', '6.6.6.6, 198.51.100.1'), trusted)).toBe('198.51.100.1');
    expect(clientAddress(req('10.0.0.1', '198.51.100.1, 10.0.0.2'), trusted)).toBe('198.51.100.1');
    expect(clientAddress(req('10.0.0.1', 'garbage'), trusted)).toBe('10.0.0.1');
    expect(clientAddress(req('::ffff:10.0.0.1', '198.51.100.3'), trusted)).toBe('198.51.100.3');
    // Ranges (a load balancer's network), IPv4 and IPv6.
    const ranges = trustedProxies(['172.16.0.0/12', 'fd00::/8']);
    expect(clientAddress(req('172.18.0.5', '6.6.6.6, 198.51.100.1'), ranges)).toBe('198.51.100.1');
    expect(clientAddress(req('172.32.0.5', '198.51.100.1'), ranges)).toBe('172.32.0.5');
    expect(clientAddress(req('fd12::7', '2001:db8::1'), ranges)).toBe('2001:db8::1');
    expect(clientAddress(req('10.0.0.1', '198.51.100.1'), trustedProxies([]))).toBe('10.0.0.1');
    expect(['10.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8'].map(isAddressOrRange)).toEqual([true, true, true, true]);
    expect(
      ['lb', '10.0.0.0/33', '10.0.0.0/8/1', 'fd00::/129', '10.0.0.0/x', '', '0.0.0.0/0', '::/0'].map(isAddressOrRange)
    ).toEqual(Array(8).fill(false));
  });
});
