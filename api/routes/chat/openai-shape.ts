/**
 * What the OpenAI-compatible routes share: the error handler answering in OpenAI's error body (so OpenAI SDKs raise
 * their own error classes), the error response schemas for the OpenAPI document, and the request body schema of a
 * chat completion (docs/chat.md#routes; every other OpenAI field is passed to the upstream as sent).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError } from '../../../core/errors';
import { ChatError, chatErrorFor, fromAppError, invalidRequest } from '../../../core/chat/openai-errors';
import { confirmApiKey } from '../../plugins/auth/api-key';
import { isMongoUnavailable, isTemporalUnavailable } from '../../plugins/errors';

export const OPENAI_ERROR = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      param: z.string().nullable(),
      code: z.string().nullable()
    })
  })
  .describe('OpenAI error body');

/** Every error status the OpenAI-compatible routes answer, each in OpenAI's body. */
export function openAiErrorResponses(statuses: number[]): Record<number, typeof OPENAI_ERROR> {
  const descriptions: Record<number, string> = {
    400: 'Invalid request (param names the field)',
    401: 'No API key, or a wrong or revoked one',
    403: 'The key may not use this model, or its daily quota is used up',
    404: 'Unknown model',
    413: 'Body too large',
    415: 'Body is not application/json',
    429: 'Rate limited: Retry-After and x-ratelimit-* headers',
    500: 'Internal error',
    502: 'Every upstream failed (or is cooling down); retry later',
    503: 'A dependency (MongoDB) is unavailable; retry later'
  };
  return Object.fromEntries(statuses.map((s) => [s, OPENAI_ERROR.describe(descriptions[s] ?? 'Error')]));
}

export function sendOpenAiError(reply: FastifyReply, err: ChatError): FastifyReply {
  reply.header('X-Trace', reply.request.id);
  for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
  return reply.code(err.status).type('application/json; charset=utf-8').send(JSON.stringify(err.body()));
}

/** The error handler of the OpenAI-compatible routes (installed in their plugin: it covers their auth hook too). */
export function installOpenAiErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler(async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    let err = error;
    // A key answered from the auth cache whose store read is still running: a revoked key or a changed secret
    // answers 401, whatever else went wrong (a bad body, an unknown model), as when it is verified first.
    const confirmation = confirmApiKey(request);
    if (confirmation) {
      try {
        await confirmation;
      } catch (refusal) {
        err = refusal as FastifyError;
      }
    }
    if (err instanceof ChatError) {
      if (err.status >= 500) request.log.warn({ code: err.code, message: err.message }, 'chat request failed');
      return sendOpenAiError(reply, err);
    }
    if (err instanceof AppError) {
      if (err.status >= 500) request.log.error({ err }, 'request failed');
      return sendOpenAiError(reply, fromAppError(err));
    }
    if (err.validation) {
      const first = err.validation[0];
      const where = err.validationContext ?? 'body';
      const path = first?.instancePath.replace(/^\//, '').replace(/\//g, '.') ?? '';
      const param = path || where;
      const message = err.validation
        .map((v) => `${v.instancePath.replace(/^\//, '').replace(/\//g, '.') || where}: ${v.message ?? 'is invalid'}`)
        .join('; ');
      return sendOpenAiError(reply, invalidRequest(`Invalid request: ${message}`, param));
    }
    const status = err.statusCode ?? 500;
    if (status === 413 || err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return sendOpenAiError(reply, chatErrorFor(413, 'Request body is too large', 'payload_too_large'));
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
      return sendOpenAiError(reply, chatErrorFor(415, 'Send the body as application/json', 'unsupported_media_type'));
    if (status >= 400 && status < 500) return sendOpenAiError(reply, chatErrorFor(status, err.message));
    if (isMongoUnavailable(err) || isTemporalUnavailable(err)) {
      request.log.error({ err }, 'dependency unavailable');
      reply.header('Retry-After', '5');
      return sendOpenAiError(reply, chatErrorFor(503, 'The database is unavailable; retry later', 'unavailable'));
    }
    request.log.error({ err }, 'request failed');
    return sendOpenAiError(
      reply,
      chatErrorFor(500, 'Internal error; quote the X-Trace header when reporting it', 'internal_error')
    );
  });
}

const text = z.string().max(1_000_000);
const contentPart = z.looseObject({ type: z.string().min(1).max(64) });

export const chatMessage = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z.union([text, z.array(contentPart).max(200), z.null()]).optional(),
  name: z.string().min(1).max(64).optional()
});

export const modelField = z.string().min(1).max(128).describe('a model id from GET /v1/models');

/** The body of docs/chat.md#routes, plus the OpenAI fields the gateway itself acts on; others pass through upstream. */
export const chatCompletionBody = z.looseObject({
  model: modelField,
  messages: z.array(chatMessage).min(1).max(2000),
  temperature: z.number().min(0).max(2).default(1).describe('0 to 2, default 1.0'),
  max_tokens: z.number().int().min(1).max(10_000_000).optional(),
  max_completion_tokens: z.number().int().min(1).max(10_000_000).optional(),
  stream: z.boolean().default(false),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  n: z.number().int().min(1).max(1).optional().describe('only 1 is supported'),
  user: z.string().max(256).optional()
});
export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;
