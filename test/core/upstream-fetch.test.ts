/**
 * core/chat/upstream-fetch.node.ts under the official `openai` SDK, against the local OpenAI-compatible test
 * upstream: the SDK given this fetch answers, streams and fails exactly as it does with its own (the same error
 * classes for an HTTP error, a dropped connection, its timeout and the caller's abort), and an abandoned stream is
 * seen as abandoned by the upstream.
 */
import OpenAI, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIUserAbortError,
  InternalServerError,
  RateLimitError
} from 'openai';
import { Agent } from 'undici';
import { upstreamFetch } from '../../core/chat/upstream-fetch.node';
import { FakeOpenAi, startFakeOpenAi } from '../support/fake-openai';
import { eventually } from '../support/service';

let fake: FakeOpenAi;
const agent = new Agent({ keepAliveTimeout: 30_000 });
let sdk: OpenAI;
const messages = [{ role: 'user' as const, content: 'hello there' }];

beforeAll(async () => {
  fake = await startFakeOpenAi('up');
  sdk = new OpenAI({
    baseURL: fake.baseUrl,
    apiKey: 'sk-test',
    maxRetries: 0,
    timeout: 2000,
    fetch: upstreamFetch(agent)
  });
});
afterEach(() => fake.reset());
afterAll(async () => {
  await agent.destroy();
  await fake.close();
});

it('answers a completion, with the headers and body the SDK sent', async () => {
  const res = await sdk.chat.completions.create({ model: 'up', messages, max_tokens: 8 });
  expect(res.choices[0]!.message.content).toBe('echo: hello there');
  expect(fake.authorizations.at(-1)).toBe('Bearer sk-test');
  expect(fake.bodies.at(-1)).toMatchObject({ model: 'up', max_tokens: 8 });
});

it('streams chunk by chunk', async () => {
  const stream = await sdk.chat.completions.create({
    model: 'up',
    messages,
    stream: true,
    stream_options: { include_usage: true }
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  expect(text).toBe('echo: hello there');
  expect(usage?.total_tokens).toBeGreaterThan(0);
});

it("raises the SDK's classes: HTTP errors with status and headers, a dropped connection, its timeout", async () => {
  fake.behaviour.failNext = { count: 1, status: 429, retryAfterS: 3 };
  const limited = await sdk.chat.completions.create({ model: 'up', messages }).catch((e: unknown) => e);
  expect(limited).toBeInstanceOf(RateLimitError);
  expect((limited as RateLimitError).headers.get('retry-after')).toBe('3');

  fake.behaviour.failNext = { count: 1, status: 500, message: 'upstream broke' };
  const broke = await sdk.chat.completions.create({ model: 'up', messages }).catch((e: unknown) => e);
  expect(broke).toBeInstanceOf(InternalServerError);
  expect((broke as Error).message).toContain('upstream broke');

  fake.behaviour.dropNext = 1;
  const dropped = await sdk.chat.completions.create({ model: 'up', messages }).catch((e: unknown) => e);
  expect(dropped).toBeInstanceOf(APIConnectionError);

  fake.behaviour.delayMs = 1000;
  const slow = await sdk.chat.completions.create({ model: 'up', messages }, { timeout: 300 }).catch((e: unknown) => e);
  expect(slow).toBeInstanceOf(APIConnectionTimeoutError);
});

it('ends a call the caller aborts, before the answer and in the middle of a stream, and the upstream sees it abandoned', async () => {
  fake.behaviour.delayMs = 1000;
  const before = new AbortController();
  const pending = sdk.chat.completions
    .create({ model: 'up', messages }, { signal: before.signal })
    .catch((e: unknown) => e);
  setTimeout(() => before.abort(), 100);
  expect(await pending).toBeInstanceOf(APIUserAbortError);
  await eventually(
    async () => (fake.abandoned >= 1 ? true : undefined),
    5000,
    'the upstream to see the first call abandoned'
  );

  fake.reset();
  fake.behaviour.chunkDelayMs = 300;
  const during = new AbortController();
  const stream = await sdk.chat.completions.create(
    { model: 'up', messages: [{ role: 'user', content: 'one two three four five six' }], stream: true },
    { signal: during.signal }
  );
  let chunks = 0;
  const read = (async () => {
    for await (const _ of stream) if (++chunks === 1) during.abort();
  })().catch((e: unknown) => e);
  await read;
  expect(chunks).toBeLessThan(4);
  await eventually(
    async () => (fake.abandoned >= 1 ? true : undefined),
    5000,
    'the upstream to see the stream abandoned'
  );
});
