/**
 * How the A2A binding answers (./a2a-binding.ts, ./a2a-jsonrpc.ts): errors in the binding's shape, not the hub's
 * (google.rpc.Status with an ErrorInfo whose reason the SDKs map to their error classes, or a JSON-RPC error code),
 * so A2A clients see typed errors; and a task's updates as Server-Sent Events.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { eventStreams } from '../../event-stream';
import { AppError } from '../../../core/errors';
import type { A2aRefusal, A2aTasks } from '../../../services/a2a/a2a-tasks';
import type { TaskDocument } from '../../../store/federation/tasks';
import { A2A_BASE_PATH } from '../../../services/a2a/interface';
import { rpcId } from './a2a-binding.schema';

/** The A2A error reasons this binding answers with, their HTTP status and google.rpc status name. */
export const REASONS = {
  TASK_NOT_FOUND: { http: 404, status: 'NOT_FOUND', message: 'Task not found' },
  TASK_NOT_CANCELABLE: {
    http: 409,
    status: 'FAILED_PRECONDITION',
    message: 'The task is in a final state and cannot be canceled'
  },
  UNSUPPORTED_OPERATION: { http: 400, status: 'FAILED_PRECONDITION', message: 'Unsupported operation' },
  CONTENT_TYPE_NOT_SUPPORTED: {
    http: 415,
    status: 'INVALID_ARGUMENT',
    message: 'Only text and JSON data parts (text/plain, application/json) are accepted'
  },
  PUSH_NOTIFICATION_NOT_SUPPORTED: {
    http: 400,
    status: 'FAILED_PRECONDITION',
    message: 'Push notifications are not supported (capabilities.pushNotifications: false)'
  },
  VERSION_NOT_SUPPORTED: {
    http: 400,
    status: 'FAILED_PRECONDITION',
    message: 'A2A-Version not supported'
  },
  INVALID_PARAMS: { http: 400, status: 'INVALID_ARGUMENT', message: 'Request malformed' }
} as const satisfies Record<A2aRefusal, { http: number; status: string; message: string }>;

/** GetExtendedAgentCard while the card says it has none (A2A v1.0 §3.3.4: UnsupportedOperationError). */
export const EXTENDED_CARD_REFUSAL =
  'There is no extended agent card (capabilities.extendedAgentCard: false): GetExtendedAgentCard is unsupported';

const STATUS_NAME: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ABORTED',
  413: 'RESOURCE_EXHAUSTED',
  414: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  503: 'UNAVAILABLE'
};

/** The ErrorInfo detail naming the A2A error, in both bindings (`metadata`: ErrorInfo's string map). */
export const errorInfo = (reason: string, metadata?: Record<string, string>) => ({
  '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
  reason,
  domain: 'a2a-protocol.org',
  ...(metadata ? { metadata } : {})
});

/** An A2A error raised by a hook (the version check): the error handler answers it in the binding's shape. */
export class A2aRefusalError extends Error {
  constructor(
    readonly reason: A2aRefusal,
    message: string,
    readonly metadata?: Record<string, string>
  ) {
    super(message);
    this.name = 'A2aRefusalError';
  }
}

export function a2aError(
  reply: FastifyReply,
  httpStatus: number,
  message: string,
  reason?: string,
  statusName?: string,
  metadata?: Record<string, string>
): FastifyReply {
  return reply.code(httpStatus).send({
    error: {
      code: httpStatus,
      status: statusName ?? STATUS_NAME[httpStatus] ?? (httpStatus >= 500 ? 'INTERNAL' : 'UNKNOWN'),
      message,
      details: reason ? [errorInfo(reason, metadata)] : []
    }
  });
}

/** Answers an A2A error of the HTTP+JSON binding. */
export const refuse = (reply: FastifyReply, reason: A2aRefusal, message?: string, metadata?: Record<string, string>) =>
  a2aError(reply, REASONS[reason].http, message ?? REASONS[reason].message, reason, REASONS[reason].status, metadata);

/** JSON-RPC's own error codes (JSON-RPC 2.0 §5.1), beside the A2A ones (JSONRPC_CODE). */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
export const JSONRPC_METHOD_NOT_FOUND = -32601;

/**
 * A JSON-RPC error response (A2A v1.0 §9.5), with HTTP 200: the A2A JSON-RPC binding carries errors in the body
 * and names no HTTP status for them; both reference SDKs' servers answer 200.
 */
export function rpcError(
  reply: FastifyReply,
  id: string | number | null,
  code: number,
  message: string,
  data?: unknown[]
): FastifyReply {
  // An id the request schema refuses (a string over 200 characters) cannot be echoed: JSON-RPC's null then.
  const echoed = rpcId.safeParse(id).success ? id : null;
  return reply
    .code(200)
    .type('application/json')
    .send({ jsonrpc: '2.0', id: echoed, error: { code, message, ...(data ? { data } : {}) } });
}

/** Whether a failure is the request body's JSON failing to parse (api/plugins/json-body.ts, core/strict-json.ts). */
const BODY_PARSE_CODES = new Set([
  'invalid_json',
  'invalid_utf8',
  'json_too_deep',
  'duplicate_member',
  'lone_surrogate',
  'noncharacter',
  'number_out_of_range',
  'number_too_precise',
  'FST_ERR_CTP_INVALID_JSON_BODY',
  'FST_ERR_CTP_EMPTY_JSON_BODY'
]);
const isBodyParseError = (err: FastifyError) =>
  (err instanceof AppError || typeof err.code === 'string') && BODY_PARSE_CODES.has(err.code);
/** Whether a failure is a body of a media type other than JSON (or JSON in a charset other than UTF-8). */
const isMediaTypeError = (err: FastifyError) =>
  err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || err.code === 'unsupported_media_type';

/** The binding's JSON-RPC route (./a2a-jsonrpc.ts): its body failures are JSON-RPC errors. */
export const JSONRPC_PATH = `${A2A_BASE_PATH}/jsonrpc`;
/** Whether a request was routed to the JSON-RPC binding (its path, with or without the trailing slash). */
export const isJsonRpcRoute = (request: FastifyRequest) =>
  request.routeOptions.url === JSONRPC_PATH || request.routeOptions.url === `${JSONRPC_PATH}/`;

/**
 * Inside the binding's plugin every failure takes the binding's shape, so the SDKs can read it: an A2A error raised
 * by a hook (A2aRefusalError); on the JSON-RPC route a body that is not valid JSON (-32700 Parse error) or not JSON at
 * all (-32005 ContentTypeNotSupported), both with id null (none can be read); the rest as the HTTP+JSON binding's
 * errors.
 */
export function a2aErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (err instanceof A2aRefusalError) return refuse(reply, err.reason, err.message, err.metadata);
  if (isJsonRpcRoute(request) && isBodyParseError(err))
    return rpcError(reply, null, JSONRPC_PARSE_ERROR, `Parse error: ${err.message}`);
  // As the reference SDKs' JSON-RPC servers answer a body that is not application/json.
  if (isJsonRpcRoute(request) && isMediaTypeError(err))
    return rpcError(
      reply,
      null,
      JSONRPC_CODE.CONTENT_TYPE_NOT_SUPPORTED,
      `Content type not supported: send the JSON-RPC request as application/json (${err.message})`,
      [errorInfo('CONTENT_TYPE_NOT_SUPPORTED')]
    );
  if (hasZodFastifySchemaValidationErrors(err) || err.validation)
    return a2aError(reply, 400, `Request malformed: ${err.message}`, 'INVALID_PARAMS');
  const status = err instanceof AppError ? err.status : (err.statusCode ?? 500);
  if (status >= 500) {
    request.log.error({ err }, 'request failed');
    return a2aError(
      reply,
      status,
      status === 503 ? 'Unavailable; retry later' : 'Internal error; quote the X-Trace header when reporting it'
    );
  }
  return a2aError(reply, status, err.message);
}

/** JSON-RPC binding: the A2A error codes (and JSON-RPC's own for malformed params). */
export const JSONRPC_CODE: Record<A2aRefusal, number> = {
  TASK_NOT_FOUND: -32001,
  TASK_NOT_CANCELABLE: -32002,
  PUSH_NOTIFICATION_NOT_SUPPORTED: -32003,
  UNSUPPORTED_OPERATION: -32004,
  CONTENT_TYPE_NOT_SUPPORTED: -32005,
  VERSION_NOT_SUPPORTED: -32009,
  INVALID_PARAMS: -32602
};

export type TaskStreamer = (
  request: FastifyRequest,
  reply: FastifyReply,
  first: TaskDocument,
  opts?: { wrap?: (event: unknown) => unknown; untilInterrupted?: boolean }
) => Promise<void>;

/**
 * SSE of a task's updates (A2aTasks.follow) until it is final, the client leaves or A2A_STREAM_MAX_S passes; `wrap`
 * puts each StreamResponse in the binding's envelope. One per plugin: the server's close ends its streams.
 */
export function taskStreamer(app: FastifyInstance, a2a: A2aTasks): TaskStreamer {
  const streams = eventStreams(app);
  return async (request, reply, first, { wrap = (event: unknown) => event, untilInterrupted = false } = {}) => {
    const sse = streams.open(request, reply);
    const updates = a2a.follow(
      first,
      sse.isOpen,
      (err) => request.log.warn({ err }, 'a2a stream poll failed; retrying'),
      untilInterrupted
    );
    for await (const event of updates) {
      if (event === null) sse.keepAlive();
      else sse.write(`data: ${JSON.stringify(wrap(event))}\n\n`);
    }
    sse.end();
  };
}
