/** The chat gateway: providers and plans, upstream retries and breakers, key checks, trial chat, model chat. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { proxyList } from './values.node';

export const chatSettings = defineCapability({
  name: 'chat',
  title: 'Chat gateway, trial chat and model chat',
  page: 'docs/chat.md',
  readBy: ['api'],
  schema: z.object({
    CHAT_PROVIDERS_FILE: z
      .string()
      .min(1)
      .optional()
      .describe(
        "A JSON or YAML file of chat providers and models; each provider's key is read from the environment variable its `api_key_env` names, never from the file. Unset with CHAT_PROVIDERS unset: no models."
      )
      .meta(setting({ readBy: ['api', 'worker'] })),
    CHAT_PROVIDERS: z
      .string()
      .min(1)
      .optional()
      .describe("The same text inline (JSON or YAML); joined with the file's providers.")
      .meta(setting({ readBy: ['api', 'worker'] })),
    CHAT_PLANS: z
      .string()
      .min(2)
      .optional()
      .describe('JSON overriding plan numbers, e.g. {"S1":{"requests_per_minute":5}} (core/chat/plans.ts).'),
    CHAT_UPSTREAM_RETRIES: z.coerce
      .number()
      .int()
      .min(0)
      .max(10)
      .default(2)
      .describe('Retries of one upstream before its fallbacks.'),
    CHAT_RETRY_MAX_WAIT_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(60_000)
      .default(4000)
      .describe('The longest wait between retries, Retry-After included.'),
    CHAT_BREAKER_FAILURES: z.coerce
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(5)
      .describe("Failures in a row that open a provider's circuit breaker."),
    CHAT_BREAKER_COOLDOWN_S: z.coerce
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(30)
      .describe("How long a provider's open circuit breaker stays open."),
    CHAT_KEY_CACHE_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(60_000)
      .default(1000)
      .describe(
        'An API key verified this recently (same secret) is not read again for POST /v1/chat/completions and /v1/chat/stream; 0 reads it at every request. A revocation, new secret or plan change made through another API process counts there within this time; through the same process, at once.'
      ),
    KERNEL_PROMPT_FILE: z
      .string()
      .min(1)
      .optional()
      .describe('The system prompt injected in front of self-hosted model chat; unset: the built-in prompt.'),
    TRIAL_RATE_LIMIT: z.coerce
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(5)
      .describe('Trial chat requests per client address per window (across API processes); then 429.'),
    TRIAL_RATE_WINDOW_S: z.coerce
      .number()
      .int()
      .min(1)
      .max(86_400)
      .default(600)
      .describe("The trial chat rate limit's window in seconds."),
    TRIAL_TRUSTED_PROXIES: proxyList
      .default([])
      .describe('Proxies whose X-Forwarded-For the trial chat believes when it counts requests per client address.')
      .meta(setting({ allowed: 'comma-separated IP addresses and CIDR ranges (not /0)' })),
    TRIAL_SEMANTIC_THRESHOLD: z.coerce
      .number()
      .min(0)
      .max(1)
      .default(0.6)
      .describe('The least relevance of the best knowledge-base passage for a `semantic` answer.'),
    TRIAL_EXTERNAL_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(300_000)
      .default(15_000)
      .describe('How long the trial chat waits for the external model (then the local one, with the same limit).'),
    TRIAL_EMBEDDINGS_MODEL: z
      .string()
      .min(1)
      .optional()
      .describe(
        'A model of the chat providers that serves /embeddings: vector similarity beside BM25; unset: BM25 only.'
      ),
    TRIAL_VECTOR_THRESHOLD: z.coerce
      .number()
      .min(-1)
      .max(1)
      .default(0.8)
      .describe('The least cosine similarity of the nearest passage for a `semantic` answer by vectors.'),
    TRIAL_SEMANTIC_COMPOSE: z
      .enum(['passages', 'local'])
      .default('passages')
      .describe(
        '`local`: a `semantic` trial answer is written by the first model of kind `local` from the passages found (the passages when it fails or times out); `passages`: the passages themselves.'
      ),
    CHAT_OAUTH_PLAN: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,20}$/, 'a plan name such as S1')
      .default('S1')
      .describe('The plan (models, limits) of OAuth clients on POST /v1/chat/stream.')
      .meta(setting({ allowed: 'a plan name: letters, digits, _ and -, 1-20 characters' }))
  })
});
export type ChatConfig = z.infer<typeof chatSettings.schema>;
