/**
 * Chat completions through the gateway: admission (services/chat/admission.ts), the upstream chain
 * (core/chat/upstream.node.ts), the answer as one chat.completion or as Server-Sent Events forwarded chunk by chunk,
 * and the request's usage record. A client that goes away aborts the upstream call. Usage comes from the
 * upstream's own figures (the gateway always asks a streaming upstream for them) or is counted from the text when
 * it gives none.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { APIUserAbortError } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { ChatError, chatErrorFor } from '../../core/chat/openai-errors';
import type { CatalogModel } from '../../core/chat/providers';
import type { UpstreamBody } from '../../core/chat/upstream.node';
import { costOf, estimatePromptTokens, estimateTokens, usageFrom, ChatUsage } from '../../core/chat/usage';
import { Admission, ChatAdmission, ChatCaller, KeyVerdict, wasRefusedBeforeUpstream } from './admission';
import type { ChatServices } from './chat-services';
import type { Admitted } from './key-limits';

/** A chat completion request as the routes validated it; every other field passes to the upstream as sent. */
export interface CompletionRequest {
  model: string;
  messages: { content?: unknown }[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
}

/** The body sent upstream: everything the client sent but the fields the gateway decides. */
const upstreamBody = (body: CompletionRequest): UpstreamBody => {
  const { model: _model, stream: _stream, stream_options: _options, ...rest } = body;
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

const completionId = () => `chatcmpl-${randomBytes(12).toString('hex')}`;

export type ChatCompletions = ReturnType<typeof createChatCompletions>;

export function createChatCompletions(chat: Pick<ChatServices, 'upstreams' | 'usage'>, admission: ChatAdmission) {
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

  /** Streams one completion to the client as SSE (the upstream has answered 200 when this starts writing). */
  const streamCompletion = async <V extends KeyVerdict>(
    request: FastifyRequest,
    reply: FastifyReply,
    caller: ChatCaller<V>,
    body: CompletionRequest,
    adm: Admission<V>,
    endpoint: string,
    includeUsage: boolean
  ) => {
    const id = completionId();
    const ac = clientGone(reply);
    let upstream;
    try {
      upstream = await admission.startUpstream(caller, reply, body.model, adm, ac.signal, (chain, signal) =>
        chat.upstreams.stream(chain, upstreamBody(body), signal)
      );
    } catch (err) {
      if (!(err instanceof APIUserAbortError) && !ac.signal.aborted && !wasRefusedBeforeUpstream(err)) {
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

  /** Answers one completion as a chat.completion JSON body. */
  const completeOnce = async <V extends KeyVerdict>(
    request: FastifyRequest,
    reply: FastifyReply,
    caller: ChatCaller<V>,
    body: CompletionRequest,
    adm: Admission<V>
  ) => {
    const id = completionId();
    const ac = clientGone(reply);
    let result;
    try {
      result = await admission.startUpstream(caller, reply, body.model, adm, ac.signal, (chain, signal) =>
        chat.upstreams.complete(chain, upstreamBody(body), signal)
      );
    } catch (err) {
      if (wasRefusedBeforeUpstream(err)) throw err;
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
  };

  return {
    /** POST /v1/chat/completions: one chat.completion, or with `stream` true SSE (usage chunk when asked for). */
    async completions<V extends KeyVerdict>(
      request: FastifyRequest,
      reply: FastifyReply,
      caller: ChatCaller<V>,
      body: CompletionRequest
    ) {
      const adm = await admission.admit(caller, reply, body.model);
      if (body.stream)
        return streamCompletion(
          request,
          reply,
          caller,
          body,
          adm,
          '/v1/chat/completions',
          body.stream_options?.include_usage === true
        );
      return completeOnce(request, reply, caller, body, adm);
    },

    /** POST /v1/chat/stream: always a stream, with the usage chunk unless the client said include_usage: false. */
    async stream<V extends KeyVerdict>(
      request: FastifyRequest,
      reply: FastifyReply,
      caller: ChatCaller<V>,
      body: CompletionRequest
    ) {
      const adm = await admission.admit(caller, reply, body.model);
      return streamCompletion(
        request,
        reply,
        caller,
        body,
        adm,
        '/v1/chat/stream',
        body.stream_options?.include_usage !== false
      );
    }
  };
}
