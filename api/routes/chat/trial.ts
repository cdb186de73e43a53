/**
 * Trial chat (docs/chat.md#trial-chat-post-trychat-x-did): POST /try/chat (X-DID). Routing, in order
 * (services/chat/trial-chat.ts):
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
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ChatConfig } from '../../../core/config.node';
import type { KnowledgeStore } from '../../../store/chat/knowledge';
import type { ChatServices } from '../../../services/chat/chat-services';
import { createTrialChat, TRIAL_SOURCES, TrialChatConfig } from '../../../services/chat/trial-chat';
import { clientAddress, trustedProxies } from '../../client-address';
import { rateLimitKey } from '../../plugins/rate-limit-key';
import { ERROR_BODY } from '../../response-docs';

/** The constant anchor string every trial answer carries in its `锚定` member (docs/chat.md, trial chat). */
export const TRIAL_ANCHOR = 'zhongshu-hub trial chat: answers are anchored in the hub knowledge base first';

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
  config: TrialChatConfig & Pick<ChatConfig, 'TRIAL_TRUSTED_PROXIES'>;
}> = async (app, { chat, knowledge, config }) => {
  const trusted = trustedProxies(config.TRIAL_TRUSTED_PROXIES);
  const trial = createTrialChat({ chat, knowledge, config });
  await trial.start(app.log);

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
      await trial.admit(rateLimitKey({ ip: clientAddress(request, trusted) }));
      const ac = new AbortController();
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) ac.abort();
      });
      const { text, source } = await trial.answer(request.body.messages, ac.signal, request.log);
      return {
        ok: true as const,
        reply: text,
        source,
        elapsed_ms: Math.round(performance.now() - started),
        锚定: TRIAL_ANCHOR
      };
    }
  );
};
