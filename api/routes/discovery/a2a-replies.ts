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
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: {
    http: 400,
    status: 'FAILED_PRECONDITION',
    message: 'There is no extended agent card (capabilities.extendedAgentCard: false)'
  },
  INVALID_PARAMS: { http: 400, status: 'INVALID_ARGUMENT', message: 'Request malformed' }
} as const satisfies Record<A2aRefusal, { http: number; status: string; message: string }>;

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

/** The ErrorInfo detail naming the A2A error, in both bindings. */
export const errorInfo = (reason: string) => ({
  '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
  reason,
  domain: 'a2a-protocol.org'
});

export function a2aError(
  reply: FastifyReply,
  httpStatus: number,
  message: string,
  reason?: string,
  statusName?: string
): FastifyReply {
  return reply.code(httpStatus).send({
    error: {
      code: httpStatus,
      status: statusName ?? STATUS_NAME[httpStatus] ?? (httpStatus >= 500 ? 'INTERNAL' : 'UNKNOWN'),
      message,
      details: reason ? [errorInfo(reason)] : []
    }
  });
}

/** Answers an A2A error of the HTTP+JSON binding. */
export const refuse = (reply: FastifyReply, reason: A2aRefusal, message?: string) =>
  a2aError(reply, REASONS[reason].http, message ?? REASONS[reason].message, reason, REASONS[reason].status);

/** Inside the binding's plugin every failure takes the binding's shape, so the SDKs can read it. */
export function a2aErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
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
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: -32007,
  INVALID_PARAMS: -32602
};

export type TaskStreamer = (
  request: FastifyRequest,
  reply: FastifyReply,
  first: TaskDocument,
  wrap?: (event: unknown) => unknown
) => Promise<void>;

/**
 * SSE of a task's updates (A2aTasks.follow) until it is final, the client leaves or A2A_STREAM_MAX_S passes; `wrap`
 * puts each StreamResponse in the binding's envelope. One per plugin: the server's close ends its streams.
 */
export function taskStreamer(app: FastifyInstance, a2a: A2aTasks): TaskStreamer {
  const streams = eventStreams(app);
  return async (request, reply, first, wrap = (event) => event) => {
    const sse = streams.open(request, reply);
    const updates = a2a.follow(first, sse.isOpen, (err) =>
      request.log.warn({ err }, 'a2a stream poll failed; retrying')
    );
    for await (const event of updates) {
      if (event === null) sse.keepAlive();
      else sse.write(`data: ${JSON.stringify(wrap(event))}\n\n`);
    }
    sse.end();
  };
}
