/**
 * The commercial gateway's HTTP client for the memory gateway (undici), with one timeout for the whole exchange.
 * What the caller gets:
 *   - 2xx: the upstream JSON body;
 *   - 4xx: the memory gateway's own error (code, message, fields, Retry-After), answered as it is;
 *   - the memory gateway down, too slow, answering 5xx or something that is not its JSON: 502 upstream_failed, in
 *     the one error shape. Nothing is retried: a write that timed out may have landed, and the caller decides.
 */
import { Agent, request } from 'undici';
import { AppError, ERROR_STATUS, ErrorCode } from '../../core/errors';

export interface MemoryGatewayAnswer {
  status: number;
  body: unknown;
  retryAfter?: string;
}

/** Headers forwarded to the memory gateway: the caller's identity and the trace id (so both logs share it). */
export interface ForwardHeaders {
  'x-trace': string;
  'x-did'?: string;
}

export class MemoryGatewayClient {
  private readonly agent: Agent;

  constructor(
    private readonly baseUrl: string,
    private readonly timeoutMs: number
  ) {
    this.agent = new Agent({
      connectTimeout: timeoutMs,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      keepAliveTimeout: 4000
    });
  }

  get url(): string {
    return this.baseUrl;
  }

  /** GET or POST `path` on the memory gateway; 2xx bodies are returned, everything else thrown as an AppError. */
  async call(method: 'GET' | 'POST', path: string, headers: ForwardHeaders, body?: unknown): Promise<unknown> {
    let answer: MemoryGatewayAnswer;
    try {
      const res = await request(`${this.baseUrl}${path}`, {
        method,
        dispatcher: this.agent,
        headers: {
          accept: 'application/json',
          ...headers,
          ...(body === undefined ? {} : { 'content-type': 'application/json' })
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs)
      });
      const text = await res.body.text();
      const retryAfter = res.headers['retry-after'];
      answer = {
        status: res.statusCode,
        body: parseJson(text),
        ...(typeof retryAfter === 'string' ? { retryAfter } : {})
      };
    } catch (err) {
      throw upstreamFailed(
        timedOut(err)
          ? `The memory gateway did not answer within ${this.timeoutMs} ms`
          : `The memory gateway cannot be reached (${describe(err)})`
      );
    }
    if (answer.status >= 200 && answer.status < 300 && answer.body !== undefined) return answer.body;
    if (answer.status >= 400 && answer.status < 500) throw passedThrough(answer);
    throw upstreamFailed(
      answer.status >= 500
        ? `The memory gateway answered ${answer.status}`
        : `The memory gateway answered ${answer.status} without a JSON body`
    );
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

const upstreamFailed = (message: string) =>
  new AppError('upstream_failed', `${message}; retry later`, {}, { 'Retry-After': '5' });

/** The memory gateway's 4xx as its own error: same code and status, message and field list. */
function passedThrough({ status, body, retryAfter }: MemoryGatewayAnswer): AppError {
  const b = (typeof body === 'object' && body !== null ? body : {}) as {
    error?: unknown;
    message?: unknown;
    fields?: unknown;
    limit?: unknown;
  };
  const known = typeof b.error === 'string' && b.error in ERROR_STATUS && ERROR_STATUS[b.error as ErrorCode] === status;
  if (!known) return upstreamFailed(`The memory gateway answered ${status} in an unknown form`);
  const details: Record<string, unknown> = {};
  if (Array.isArray(b.fields)) details.fields = b.fields;
  if (typeof b.limit === 'number') details.limit = b.limit;
  const headers: Record<string, string> = retryAfter ? { 'Retry-After': retryAfter } : {};
  return new AppError(
    b.error as ErrorCode,
    typeof b.message === 'string' ? b.message : `memory gateway: ${String(b.error)}`,
    details,
    headers
  );
}

function timedOut(err: unknown): boolean {
  const name = (err as { name?: string; code?: string }).name;
  const code = (err as { code?: string }).code;
  return (
    name === 'TimeoutError' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'UND_ERR_CONNECT_TIMEOUT'
  );
}

function describe(err: unknown): string {
  const e = err as { code?: string; cause?: { code?: string }; message?: string };
  return e.code ?? e.cause?.code ?? e.message ?? 'unknown error';
}
