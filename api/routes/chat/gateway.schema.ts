/**
 * The answers of the OpenAI-compatible chat gateway (api/routes/chat/gateway.ts) in OpenAI's shapes: the model
 * list, a chat.completion, the SSE stream, and the usage report (also answered under /admin, api/routes/chat/admin.ts).
 */
import { z } from 'zod';

const modelObject = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string()
});
export const modelList = z.object({ object: z.literal('list'), data: z.array(modelObject) });
export const completionResponse = z.looseObject({
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

export const SSE_DESCRIPTION =
  'Server-Sent Events: `data: <chat.completion.chunk JSON>` per chunk, a usage chunk when stream_options.include_usage, then `data: [DONE]`';
