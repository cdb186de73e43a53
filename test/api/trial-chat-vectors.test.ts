/**
 * Trial chat with an embeddings model configured (TRIAL_EMBEDDINGS_MODEL): a question that shares no word with the
 * knowledge base but means the same is answered `semantic` by vector similarity (English and Chinese), an unrelated
 * one still goes to the external model, and a change embeds only the passages that are new. The embeddings endpoint
 * is a test double: an OpenAI-compatible /v1/embeddings whose vectors count a few concepts' keywords.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { startFakeOpenAi, FakeOpenAi } from '../support/fake-openai';
import { http as request, startTestService, TestService } from '../support/service';
import { registerDid } from '../support/credentials';

const CONCEPTS = [
  ['ledger', 'truth', 'fact', 'record', '账本', '真理', '事实', '记录'],
  ['weather', 'rain', 'sunny', '天气', '下雨'],
  ['photosynthesis', 'sunlight', 'plant', '光合', '植物']
];
const toyEmbedding = (text: string) => [
  ...CONCEPTS.map((words) => words.filter((w) => text.toLowerCase().includes(w)).length),
  0.1
];

let svc: TestService;
let external: FakeOpenAi;
let embeddings: http.Server;
const embedded: string[] = [];
const DID = 'did:zhongshu:vector-tester';
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-trial-vec-'));
let n = 0;

const admin = (method: string, p: string, body?: unknown) =>
  request(method, `${svc.urls.main}${p}`, { headers: { authorization: `Bearer ${svc.adminToken}` }, body });
const ask = (content: string) =>
  request('POST', `${svc.urls.main}/try/chat`, {
    headers: { 'x-did': DID, 'x-forwarded-for': `192.0.2.${++n}` },
    body: { messages: [{ role: 'user', content }] }
  });

beforeAll(async () => {
  embeddings = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const input = (JSON.parse(raw) as { input: string | string[] }).input;
      const texts = Array.isArray(input) ? input : [input];
      embedded.push(...texts);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          object: 'list',
          model: 'toy',
          data: texts.map((t, index) => ({ object: 'embedding', index, embedding: toyEmbedding(t) })),
          usage: { prompt_tokens: 1, total_tokens: 1 }
        })
      );
    });
  });
  await new Promise<void>((r) => embeddings.listen(0, '127.0.0.1', r));
  external = await startFakeOpenAi('ark');
  external.behaviour.reply = 'external answer';
  const file = path.join(configDir, 'providers.json');
  fs.writeFileSync(
    file,
    JSON.stringify([
      { name: 'ark', base_url: external.baseUrl, models: [{ id: 'ark-chat', kind: 'external' }] },
      {
        name: 'embed',
        base_url: `http://127.0.0.1:${(embeddings.address() as AddressInfo).port}/v1`,
        models: [{ id: 'toy-embed', upstream: 'toy', plans: [] }]
      }
    ])
  );
  svc = await startTestService(
    {
      CHAT_PROVIDERS_FILE: file,
      TRIAL_TRUSTED_PROXIES: '127.0.0.1,::1',
      TRIAL_EMBEDDINGS_MODEL: 'toy-embed',
      TRIAL_VECTOR_THRESHOLD: '0.8'
    },
    { worker: false }
  );
  await registerDid(svc.urls.main, svc.adminToken, DID);
  const res = await admin('POST', '/admin/knowledge/documents', {
    title: 'Truth ledger',
    text: 'The hub keeps every truth in an append-only ledger chained by SHA-256.'
  });
  expect(res.status).toBe(201);
});
afterAll(async () => {
  await svc?.close();
  await external?.close();
  await new Promise((r) => embeddings?.close(r));
  fs.rmSync(configDir, { recursive: true, force: true });
});

it('answers a paraphrase that shares no word with the passage by vector similarity (English and Chinese)', async () => {
  const en = await ask('Where are facts recorded permanently?');
  expect(en.status).toBe(200);
  expect(en.body).toMatchObject({
    source: 'semantic',
    reply: 'The hub keeps every truth in an append-only ledger chained by SHA-256.'
  });
  const zh = await ask('事实记录在哪里？');
  expect(zh.body).toMatchObject({
    source: 'semantic',
    reply: 'The hub keeps every truth in an append-only ledger chained by SHA-256.'
  });
  expect(external.calls).toBe(0);
});

it('sends an unrelated question to the external model', async () => {
  const res = await ask('Will it rain tomorrow?');
  expect(res.body).toMatchObject({ source: 'ark-external', reply: 'external answer' });
});

it('embeds only new passages when the knowledge base changes', async () => {
  const before = embedded.length;
  expect(
    (
      await admin('POST', '/admin/knowledge/documents', {
        title: 'Plants',
        text: 'Photosynthesis turns sunlight into sugar in a plant.'
      })
    ).status
  ).toBe(201);
  const res = await ask('植物怎样利用光？');
  expect(res.body).toMatchObject({ source: 'semantic', reply: 'Photosynthesis turns sunlight into sugar in a plant.' });
  const passagesEmbedded = embedded.slice(before).filter((t) => t.includes('\n'));
  expect(passagesEmbedded).toEqual(['Plants\nPhotosynthesis turns sunlight into sugar in a plant.']);
});
