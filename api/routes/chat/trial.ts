/**
 * Trial chat (SPEC §2.6, §4.8): POST /try/chat (X-DID). Routing, in order:
 *   1. knowledge-card        a card whose question equals the last user message after normalisation
 *   2. semantic              the knowledge base's best passages (BM25+ over Chinese bigrams and English words), when
 *                            the best one's relevance reaches TRIAL_SEMANTIC_THRESHOLD; else, with an embeddings
 *                            model (TRIAL_EMBEDDINGS_MODEL), the nearest passage by cosine >= TRIAL_VECTOR_THRESHOLD
 *                            (TRIAL_SEMANTIC_COMPOSE=local: the first `local` model answers from those passages;
 *                            the passages themselves when it fails or times out)
 *   3. ark-external          the first configured model of kind `external` (with its fallbacks), within
 *                            TRIAL_EXTERNAL_TIMEOUT_MS
 *   4. local-1.5b-fallback   the first configured model of kind `local`, when the external call failed or timed out
 *   otherwise 503.
 * Limited to TRIAL_RATE_LIMIT requests per client address per TRIAL_RATE_WINDOW_S, across API processes (the chat
 * gateway's slot store, fixed windows); X-Forwarded-For is trusted only from TRIAL_TRUSTED_PROXIES.
 */
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { composeReply } from '../../../core/chat/knowledge';
import type { CatalogModel } from '../../../core/chat/providers';
import type { UpstreamBody } from '../../../core/chat/upstream.node';
import type { Config } from '../../../core/config.node';
import { AppError } from '../../../core/errors';
import type { KnowledgeStore } from '../../../store/chat/knowledge';
import { rateLimitKey } from '../../plugins/rate-limit-key';
import { clientAddress, trustedProxies } from '../../client-address';
import type { ChatServices } from '../../../services/chat/chat-services';
import { ERROR_BODY } from '../../response-docs';

/** The constant anchor string every trial answer carries in its `锚定` member (SPEC §2.6). */
export const TRIAL_ANCHOR = 'zhongshu-hub trial chat: answers are anchored in the hub knowledge base first';

export const TRIAL_SOURCES = ['knowledge-card', 'semantic', 'ark-external', 'local-1.5b-fallback'] as const;

/** The system message in front of the passages when the local model composes a semantic answer. */
const COMPOSE_PROMPT =
  'Answer the question from these passages of the hub knowledge base only, in the language of the question; if they do not answer it, say so.';

const message = z.object({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string().max(4000, 'at most 4,000 characters per message')
});
const body = z.object({
  messages: z
    .array(message)
    .min(1)
    .max(50)
    .describe('the question is the last user message with text (else the last message)')
});

const answer = z.object({
  ok: z.literal(true),
  reply: z.string(),
  source: z.enum(TRIAL_SOURCES),
  elapsed_ms: z.number().int(),
  锚定: z.string()
});

export const trialChatRoutes: FastifyPluginAsyncZod<{
  chat: ChatServices;
  knowledge: KnowledgeStore;
  config: Config;
}> = async (app, { chat, knowledge, config }) => {
  const trusted = trustedProxies(config.TRIAL_TRUSTED_PROXIES);
  const windowMs = config.TRIAL_RATE_WINDOW_S * 1000;
  // Vector similarity, when an embeddings model is configured: passages are embedded at each rebuild, the question
  // per request; the nearest passage answers when its cosine reaches TRIAL_VECTOR_THRESHOLD.
  const embeddingsModel = config.TRIAL_EMBEDDINGS_MODEL ? chat.catalog.model(config.TRIAL_EMBEDDINGS_MODEL) : undefined;
  if (config.TRIAL_EMBEDDINGS_MODEL && !embeddingsModel)
    throw new Error(
      `TRIAL_EMBEDDINGS_MODEL=${config.TRIAL_EMBEDDINGS_MODEL} is not a model of CHAT_PROVIDERS_FILE / CHAT_PROVIDERS`
    );
  const embed = embeddingsModel
    ? async (texts: string[], signal?: AbortSignal): Promise<number[][]> => {
        const provider = chat.catalog.provider(embeddingsModel.provider);
        // Floats, not the SDK's default base64: local servers (llama.cpp, Ollama) answer floats only.
        const res = await chat.upstreams
          .client(provider)
          .embeddings.create(
            { model: embeddingsModel.upstream, input: texts, encoding_format: 'float' },
            { signal, timeout: provider.timeout_ms }
          );
        return [...res.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
      }
    : null;
  if (embed) {
    knowledge.useEmbedder(
      (texts) => embed(texts),
      (err) =>
        app.log.warn(
          { model: embeddingsModel!.id, reason: chat.upstreams.redact((err as Error).message ?? '') },
          'trial chat: passages could not be embedded; retrieval is BM25 only until the next change'
        )
    );
  }

  // Indexed at start; a failure here (MongoDB not reachable yet) only means the first request builds it.
  await knowledge
    .rebuild()
    .catch((err: unknown) => app.log.warn({ err }, 'trial chat: knowledge index not built at start'));

  const admit = async (request: FastifyRequest) => {
    const now = Date.now();
    const windowNo = Math.floor(now / windowMs);
    const windowEnd = (windowNo + 1) * windowMs;
    const key = rateLimitKey({ ip: clientAddress(request, trusted) });
    const take = await chat.limits.take(`trial:${key}`, String(windowNo), config.TRIAL_RATE_LIMIT, windowEnd + 60_000);
    if (!take.allowed) {
      const retry = String(Math.max(1, Math.ceil((windowEnd - now) / 1000)));
      throw new AppError(
        'rate_limited',
        `Trial chat allows ${config.TRIAL_RATE_LIMIT} requests per ${config.TRIAL_RATE_WINDOW_S} s per address; retry after ${retry} s`,
        { limit: config.TRIAL_RATE_LIMIT },
        { 'Retry-After': retry }
      );
    }
  };

  const ask = async (
    chain: CatalogModel[],
    messages: z.infer<typeof message>[],
    timeoutMs: number,
    clientSignal: AbortSignal
  ): Promise<string> => {
    const signal = AbortSignal.any([clientSignal, AbortSignal.timeout(timeoutMs)]);
    const res = await chat.upstreams.complete(chain, { messages } as unknown as UpstreamBody, signal);
    const text = (res.value.choices ?? []).map((c) => c.message?.content ?? '').join('');
    if (!text.trim()) throw new Error('empty answer');
    return text;
  };

  app.post(
    '/try/chat',
    {
      config: { auth: 'did' },
      schema: {
        body,
        response: {
          200: answer.describe('The answer and which route gave it'),
          429: ERROR_BODY.describe(
            `More than TRIAL_RATE_LIMIT (default 5) requests from this address in TRIAL_RATE_WINDOW_S (default 600 s); Retry-After`
          ),
          503: ERROR_BODY.describe(
            'Nothing could answer: no card or passage matched and no external or local model answered (or MongoDB is unavailable)'
          )
        }
      }
    },
    async (request, reply) => {
      const started = performance.now();
      await admit(request);
      const { messages } = request.body;
      const question = (
        [...messages].reverse().find((m) => m.role === 'user' && m.content.trim()) ?? messages[messages.length - 1]!
      ).content;
      const done = (text: string, source: (typeof TRIAL_SOURCES)[number]) => ({
        ok: true as const,
        reply: text,
        source,
        elapsed_ms: Math.round(performance.now() - started),
        锚定: TRIAL_ANCHOR
      });

      const ac = new AbortController();
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) ac.abort();
      });
      /** A semantic answer: the passages, or (TRIAL_SEMANTIC_COMPOSE=local) the local model's answer from them. */
      const semantic = async (passages: string) => {
        const local = config.TRIAL_SEMANTIC_COMPOSE === 'local' ? chat.catalog.modelsFor(null, 'local')[0] : undefined;
        if (!local) return done(passages, 'semantic');
        try {
          const grounded = [{ role: 'system' as const, content: `${COMPOSE_PROMPT}\n\n${passages}` }, ...messages];
          return done(
            await ask(chat.catalog.chain(local.id), grounded, config.TRIAL_EXTERNAL_TIMEOUT_MS, ac.signal),
            'semantic'
          );
        } catch (err) {
          if (ac.signal.aborted) throw err;
          request.log.warn(
            { model: local.id, reason: chat.upstreams.redact((err as Error).message ?? 'failed') },
            'trial chat: the local model could not compose the answer; answering with the passages'
          );
          return done(passages, 'semantic');
        }
      };

      const index = await knowledge.current();
      const card = index.card(question);
      if (card) return done(card.answer, 'knowledge-card');
      const hits = index.retrieve(question);
      if (hits[0] && hits[0].relevance >= config.TRIAL_SEMANTIC_THRESHOLD)
        return semantic(composeReply(hits, config.TRIAL_SEMANTIC_THRESHOLD));
      if (embed && index.hasVectors) {
        try {
          const [vector] = await embed([question], AbortSignal.timeout(config.TRIAL_EXTERNAL_TIMEOUT_MS));
          const near = vector ? index.nearest(vector) : [];
          if (near[0] && near[0].cosine >= config.TRIAL_VECTOR_THRESHOLD) {
            return semantic(
              near
                .filter((h, i) => i === 0 || h.cosine >= config.TRIAL_VECTOR_THRESHOLD)
                .map((h) => h.passage.text)
                .join('\n\n')
            );
          }
        } catch (err) {
          request.log.warn(
            { model: embeddingsModel!.id, reason: chat.upstreams.redact((err as Error).message ?? '') },
            'trial chat: the question could not be embedded'
          );
        }
      }

      const failures: string[] = [];
      const external = chat.catalog.modelsFor(null, 'external')[0];
      if (external) {
        try {
          return done(
            await ask(chat.catalog.chain(external.id), messages, config.TRIAL_EXTERNAL_TIMEOUT_MS, ac.signal),
            'ark-external'
          );
        } catch (err) {
          if (ac.signal.aborted) throw err;
          failures.push(`external model ${external.id}: ${chat.upstreams.redact((err as Error).message ?? 'failed')}`);
          request.log.warn(
            { model: external.id, reason: failures.at(-1) },
            'trial chat: external inference failed; trying the local model'
          );
        }
      }
      const local = chat.catalog.modelsFor(null, 'local')[0];
      if (local) {
        try {
          return done(
            await ask(chat.catalog.chain(local.id), messages, config.TRIAL_EXTERNAL_TIMEOUT_MS, ac.signal),
            'local-1.5b-fallback'
          );
        } catch (err) {
          if (ac.signal.aborted) throw err;
          failures.push(`local model ${local.id}: ${chat.upstreams.redact((err as Error).message ?? 'failed')}`);
        }
      }
      throw new AppError(
        'unavailable',
        external || local
          ? `No answer: the knowledge base has none for this question and the models failed (${failures.join('; ')}); retry later`
          : 'No answer: the knowledge base has none for this question and no external or local model is configured (CHAT_PROVIDERS_FILE, kind external or local)',
        {},
        { 'Retry-After': '30' }
      );
    }
  );
};
