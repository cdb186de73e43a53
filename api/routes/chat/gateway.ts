/**
 * The OpenAI-compatible chat gateway (auth `api_key`): GET /v1/models, POST /v1/chat/completions (JSON or SSE),
 * GET /v1/usage, and the federated nodes' always-streaming POST /v1/chat/stream. A client changes only its base URL:
 * answers, chunks and errors are in OpenAI's shapes.
 *
 * Per request: the key's plan (from its authentication), the model and the plan's permission for it, then the
 * limits (requests this minute and today, exact across processes; tokens today), then the upstream chain
 * (core/chat/upstream.node.ts). Streams are forwarded chunk by chunk as they arrive; a client that goes away
 * aborts the upstream call. Usage is recorded per request, from the upstream's own figures (the gateway always
 * asks a streaming upstream for them) or counted from the text when it gives none.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { APIUserAbortError } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { z } from 'zod';
import { ChatError, chatErrorFor, modelNotFound, modelNotPermitted } from '../../../core/chat/openai-errors';
import { mayUse, CatalogModel } from '../../../core/chat/providers';
import { costOf, estimatePromptTokens, estimateTokens, usageFrom, ChatUsage } from '../../../core/chat/usage';
import { unauthorized } from '../../../core/errors';
import { queryInt } from '../../../core/identifiers';
import type { UpstreamBody } from '../../../core/chat/upstream.node';
import type { ChatServices } from '../../chat';
import { confirmApiKey } from '../../plugins/auth/api-key';
import type { Principal } from '../../plugins/auth/principal';
import type { LimitTake } from '../../../store/chat/limits';
import {
  chatCompletionBody,
  ChatCompletionBody,
  installOpenAiErrorHandler,
  openAiErrorResponses
} from './openai-shape';

const modelObject = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string()
});
const modelList = z.object({ object: z.literal('list'), data: z.array(modelObject) });
const completionResponse = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.number(),
  model: z.string(),
  choices: z.array(z.looseObject({}))
});
const dailyUsage = z.object({
  day: z.string(),
  requests: z.number().int(),
  errors: z.number().int(),
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  cost: z.number(),
  estimated_requests: z.number().int()
});
export const usageResponse = z.object({
  object: z.literal('usage'),
  key_id: z.string(),
  plan: z.string(),
  limits: z.object({
    requests_per_minute: z.number().int(),
    requests_per_day: z.number().int(),
    tokens_per_day: z.number().int()
  }),
  days: z.array(dailyUsage).describe('newest first; days without requests are left out')
});

/** The scope an OAuth access token needs on POST /v1/chat/stream. */
export const OAUTH_CHAT_SCOPE = 'chat';

const SSE_DESCRIPTION =
  'Server-Sent Events: `data: <chat.completion.chunk JSON>` per chunk, a usage chunk when stream_options.include_usage, then `data: [DONE]`';

/** The UTC minute and day windows of `now`, and when each ends. */
export function windowsOf(now: number): { minute: string; minuteEnd: number; day: string; dayEnd: number } {
  const iso = new Date(now).toISOString();
  const minuteEnd = (Math.floor(now / 60_000) + 1) * 60_000;
  const dayEnd = Date.parse(`${iso.slice(0, 10)}T00:00:00Z`) + 86_400_000;
  return { minute: iso.slice(0, 16), minuteEnd, day: iso.slice(0, 10), dayEnd };
}

interface Admitted {
  keyId: string;
  day: string;
}

/**
 * An admitted request: its model chain and limits taken; when the key was answered from the process's cache, the
 * claims made under the cached plan and the store's verdict still to come (see `startUpstream`).
 */
interface Admission {
  chain: CatalogModel[];
  a: Admitted;
  unconfirmed: { claims: Claims; plan: string; verdict: Promise<Principal> } | null;
}

/** Errors that refused a request before its upstream call counted (no usage is recorded for them). */
const refusedBeforeUpstream = new WeakSet<object>();
const refusal = (err: unknown): unknown => {
  if (err && typeof err === 'object') refusedBeforeUpstream.add(err);
  return err;
};

/** What one request took of its key's limits (null: that store call failed). */
interface Claims {
  keyId: string;
  plan: string;
  now: number;
  w: ReturnType<typeof windowsOf>;
  rpmScope: string;
  rpdScope: string;
  rpm: LimitTake | null;
  rpd: LimitTake | null;
  tokens: number;
}

/**
 * `oauthPlan`: the plan whose models and limits an OAuth client gets on POST /v1/chat/stream (CHAT_OAUTH_PLAN); its
 * limits and usage are counted per client id, as `oauth:<client_id>`.
 */
export const chatGatewayRoutes: FastifyPluginAsyncZod<{ chat: ChatServices; oauthPlan?: string }> = async (
  app,
  { chat, oauthPlan = 'S1' }
) => {
  installOpenAiErrorHandler(app);
  const auth = 'api_key' as const;

  const keyOf = (request: FastifyRequest) => {
    const p = request.principal;
    if (p?.model === 'oauth' && request.routeOptions.config.authAlso?.includes('oauth')) {
      if (!p.scopes?.includes(OAUTH_CHAT_SCOPE))
        throw new ChatError(
          403,
          'permission_error',
          'insufficient_scope',
          `This access token lacks the scope '${OAUTH_CHAT_SCOPE}' (grant it to the OAuth client)`
        );
      return { keyId: `oauth:${p.id}`, plan: oauthPlan };
    }
    if (!p || p.model !== 'api_key') throw unauthorized('Authorization: Bearer zk_… API key is required');
    return { keyId: p.id, plan: p.plan ?? 'S1' };
  };

  const setRateHeaders = (reply: FastifyReply, limit: number, used: number, resetAt: number) => {
    reply.header('x-ratelimit-limit-requests', String(limit));
    reply.header('x-ratelimit-remaining-requests', String(Math.max(0, limit - used)));
    reply.header('x-ratelimit-reset-requests', `${Math.max(1, Math.ceil((resetAt - Date.now()) / 1000))}s`);
  };

  /** The rate headers from what this process knows, for answers that take no request (models, usage, 404s). */
  const knownRateHeaders = async (reply: FastifyReply, keyId: string, plan: string) => {
    const w = windowsOf(Date.now());
    setRateHeaders(
      reply,
      chat.planOf(plan).requests_per_minute,
      await chat.limits.known(`key:${keyId}:rpm`, w.minute),
      w.minuteEnd
    );
  };

  /**
   * Takes this request's uses of the key's limits all at once (the per-minute slot, the per-day slot, and today's
   * tokens read): three independent store calls in parallel rather than one after the other. When one of them
   * fails, the slots the others took are given back before the error goes on (no quota is lost).
   */
  const claim = async (keyId: string, plan: string): Promise<Claims> => {
    const limits = chat.planOf(plan);
    const now = Date.now();
    const w = windowsOf(now);
    const rpmScope = `key:${keyId}:rpm`;
    const rpdScope = `key:${keyId}:rpd`;
    const [rpm, rpd, tokens] = await Promise.allSettled([
      chat.limits.take(rpmScope, w.minute, limits.requests_per_minute, w.minuteEnd + 60_000),
      chat.limits.take(rpdScope, w.day, limits.requests_per_day, w.dayEnd + 3_600_000),
      chat.usage.tokensOn(keyId, w.day)
    ]);
    const claims: Claims = {
      keyId,
      plan,
      now,
      w,
      rpmScope,
      rpdScope,
      rpm: rpm.status === 'fulfilled' ? rpm.value : null,
      rpd: rpd.status === 'fulfilled' ? rpd.value : null,
      tokens: tokens.status === 'fulfilled' ? tokens.value : 0
    };
    const failed = [rpm, rpd, tokens].find((r) => r.status === 'rejected');
    if (failed) {
      await release(claims);
      throw failed.reason;
    }
    return claims;
  };

  /** Gives back the slots a claim took (for a request refused or not made after all). */
  const release = async (c: Claims, what: { rpm: boolean; rpd: boolean } = { rpm: true, rpd: true }): Promise<void> => {
    await Promise.all([
      what.rpm && c.rpm?.allowed ? chat.limits.refund(c.rpmScope, c.w.minute, c.rpm.count) : undefined,
      what.rpd && c.rpd?.allowed ? chat.limits.refund(c.rpdScope, c.w.day, c.rpd.count) : undefined
    ]);
  };

  /** Admits a claimed request, or gives back what it took and throws 429 (per minute) or 403 (daily quota). */
  const decide = async (reply: FastifyReply, c: Claims): Promise<Admitted> => {
    const limits = chat.planOf(c.plan);
    const { w, now, plan } = c;
    const rpm = c.rpm!;
    const rpd = c.rpd!;
    setRateHeaders(reply, limits.requests_per_minute, rpm.count, w.minuteEnd);
    const toMidnight = String(Math.max(1, Math.ceil((w.dayEnd - now) / 1000)));
    if (!rpm.allowed) {
      await release(c);
      const retry = String(Math.max(1, Math.ceil((w.minuteEnd - now) / 1000)));
      throw new ChatError(
        429,
        'rate_limit_error',
        'rate_limit_exceeded',
        `Rate limit reached: ${limits.requests_per_minute} requests per minute for plan ${plan}; retry after ${retry} s`,
        null,
        {
          'Retry-After': retry
        }
      );
    }
    if (!rpd.allowed) {
      await release(c);
      throw new ChatError(
        403,
        'insufficient_quota',
        'insufficient_quota',
        `Daily quota used up: ${limits.requests_per_day} requests per day for plan ${plan}`,
        null,
        { 'Retry-After': toMidnight }
      );
    }
    if (c.tokens >= limits.tokens_per_day) {
      await release(c);
      throw new ChatError(
        403,
        'insufficient_quota',
        'insufficient_quota',
        `Daily token quota used up: ${limits.tokens_per_day} tokens per day for plan ${plan}`,
        null,
        { 'Retry-After': toMidnight }
      );
    }
    return { keyId: c.keyId, day: w.day };
  };

  const chainFor = (modelId: string, plan: string): CatalogModel[] => {
    const model = chat.catalog.model(modelId);
    if (!model) throw modelNotFound(modelId, chat.catalog.models.size > 0);
    if (!mayUse(model, plan)) throw modelNotPermitted(modelId, plan);
    // Fallbacks the plan may not use are skipped.
    return chat.catalog.chain(modelId).filter((m) => mayUse(m, plan));
  };

  /** The model's chain for a plan; on a refusal the rate headers are set from what this process knows. */
  const chainOrRefuse = async (
    reply: FastifyReply,
    modelId: string,
    keyId: string,
    plan: string
  ): Promise<CatalogModel[]> => {
    try {
      return chainFor(modelId, plan);
    } catch (err) {
      await knownRateHeaders(reply, keyId, plan);
      throw err;
    }
  };

  /**
   * The model's chain for the caller's plan, then the caller's limits (rate headers are set on a refusal too).
   *
   * An API key the auth hook answered from its per-process cache (api/plugins/auth/api-key.ts: the same secret
   * digest as this process last verified) is still being read from the store: the claims are taken under the
   * cached plan meanwhile, and the admission carries the store's verdict, which `startUpstream` awaits before
   * anything reaches the client. A request refused here (429, 403) waits for the verdict first: a revoked key is
   * told 401, and a plan changed meanwhile is admitted again under the real plan (whose models are checked again).
   */
  /** Admits a request under a plan known from the store: the model's chain, then the limits. */
  const admitUnder = async (reply: FastifyReply, modelId: string, keyId: string, plan: string): Promise<Admission> => {
    const chain = await chainOrRefuse(reply, modelId, keyId, plan);
    return { chain, a: await decide(reply, await claim(keyId, plan)), unconfirmed: null };
  };

  const admitChain = async (request: FastifyRequest, reply: FastifyReply, modelId: string): Promise<Admission> => {
    const { keyId, plan } = keyOf(request);
    const confirmation = confirmApiKey(request);
    if (!confirmation) return admitUnder(reply, modelId, keyId, plan);
    /** On a refusal under the cached plan: the store's verdict decides (401, the same refusal, or the real plan). */
    const reconsider = async (err: unknown): Promise<Admission> => {
      const real = await confirmation;
      request.principal = real;
      const realPlan = real.plan ?? 'S1';
      if (realPlan === plan) throw err;
      return admitUnder(reply, modelId, keyId, realPlan);
    };
    let chain: CatalogModel[];
    try {
      chain = chainFor(modelId, plan);
    } catch (err) {
      return reconsider(err).catch(async (e: unknown) => {
        if (e === err) await knownRateHeaders(reply, keyId, plan);
        throw e;
      });
    }
    let claims: Claims;
    try {
      claims = await claim(keyId, plan);
    } catch (err) {
      await confirmation; // a revoked key is told so rather than a store failure
      throw err;
    }
    try {
      return { chain, a: await decide(reply, claims), unconfirmed: { claims, plan, verdict: confirmation } };
    } catch (err) {
      return reconsider(err);
    }
  };

  /**
   * Calls the upstream for an admitted request. For a request admitted on its key's cached verification the call
   * starts at once, beside the store read that confirms the key (the read is the one database round trip left on
   * a request's path; overlapping it with the upstream's time to answer takes it off the latency). Nothing reaches
   * the client before the verdict: a revoked key or a new secret aborts the upstream call, gives the claims back
   * and answers 401; a plan changed meanwhile aborts it and admits the request again under the real plan. So a
   * key revoked while a process holds it verified can start at most the requests in flight at that moment on
   * that process (aborted, never answered, never recorded); every later request verifies before it claims.
   */
  const startUpstream = async <T>(
    request: FastifyRequest,
    reply: FastifyReply,
    modelId: string,
    adm: Admission,
    signal: AbortSignal,
    call: (chain: CatalogModel[], signal: AbortSignal) => Promise<T>
  ): Promise<T> => {
    if (!adm.unconfirmed) return call(adm.chain, signal);
    const { claims, plan, verdict } = adm.unconfirmed;
    const attempt = new AbortController();
    const follow = () => attempt.abort();
    signal.addEventListener('abort', follow, { once: true });
    const started = call(adm.chain, attempt.signal);
    started.catch(() => undefined); // awaited below unless the verdict refuses
    try {
      let real: Principal;
      try {
        real = await verdict;
      } catch (err) {
        attempt.abort();
        await release(claims);
        throw refusal(err);
      }
      request.principal = real;
      const realPlan = real.plan ?? 'S1';
      if (realPlan === plan) return await started;
      attempt.abort();
      await release(claims);
      const again = await admitUnder(reply, modelId, claims.keyId, realPlan).catch((err: unknown) => {
        throw refusal(err);
      });
      adm.a = again.a;
      return await call(again.chain, signal);
    } finally {
      signal.removeEventListener('abort', follow);
    }
  };

  const record = (
    request: FastifyRequest,
    a: Admitted,
    r: {
      id: string;
      model: string;
      provider: string | null;
      endpoint: string;
      stream: boolean;
      usage: ChatUsage | null;
      price?: CatalogModel['price'];
      error: string | null;
    }
  ) => {
    const u = r.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, estimated: false };
    chat.usage
      .record({
        _id: r.id,
        key_id: a.keyId,
        day: a.day,
        at: new Date(),
        model: r.model,
        provider: r.provider,
        endpoint: r.endpoint,
        stream: r.stream,
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
        cost: r.price ? costOf(u, r.price) : 0,
        estimated: u.estimated,
        error: r.error,
        error_count: r.error ? 1 : 0,
        estimated_count: u.estimated ? 1 : 0
      })
      .catch((err: unknown) => request.log.error({ err, chat_request: r.id }, 'chat usage could not be recorded'));
  };

  /** The body sent upstream: everything the client sent but the fields the gateway decides. */
  const upstreamBody = (body: ChatCompletionBody): UpstreamBody => {
    const { model, stream, stream_options, ...rest } = body;
    return rest as unknown as UpstreamBody;
  };

  /** An AbortSignal that fires when the client goes away before the answer is complete. */
  const clientGone = (reply: FastifyReply): AbortController => {
    const ac = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) ac.abort();
    });
    return ac;
  };

  /** Streams one completion to the client as SSE (the upstream has answered 200 when this starts writing). */
  const streamCompletion = async (
    request: FastifyRequest,
    reply: FastifyReply,
    body: ChatCompletionBody,
    adm: Admission,
    endpoint: string,
    includeUsage: boolean
  ) => {
    const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
    const ac = clientGone(reply);
    let upstream;
    try {
      upstream = await startUpstream(request, reply, body.model, adm, ac.signal, (chain, signal) =>
        chat.upstreams.stream(chain, upstreamBody(body), signal)
      );
    } catch (err) {
      if (!(err instanceof APIUserAbortError) && !ac.signal.aborted && !refusedBeforeUpstream.has(err as object)) {
        record(request, adm.a, {
          id,
          model: body.model,
          provider: null,
          endpoint,
          stream: true,
          usage: null,
          error: err instanceof ChatError ? (err.code ?? 'error') : 'internal_error'
        });
      }
      throw err;
    }
    const a = adm.a;
    const { model, provider } = upstream;
    reply.hijack();
    const headers: Record<string, string> = {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      'x-trace': request.id
    };
    for (const [name, value] of Object.entries(reply.getHeaders()))
      if (name.startsWith('x-ratelimit-') && value !== undefined) headers[name] = String(value);
    reply.raw.writeHead(200, headers);
    let content = '';
    let reported: ChatCompletionChunk['usage'] | null = null;
    let created = Math.floor(Date.now() / 1000);
    let error: string | null = null;
    // The SDK ends an aborted stream's iteration silently (or not at all while a read is pending), so each read
    // races the client's departure.
    const aborted = new Promise<'aborted'>((resolve) => {
      if (ac.signal.aborted) resolve('aborted');
      ac.signal.addEventListener('abort', () => resolve('aborted'), { once: true });
    });
    const iterator = upstream.value[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await Promise.race([iterator.next(), aborted]);
        if (next === 'aborted') {
          upstream.value.controller.abort();
          error = 'client_closed';
          break;
        }
        if (next.done) {
          if (ac.signal.aborted) error = 'client_closed';
          break;
        }
        const chunk = next.value;
        if (chunk.usage) reported = chunk.usage;
        if (typeof chunk.created === 'number') created = chunk.created;
        for (const c of chunk.choices ?? []) if (typeof c.delta?.content === 'string') content += c.delta.content;
        const usageOnly = (chunk.choices ?? []).length === 0;
        if (usageOnly && !includeUsage) continue;
        const out: Record<string, unknown> = { ...chunk, id, model: body.model };
        if (!includeUsage) delete out.usage;
        reply.raw.write(`data: ${JSON.stringify(out)}\n\n`);
      }
    } catch (err) {
      if (ac.signal.aborted || err instanceof APIUserAbortError) error = 'client_closed';
      else {
        error = 'upstream_stream_failed';
        request.log.warn(
          { model: model.id, provider: provider.name, reason: chat.upstreams.redact((err as Error).message ?? '') },
          'upstream stream broke'
        );
      }
    }
    const usage = usageFrom(reported, () => ({
      prompt: estimatePromptTokens(body.messages),
      completion: estimateTokens(content)
    }));
    if (!reply.raw.destroyed) {
      if (error === 'upstream_stream_failed') {
        reply.raw.write(
          `data: ${JSON.stringify(chatErrorFor(502, 'The upstream stream broke off; retry later', 'upstream_failed').body())}\n\n`
        );
      } else if (!error) {
        if (includeUsage && !reported) {
          const { estimated: _estimated, ...figures } = usage;
          reply.raw.write(
            `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, choices: [], usage: figures })}\n\n`
          );
        }
        reply.raw.write('data: [DONE]\n\n');
      }
      reply.raw.end();
    }
    record(request, a, {
      id,
      model: model.id,
      provider: provider.name,
      endpoint,
      stream: true,
      usage,
      price: model.price,
      error
    });
  };

  app.get(
    '/v1/models',
    {
      config: { auth },
      schema: {
        response: {
          200: modelList.describe('The models this key may use (OpenAI list shape)'),
          ...openAiErrorResponses([401, 429, 500, 503])
        }
      }
    },
    async (request, reply) => {
      const { keyId, plan } = keyOf(request);
      await knownRateHeaders(reply, keyId, plan);
      const data = chat.catalog
        .modelsFor(plan)
        .map((m) => ({ id: m.id, object: 'model' as const, created: chat.catalog.created, owned_by: m.owned_by }));
      return { object: 'list' as const, data };
    }
  );

  app.post(
    '/v1/chat/completions',
    {
      config: { auth, apiKeyConfirmLater: true },
      schema: {
        body: chatCompletionBody,
        response: {
          200: {
            description: `A chat.completion (stream false), or with stream true ${SSE_DESCRIPTION}`,
            content: {
              'application/json': { schema: completionResponse },
              'text/event-stream': { schema: z.string().describe(SSE_DESCRIPTION) }
            }
          },
          ...openAiErrorResponses([400, 401, 403, 404, 413, 415, 429, 500, 502, 503])
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      const adm = await admitChain(request, reply, body.model);
      if (body.stream)
        return streamCompletion(
          request,
          reply,
          body,
          adm,
          '/v1/chat/completions',
          body.stream_options?.include_usage === true
        );

      const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
      const ac = clientGone(reply);
      let result;
      try {
        result = await startUpstream(request, reply, body.model, adm, ac.signal, (chain, signal) =>
          chat.upstreams.complete(chain, upstreamBody(body), signal)
        );
      } catch (err) {
        if (refusedBeforeUpstream.has(err as object)) throw err;
        const code =
          ac.signal.aborted || err instanceof APIUserAbortError
            ? 'client_closed'
            : err instanceof ChatError
              ? (err.code ?? 'error')
              : 'internal_error';
        record(request, adm.a, {
          id,
          model: body.model,
          provider: null,
          endpoint: '/v1/chat/completions',
          stream: false,
          usage: null,
          error: code
        });
        throw err;
      }
      const completion = result.value;
      const usage = usageFrom(completion.usage, () => ({
        prompt: estimatePromptTokens(body.messages),
        completion: estimateTokens((completion.choices ?? []).map((c) => c.message?.content ?? '').join(''))
      }));
      const { estimated: _estimated, ...figures } = usage;
      const out = { ...completion, id, model: body.model, usage: completion.usage ?? figures };
      record(request, adm.a, {
        id,
        model: result.model.id,
        provider: result.provider.name,
        endpoint: '/v1/chat/completions',
        stream: false,
        usage,
        price: result.model.price,
        error: null
      });
      return reply.type('application/json; charset=utf-8').send(JSON.stringify(out));
    }
  );

  app.post(
    '/v1/chat/stream',
    {
      // Federated nodes may also use an OAuth access token (POST /v1/oauth/token) in place of an API key.
      config: {
        auth,
        authAlso: ['oauth'],
        apiKeyConfirmLater: true,
        directory: { group: 'federated_compute', summary: 'Streaming chat over the gateway providers (always SSE)' }
      },
      schema: {
        body: chatCompletionBody,
        response: {
          200: {
            description: SSE_DESCRIPTION,
            content: { 'text/event-stream': { schema: z.string().describe(SSE_DESCRIPTION) } }
          },
          ...openAiErrorResponses([400, 401, 403, 404, 413, 415, 429, 500, 502, 503])
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      const adm = await admitChain(request, reply, body.model);
      // Always a stream, and always with the usage chunk unless the client said include_usage: false.
      return streamCompletion(
        request,
        reply,
        body,
        adm,
        '/v1/chat/stream',
        body.stream_options?.include_usage !== false
      );
    }
  );

  app.get(
    '/v1/usage',
    {
      // OAuth clients with the scope `chat` read what they used on POST /v1/chat/stream (as oauth:<client_id>).
      config: { auth, authAlso: ['oauth'] },
      schema: {
        querystring: z.object({
          days: queryInt(1, 90).optional().describe('how many days back, today included (default 7)')
        }),
        response: { 200: usageResponse, ...openAiErrorResponses([400, 401, 404, 429, 500, 503]) }
      }
    },
    async (request, reply) => {
      const { keyId, plan } = keyOf(request);
      await knownRateHeaders(reply, keyId, plan);
      return usageFor(chat, keyId, plan, request.query.days ?? 7);
    }
  );
};

/** A key's usage over the last `days` days (today included) and its plan's limits. */
export async function usageFor(
  chat: ChatServices,
  keyId: string,
  plan: string,
  days: number
): Promise<z.infer<typeof usageResponse>> {
  const to = new Date().toISOString().slice(0, 10);
  const from = new Date(Date.parse(`${to}T00:00:00Z`) - (days - 1) * 86_400_000).toISOString().slice(0, 10);
  const limits = chat.planOf(plan);
  return {
    object: 'usage' as const,
    key_id: keyId,
    plan,
    limits: {
      requests_per_minute: limits.requests_per_minute,
      requests_per_day: limits.requests_per_day,
      tokens_per_day: limits.tokens_per_day
    },
    days: await chat.usage.daily(keyId, from, to)
  };
}
