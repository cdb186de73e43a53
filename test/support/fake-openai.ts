/**
 * A local OpenAI-compatible upstream for tests and benches (a plain node:http server, loopback unless told):
 * POST /v1/chat/completions with and without `stream`, usage in a final chunk when stream_options.include_usage,
 * GET /v1/models. It echoes the last user message ("echo: <text>"), split into word chunks when streaming.
 * Behaviour can be changed per test: fail with a status (and Retry-After) for the next N calls, stall before the
 * answer or between chunks, omit usage, break a stream off. It counts calls, remembers the last request bodies and
 * the Authorization headers it saw, and notices calls the client abandoned.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeBehaviour {
  /** Answer the next `count` calls with `status` (and Retry-After seconds, when given). */
  failNext?: { count: number; status: number; retryAfterS?: number; message?: string };
  /** Close the connection without an answer for the next N calls. */
  dropNext?: number;
  /** Wait this long before answering (headers included). */
  delayMs?: number;
  /** Wait this long between stream chunks. */
  chunkDelayMs?: number;
  /** Never send usage (neither in the answer nor as a final chunk). */
  omitUsage?: boolean;
  /** Break each stream off after this many content chunks (no [DONE]). */
  breakStreamAfter?: number;
  /** Text to answer instead of the echo. */
  reply?: string;
}

export interface FakeOpenAi {
  url: string;
  /** base_url for a provider: `<url>/v1`. */
  baseUrl: string;
  calls: number;
  /** Calls whose client went away before the answer was complete. */
  abandoned: number;
  bodies: Record<string, unknown>[];
  authorizations: (string | undefined)[];
  /** The address each chat completion came from, in order (which host's process called). */
  callers: string[];
  behaviour: FakeBehaviour;
  reset(): void;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `host`: where it listens (loopback unless a test's hosts must reach it, test/topology/). */
export async function startFakeOpenAi(name = 'fake', host = '127.0.0.1'): Promise<FakeOpenAi> {
  const state: FakeOpenAi = {
    url: '',
    baseUrl: '',
    calls: 0,
    abandoned: 0,
    bodies: [],
    authorizations: [],
    callers: [],
    behaviour: {},
    reset() {
      state.calls = 0;
      state.abandoned = 0;
      state.bodies = [];
      state.authorizations = [];
      state.callers = [];
      state.behaviour = {};
    },
    close: () => new Promise((resolve) => server.close(() => resolve()))
  };
  const sockets = new Set<import('node:net').Socket>();

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void answer(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  async function answer(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<void> {
    const b = state.behaviour;
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ object: 'list', data: [{ id: `${name}-model`, object: 'model', created: 0, owned_by: name }] })
      );
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error', param: null, code: null } })
      );
      return;
    }
    state.calls++;
    state.authorizations.push(req.headers.authorization);
    state.callers.push(req.socket.remoteAddress ?? '');
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: 'bad json', type: 'invalid_request_error', param: null, code: null } })
      );
      return;
    }
    state.bodies.push(body);
    let gone = false;
    res.on('close', () => {
      if (!res.writableFinished) {
        gone = true;
        state.abandoned++;
      }
    });
    if (b.dropNext && b.dropNext > 0) {
      b.dropNext--;
      req.socket.destroy();
      return;
    }
    if (b.delayMs) await sleep(b.delayMs);
    if (gone) return;
    if (b.failNext && b.failNext.count > 0) {
      b.failNext.count--;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (b.failNext.retryAfterS !== undefined) headers['retry-after'] = String(b.failNext.retryAfterS);
      res.writeHead(b.failNext.status, headers);
      res.end(
        JSON.stringify({
          error: {
            message: b.failNext.message ?? `failing on purpose (${b.failNext.status})`,
            type: 'server_error',
            param: null,
            code: null
          }
        })
      );
      return;
    }
    const messages = (body.messages as { role: string; content: unknown }[] | undefined) ?? [];
    const lastUser = [...messages].reverse().find((m) => m.role === 'user');
    const text = b.reply ?? `echo: ${typeof lastUser?.content === 'string' ? lastUser.content : ''}`;
    const promptTokens = 7 + messages.length;
    const words = text.split(/(?<= )/);
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: words.length,
      total_tokens: promptTokens + words.length
    };
    const id = `up-${state.calls}`;
    const created = Math.floor(Date.now() / 1000);
    const model = String(body.model);
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: text, refusal: null },
              finish_reason: 'stop',
              logprobs: null
            }
          ],
          ...(b.omitUsage ? {} : { usage })
        })
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }]
    });
    send(chunk({ role: 'assistant', content: '' }));
    for (let i = 0; i < words.length; i++) {
      if (gone) return;
      if (b.breakStreamAfter !== undefined && i >= b.breakStreamAfter) {
        req.socket.destroy();
        return;
      }
      if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
      if (gone) return;
      send(chunk({ content: words[i] }));
    }
    send(chunk({}, 'stop'));
    const wantsUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    if (wantsUsage && !b.omitUsage) send({ id, object: 'chat.completion.chunk', created, model, choices: [], usage });
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  state.url = `http://${host}:${port}`;
  state.baseUrl = `${state.url}/v1`;
  const close = state.close;
  state.close = async () => {
    for (const s of sockets) s.destroy();
    await close();
  };
  return state;
}
