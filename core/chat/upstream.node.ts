/**
 * Calls to upstream providers, always through the `openai` SDK with the provider's base URL: one client per
 * provider (its key read from the environment variable the provider names, at first use), no SDK retries (this
 * module decides), and for each request the chain model → fallbacks. Before the first byte of an answer,
 * connection errors, timeouts, 429 and 5xx are retried with exponential backoff (honouring Retry-After, capped),
 * then the next model of the chain is tried; each provider has a circuit breaker (core/chat/circuit-breaker.ts).
 * Other upstream 4xx answers are the client's problem and are passed on as 400 (or 502 when the provider refused
 * our own credentials). No provider key ever reaches an error message: any text that reaches a client or a log is
 * passed through `redact`.
 */
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParams
} from 'openai/resources/chat/completions';
import type { Stream } from 'openai/streaming';
import { Agent } from 'undici';
import { CircuitBreakers } from './circuit-breaker';
import { ChatError, invalidRequest, upstreamFailed } from './openai-errors';
import { CatalogModel, CatalogProvider, ProviderCatalog } from './providers';
import { providerKey } from './providers.node';
import { upstreamFetch } from './upstream-fetch.node';

export interface UpstreamOptions {
  retries: number;
  retryMaxWaitMs: number;
  breakerFailures: number;
  breakerCooldownMs: number;
  env?: NodeJS.ProcessEnv;
  /** Waits between retries (tests shorten nothing: the real clock is used). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  onAttemptFailed?: (info: { model: string; provider: string; attempt: number; reason: string }) => void;
}

export type UpstreamResult<T> = { model: CatalogModel; provider: CatalogProvider; value: T; attempts: number };

/** The request body sent upstream: the client's fields, with the model replaced by the provider's name for it. */
export type UpstreamBody = Omit<ChatCompletionCreateParams, 'model' | 'stream'> & Record<string, unknown>;

const abortableSleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(new APIUserAbortError());
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new APIUserAbortError());
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });

export class ChatUpstreams {
  readonly breakers: CircuitBreakers;
  private readonly clients = new Map<string, OpenAI>();
  private readonly env: NodeJS.ProcessEnv;
  /** The keep-alive connections to every provider (see upstream-fetch.node.ts); closed by `close()`. */
  private readonly agent = new Agent({ keepAliveTimeout: 30_000 });
  private readonly fetch = upstreamFetch(this.agent);

  constructor(
    readonly catalog: ProviderCatalog,
    private readonly options: UpstreamOptions
  ) {
    this.breakers = new CircuitBreakers(options.breakerFailures, options.breakerCooldownMs);
    this.env = options.env ?? process.env;
  }

  client(provider: CatalogProvider): OpenAI {
    let c = this.clients.get(provider.name);
    if (!c) {
      c = new OpenAI({
        baseURL: provider.base_url,
        // Local servers (llama.cpp, Ollama, vLLM) need no key; the SDK requires a value, which they ignore.
        apiKey: providerKey(provider.api_key_env, this.env) ?? 'no-key',
        timeout: provider.timeout_ms,
        maxRetries: 0,
        fetch: this.fetch
      });
      this.clients.set(provider.name, c);
    }
    return c;
  }

  /** Closes the connections to the providers (calls in flight are cut off). */
  async close(): Promise<void> {
    await this.agent.destroy();
  }

  /** Replaces every configured provider key in `text` (an upstream's error message can echo one). */
  redact(text: string): string {
    let out = text;
    for (const p of this.catalog.providers.values()) {
      const key = providerKey(p.api_key_env, this.env);
      if (key && key.length >= 4) out = out.split(key).join('***');
    }
    return out;
  }

  /** A non-streaming completion through the chain. */
  complete(chain: CatalogModel[], body: UpstreamBody, signal: AbortSignal): Promise<UpstreamResult<ChatCompletion>> {
    return this.run(chain, signal, (client, model, provider) =>
      client.chat.completions.create(
        { ...body, model: model.upstream, stream: false } as ChatCompletionCreateParams & { stream: false },
        { signal, timeout: provider.timeout_ms }
      )
    );
  }

  /** A streaming completion through the chain: resolves once an upstream has answered 200 (before any chunk). */
  stream(
    chain: CatalogModel[],
    body: UpstreamBody,
    signal: AbortSignal
  ): Promise<UpstreamResult<Stream<ChatCompletionChunk>>> {
    return this.run(chain, signal, (client, model, provider) =>
      client.chat.completions.create(
        {
          ...body,
          model: model.upstream,
          stream: true,
          stream_options: { include_usage: true }
        } as ChatCompletionCreateParams & { stream: true },
        { signal, timeout: provider.timeout_ms }
      )
    );
  }

  private async run<T>(
    chain: CatalogModel[],
    signal: AbortSignal,
    call: (client: OpenAI, model: CatalogModel, provider: CatalogProvider) => Promise<T>
  ): Promise<UpstreamResult<T>> {
    const sleep = this.options.sleep ?? abortableSleep;
    let attempts = 0;
    const reasons: string[] = [];
    for (const model of chain) {
      const provider = this.catalog.provider(model.provider);
      for (let attempt = 0; attempt <= this.options.retries; attempt++) {
        if (!this.breakers.admit(provider.name)) {
          reasons.push(`${model.id}: provider ${provider.name} is cooling down`);
          break;
        }
        attempts++;
        try {
          const value = await call(this.client(provider), model, provider);
          this.breakers.success(provider.name);
          return { model, provider, value, attempts };
        } catch (err) {
          if (signal.aborted || err instanceof APIUserAbortError) {
            this.breakers.release(provider.name);
            throw err;
          }
          const verdict = this.classify(err);
          if (verdict.kind === 'client') {
            // The upstream answered: it is up, the request was refused.
            this.breakers.success(provider.name);
            throw verdict.error;
          }
          this.breakers.failure(provider.name, verdict.reason);
          reasons.push(`${model.id}: ${verdict.reason}`);
          this.options.onAttemptFailed?.({ model: model.id, provider: provider.name, attempt, reason: verdict.reason });
          if (attempt === this.options.retries) break;
          const backoff = verdict.retryAfterMs ?? 250 * 2 ** attempt;
          await sleep(Math.min(backoff, this.options.retryMaxWaitMs), signal);
        }
      }
    }
    throw upstreamFailed(`Every upstream failed (${attempts} attempts: ${this.redact(reasons.slice(-3).join('; '))})`);
  }

  private classify(
    err: unknown
  ): { kind: 'client'; error: ChatError } | { kind: 'retry'; reason: string; retryAfterMs?: number } {
    if (err instanceof APIConnectionError)
      return {
        kind: 'retry',
        reason: err.constructor.name === 'APIConnectionTimeoutError' ? 'timed out' : 'connection failed'
      };
    if (err instanceof APIError && typeof err.status === 'number') {
      const status = err.status;
      if (status === 429 || status >= 500 || status === 408)
        return { kind: 'retry', reason: `upstream answered ${status}`, retryAfterMs: retryAfterMs(err.headers) };
      if (status === 401 || status === 403) {
        // The provider refused our credentials: nothing the client can fix, and the message may quote the key.
        return {
          kind: 'client',
          error: upstreamFailed(`The upstream provider refused the gateway's credentials (${status})`)
        };
      }
      const message = this.redact(
        typeof err.error === 'object' && err.error && 'message' in err.error
          ? String((err.error as { message: unknown }).message)
          : err.message
      );
      return {
        kind: 'client',
        error: invalidRequest(`Upstream refused the request: ${message.slice(0, 500)}`, null, 'upstream_rejected')
      };
    }
    return { kind: 'retry', reason: `unexpected failure (${(err as Error)?.name ?? 'error'})` };
  }
}

/** Retry-After (seconds or an HTTP date) or retry-after-ms, in milliseconds. */
function retryAfterMs(headers: Headers | undefined): number | undefined {
  if (!headers) return undefined;
  const ms = Number(headers.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const raw = headers.get('retry-after');
  if (!raw) return undefined;
  const s = Number(raw);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(raw);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}
