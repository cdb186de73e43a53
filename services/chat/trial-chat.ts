/**
 * The trial chat's answer (docs/chat.md#trial-chat-post-trychat-x-did), routed in order: a knowledge card, the
 * knowledge base's passages
 * (BM25+, else vector similarity with an embeddings model; composed by the local model when
 * TRIAL_SEMANTIC_COMPOSE=local), the first external model, the first local model; otherwise 503. Also the
 * per-address limit (TRIAL_RATE_LIMIT per TRIAL_RATE_WINDOW_S, across API processes: the chat gateway's slot store,
 * fixed windows).
 */
import { composeReply } from '../../core/chat/knowledge';
import type { CatalogModel } from '../../core/chat/providers';
import type { UpstreamBody } from '../../core/chat/upstream.node';
import type { ChatConfig } from '../../core/config.node';
import { AppError } from '../../core/errors';
import type { KnowledgeStore } from '../../store/chat/knowledge';
import type { ChatServices } from './chat-services';

export const TRIAL_SOURCES = ['knowledge-card', 'semantic', 'ark-external', 'local-1.5b-fallback'] as const;
export type TrialSource = (typeof TRIAL_SOURCES)[number];

export interface TrialMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** Where the trial chat's warnings go (a Fastify or pino logger). */
export interface TrialLog {
  warn(obj: object, msg: string): void;
}

export type TrialChatConfig = Pick<
  ChatConfig,
  | 'TRIAL_RATE_LIMIT'
  | 'TRIAL_RATE_WINDOW_S'
  | 'TRIAL_SEMANTIC_THRESHOLD'
  | 'TRIAL_EXTERNAL_TIMEOUT_MS'
  | 'TRIAL_EMBEDDINGS_MODEL'
  | 'TRIAL_VECTOR_THRESHOLD'
  | 'TRIAL_SEMANTIC_COMPOSE'
>;

/** The system message in front of the passages when the local model composes a semantic answer. */
const COMPOSE_PROMPT =
  'Answer the question from these passages of the hub knowledge base only, in the language of the question; if they do not answer it, say so.';

export type TrialChat = ReturnType<typeof createTrialChat>;

/** Throws when TRIAL_EMBEDDINGS_MODEL names no configured model (the API process does not start). */
export function createTrialChat(deps: {
  chat: Pick<ChatServices, 'catalog' | 'upstreams' | 'limits'>;
  knowledge: KnowledgeStore;
  config: TrialChatConfig;
}) {
  const { chat, knowledge, config } = deps;
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

  const ask = async (
    chain: CatalogModel[],
    messages: TrialMessage[],
    timeoutMs: number,
    clientSignal: AbortSignal
  ): Promise<string> => {
    const signal = AbortSignal.any([clientSignal, AbortSignal.timeout(timeoutMs)]);
    const res = await chat.upstreams.complete(chain, { messages } as unknown as UpstreamBody, signal);
    const text = (res.value.choices ?? []).map((c) => c.message?.content ?? '').join('');
    if (!text.trim()) throw new Error('empty answer');
    return text;
  };

  return {
    /** Hands the embedder to the knowledge base and builds its index (a failure only means the first request does). */
    async start(log: TrialLog): Promise<void> {
      if (embed) {
        knowledge.useEmbedder(
          (texts) => embed(texts),
          (err) =>
            log.warn(
              { model: embeddingsModel!.id, reason: chat.upstreams.redact((err as Error).message ?? '') },
              'trial chat: passages could not be embedded; retrieval is BM25 only until the next change'
            )
        );
      }
      // Indexed at start; a failure here (MongoDB not reachable yet) only means the first request builds it.
      await knowledge
        .rebuild()
        .catch((err: unknown) => log.warn({ err }, 'trial chat: knowledge index not built at start'));
    },

    /** Takes one request of the address's window (`addressKey`: api/plugins/rate-limit-key.ts), or throws 429. */
    async admit(addressKey: string): Promise<void> {
      const now = Date.now();
      const windowNo = Math.floor(now / windowMs);
      const windowEnd = (windowNo + 1) * windowMs;
      const take = await chat.limits.take(
        `trial:${addressKey}`,
        String(windowNo),
        config.TRIAL_RATE_LIMIT,
        windowEnd + 60_000
      );
      if (!take.allowed) {
        const retry = String(Math.max(1, Math.ceil((windowEnd - now) / 1000)));
        throw new AppError(
          'rate_limited',
          `Trial chat allows ${config.TRIAL_RATE_LIMIT} requests per ${config.TRIAL_RATE_WINDOW_S} s per address; retry after ${retry} s`,
          { limit: config.TRIAL_RATE_LIMIT },
          { 'Retry-After': retry }
        );
      }
    },

    /** The answer to the last user message with text (else the last message), and which route gave it. */
    async answer(
      messages: TrialMessage[],
      signal: AbortSignal,
      log: TrialLog
    ): Promise<{ text: string; source: TrialSource }> {
      const question = (
        [...messages].reverse().find((m) => m.role === 'user' && m.content.trim()) ?? messages[messages.length - 1]!
      ).content;
      const done = (text: string, source: TrialSource) => ({ text, source });

      /** A semantic answer: the passages, or (TRIAL_SEMANTIC_COMPOSE=local) the local model's answer from them. */
      const semantic = async (passages: string) => {
        const local = config.TRIAL_SEMANTIC_COMPOSE === 'local' ? chat.catalog.modelsFor(null, 'local')[0] : undefined;
        if (!local) return done(passages, 'semantic');
        try {
          const grounded = [{ role: 'system' as const, content: `${COMPOSE_PROMPT}\n\n${passages}` }, ...messages];
          return done(
            await ask(chat.catalog.chain(local.id), grounded, config.TRIAL_EXTERNAL_TIMEOUT_MS, signal),
            'semantic'
          );
        } catch (err) {
          if (signal.aborted) throw err;
          log.warn(
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
          log.warn(
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
            await ask(chat.catalog.chain(external.id), messages, config.TRIAL_EXTERNAL_TIMEOUT_MS, signal),
            'ark-external'
          );
        } catch (err) {
          if (signal.aborted) throw err;
          failures.push(`external model ${external.id}: ${chat.upstreams.redact((err as Error).message ?? 'failed')}`);
          log.warn(
            { model: external.id, reason: failures.at(-1) },
            'trial chat: external inference failed; trying the local model'
          );
        }
      }
      const local = chat.catalog.modelsFor(null, 'local')[0];
      if (local) {
        try {
          return done(
            await ask(chat.catalog.chain(local.id), messages, config.TRIAL_EXTERNAL_TIMEOUT_MS, signal),
            'local-1.5b-fallback'
          );
        } catch (err) {
          if (signal.aborted) throw err;
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
  };
}
