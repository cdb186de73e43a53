/**
 * The SDK's one way to the hub: JSON over Node's fetch, each request bounded by a timeout and by the client's stop
 * signal, with the waits the hub asks for (`Retry-After`) and the seed's backoff (1 s, 2 s, 4 s, … capped, with
 * jitter). Credentials travel in headers the SDK never logs.
 */

export type Fetch = typeof fetch;

export interface HubAnswer {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body; undefined when it is not JSON. */
  body: any;
}

/** The request never got an answer (connection refused or reset, timeout). */
export class NetworkError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NetworkError';
  }
}

/** An answer the SDK cannot go on with; `code` is the hub's error code when it sent one. */
export class HubError extends Error {
  readonly code: string | undefined;
  constructor(
    readonly status: number,
    message: string,
    body?: any
  ) {
    super(message);
    this.name = 'HubError';
    this.code = typeof body?.error === 'string' ? body.error : typeof body?.code === 'string' ? body.code : undefined;
  }
}

export interface HttpOptions {
  baseUrl: string;
  fetch?: Fetch;
  timeoutMs?: number;
}

export class HubHttp {
  readonly baseUrl: string;
  private readonly fetchImpl: Fetch;
  private readonly timeoutMs: number;

  constructor(options: HttpOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.fetchImpl = options.fetch ?? fetch;
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  async request(
    method: 'GET' | 'POST',
    path: string,
    options: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {}
  ): Promise<HubAnswer> {
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    let payload: string | undefined;
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(options.body);
    }
    const signals = [AbortSignal.timeout(this.timeoutMs)];
    if (options.signal) signals.push(options.signal);
    let res: Response;
    let text: string;
    try {
      res = await this.fetchImpl(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: payload,
        signal: AbortSignal.any(signals)
      });
      text = await res.text();
    } catch (err) {
      // Only the cause's name and message: never the request (its headers hold credentials).
      const e = err as Error & { cause?: { code?: string; message?: string } };
      const cause = e.cause?.code ?? e.cause?.message;
      throw new NetworkError(
        `${method} ${path}: ${e.name === 'TimeoutError' ? 'timed out' : e.message}${cause ? ` (${cause})` : ''}`
      );
    }
    let body: any;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, headers: res.headers, text, body };
  }
}

/** `Retry-After` in milliseconds (seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Answers that mean "later", not "never": the hub is busy, down or restarting. */
export const isTransient = (status: number) => status === 429 || status === 408 || status >= 500;

/**
 * The seed's exponential backoff: 1 s, 2 s, 4 s, … up to `capMs`, each with up to `jitter` of itself added, so a
 * fleet coming back after an outage does not beat in step. A `Retry-After` from the hub wins when it is longer.
 */
export class Backoff {
  private failures = 0;
  constructor(
    private readonly baseMs = 1000,
    private readonly capMs = 30_000,
    private readonly jitter = 0.1
  ) {}

  get attempts(): number {
    return this.failures;
  }

  /** The wait before the next attempt after one more failure. */
  next(retryAfter?: number): number {
    const exp = Math.min(this.capMs, this.baseMs * 2 ** Math.min(this.failures, 30));
    this.failures++;
    const delay = exp + exp * this.jitter * Math.random();
    return retryAfter !== undefined ? Math.max(retryAfter, delay) : delay;
  }

  reset(): void {
    this.failures = 0;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (a stopped client leaves no timer behind). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
