/**
 * Errors of the OpenAI-compatible routes (/v1/models, /v1/chat/*, /v1/usage) in OpenAI's body,
 *   { "error": { "message", "type", "param", "code" } }
 * so OpenAI SDKs raise their own classes (AuthenticationError, PermissionDeniedError, NotFoundError,
 * RateLimitError, BadRequestError, InternalServerError). The service's own error codes (core/errors.ts) are mapped
 * here; the chat routes install an error handler that answers with this shape.
 */
import { AppError } from '../errors';

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export class ChatError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    readonly code: string | null,
    message: string,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {}
  ) {
    super(message);
    this.name = 'ChatError';
  }

  body(): OpenAiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const invalidRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new ChatError(400, 'invalid_request_error', code, message, param);

export const modelNotFound = (model: string, configured: boolean) =>
  new ChatError(
    404,
    'invalid_request_error',
    'model_not_found',
    configured
      ? `The model '${model}' does not exist; GET /v1/models lists the models this key may use`
      : `The model '${model}' does not exist: no provider is configured. Set CHAT_PROVIDERS_FILE (or CHAT_PROVIDERS) to a provider list, see docs/chat.md#providers`,
    'model'
  );

export const modelNotPermitted = (model: string, plan: string) =>
  new ChatError(
    403,
    'permission_error',
    'model_not_permitted',
    `Plan ${plan} may not use the model '${model}'`,
    'model'
  );

export const upstreamFailed = (message: string) =>
  new ChatError(502, 'upstream_error', 'upstream_failed', `${message}; retry later`);

/** The OpenAI error type for a status (what the SDK's classes correspond to). */
function typeFor(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'invalid_request_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return status === 503 ? 'service_unavailable' : 'server_error';
  return 'invalid_request_error';
}

/** The service's own errors (auth, JSON body, validation, outages) in OpenAI's shape. */
export function fromAppError(err: AppError): ChatError {
  const fields = (err.details.fields as { field: string; message: string }[] | undefined) ?? [];
  const param = fields[0]?.field.replace(/^body\./, '') ?? null;
  const code = err.code === 'unauthorized' ? 'invalid_api_key' : err.code;
  return new ChatError(err.status, typeFor(err.status), code, err.message, param, err.headers);
}

export const chatErrorFor = (
  status: number,
  message: string,
  code: string | null = null,
  param: string | null = null
) => new ChatError(status, typeFor(status), code, message, param);
