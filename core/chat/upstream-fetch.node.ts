/**
 * The `fetch` the `openai` SDK is given for upstream calls (its documented `fetch` option): undici's `request` on a
 * keep-alive Agent, answered as a standard `Response`. The SDK still builds every request, parses every answer and
 * raises its own error classes; only the HTTP exchange underneath is cheaper. Measured with the SDK against a local
 * OpenAI-compatible server (the gateway's path, one call at a time): about 0.65 ms a completion against 1.4 ms
 * with Node's global fetch, whose WHATWG stream plumbing costs more than the call itself on a small answer.
 *
 * A JSON answer is read whole before it is handed over (the SDK reads it whole anyway); an event stream is handed
 * over as it arrives, so the first upstream byte still reaches the gateway at once. An abort (the client went
 * away, or the SDK's own timeout) rejects with an `AbortError` and drops the connection, as fetch would.
 */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { Agent, request } from 'undici';

type FetchInit = {
  method?: string;
  headers?: ConstructorParameters<typeof Headers>[0];
  body?: string | Uint8Array | null;
  signal?: AbortSignal | null;
};

export function upstreamFetch(agent: Agent = new Agent({ keepAliveTimeout: 30_000 })): typeof fetch {
  const call = async (input: string | URL | Request, init: FetchInit = {}): Promise<Response> => {
    const url = typeof input === 'string' || input instanceof URL ? input : input.url;
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const signal = init.signal ?? undefined;
    // Aborted (the caller, or the SDK's own timeout): an error named AbortError, as fetch raises, which the SDK tells
    // apart (a plain Error: the SDK takes an object that is not an instance of this realm's Error for another kind).
    const aborted = (err: unknown) =>
      signal?.aborted
        ? Object.assign(new Error('This operation was aborted', { cause: err }), { name: 'AbortError' })
        : err;
    const res = await request(url, {
      method: (init.method ?? 'GET') as 'GET',
      headers,
      body: init.body ?? null,
      signal,
      dispatcher: agent
    }).catch((err: unknown) => {
      throw aborted(err);
    });
    const answer = new Headers();
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const v of value) answer.append(name, v);
      else answer.set(name, value);
    }
    // Statuses that carry no body must be answered without one (the Response constructor refuses one).
    if (res.statusCode === 204 || res.statusCode === 304) {
      await res.body.dump();
      return new Response(null, { status: res.statusCode, headers: answer });
    }
    const streamed = (answer.get('content-type') ?? '').startsWith('text/event-stream');
    const body = streamed
      ? (Readable.toWeb(res.body) as WebReadableStream<Uint8Array> as unknown as ReadableStream<Uint8Array>)
      : await res.body.arrayBuffer().catch((err: unknown) => {
          throw aborted(err);
        });
    return new Response(body, { status: res.statusCode, headers: answer });
  };
  return call as unknown as typeof fetch;
}
