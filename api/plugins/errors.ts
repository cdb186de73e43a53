/**
 * One error handler for the whole app: every failure reaches the client as
 *   { ok: false, error: <code>, message: <text>, trace_id: <X-Trace>, ...details }
 * with an X-Trace header. Validation failures become a 400 naming each bad field; unknown paths a 404; a known
 * path with another method a 405 with Allow; dependency outages (MongoDB, Temporal) and a truth write the database
 * failed a 503 with Retry-After; 5xx details stay in the log. Fastify's own errors before routing (bad URL, over-long path parameter) and Node's
 * HTTP parser errors (oversized headers, malformed requests) are answered in the same shape.
 */
import { randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay, { HTTPMethod } from 'find-my-way';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { isGrpcServiceError, ServiceError } from '@temporalio/client';
import { MongoError, MongoServerError } from 'mongodb';
import { AppError, ERROR_STATUS, ErrorCode } from '../../core/errors';
import { MAX_PATH_PARAM_LENGTH } from '../../core/identifiers';
import { TruthWriteFailed } from '../../services/ledger/write-truth';

export interface FieldProblem {
  field: string;
  message: string;
}

/** The one error shape, for an answer with this trace id. */
export function errorBody(
  err: AppError,
  traceId: string
): { ok: false; error: ErrorCode; message: string; trace_id: string } & Record<string, unknown> {
  return { ok: false, error: err.code, message: err.message, trace_id: traceId, ...err.details };
}

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  reply.header('X-Trace', reply.request.id);
  for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
  return reply.code(err.status).send(errorBody(err, reply.request.id));
}

/** When a body breaks several rules that carry their own code, the one docs/ledger.md#writing names first wins. */
const CODE_PRIORITY: ErrorCode[] = ['empty_value_rejected', 'value_must_be_object', 'invalid_key'];

/**
 * Validation issues as { field, message }. A schema may attach a domain error code to an issue (params.code);
 * then the response carries that code and that issue's message.
 */
function readValidation(err: FastifyError): { problems: FieldProblem[]; code: ErrorCode; message: string } {
  const where = err.validationContext ?? 'body';
  const coded: { code: ErrorCode; message: string }[] = [];
  const problems = (err.validation ?? []).map((v) => {
    const attached = ((v.params ?? {}) as { params?: { code?: string } }).params?.code;
    const pathPart = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
    const problem = { field: pathPart ? `${where}.${pathPart}` : where, message: v.message ?? 'is invalid' };
    if (attached && attached in ERROR_STATUS) coded.push({ code: attached as ErrorCode, message: problem.message });
    return problem;
  });
  const rank = (c: ErrorCode) => (CODE_PRIORITY.includes(c) ? CODE_PRIORITY.indexOf(c) : CODE_PRIORITY.length);
  const chosen = coded.sort((a, b) => rank(a.code) - rank(b.code))[0];
  if (chosen) return { problems, code: chosen.code, message: chosen.message };
  return {
    problems,
    code: 'invalid_request',
    message: `Invalid request: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}`
  };
}

const unavailable = (what: string) =>
  new AppError('unavailable', `${what} is unavailable; retry later`, {}, { 'Retry-After': '5' });

function errorsPlugin(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      // A write shed by admission control is the overload working as designed, not a failure: counted and logged
      // once per interval by the gate (api/plugins/admission.ts), not here once per refusal (a line with a stack
      // for each of thousands of refusals a second would add to the overload it sheds).
      if (err.status >= 500 && err.code !== 'overloaded') request.log.error({ err }, 'request failed');
      return sendError(reply, err);
    }
    if (hasZodFastifySchemaValidationErrors(err) || err.validation) {
      const { problems, code, message } = readValidation(err);
      return sendError(reply, new AppError(code, message, { fields: problems }));
    }
    const status = err.statusCode ?? 500;
    if (status === 413 || err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return sendError(reply, new AppError('payload_too_large', 'Request body is larger than this endpoint accepts'));
    }
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return sendError(reply, new AppError('unsupported_media_type', 'Send the body as application/json'));
    }
    if (status >= 400 && status < 500) {
      // Fastify's own client errors (an invalid content length, …): safe to say.
      const code: ErrorCode = status === 429 ? 'rate_limited' : status === 404 ? 'not_found' : 'invalid_request';
      return sendError(reply, new AppError(code, err.message));
    }
    // A truth write the database failed: an outage is answered as any other (below); any other failure (FerretDB
    // refusing a write while it stops or starts, say) is not the caller's doing either, and nothing was
    // acknowledged: 503, and a retry with the same Idempotency-Key lands the write exactly once.
    if (err instanceof TruthWriteFailed && !isMongoUnavailable(err.cause)) {
      request.log.error({ err: err.cause }, 'truth write: the database failed');
      return sendError(
        reply,
        new AppError(
          'unavailable',
          'The ledger could not store the write; retry with the same Idempotency-Key',
          {},
          { 'Retry-After': '5' }
        )
      );
    }
    if (isMongoUnavailable(err instanceof TruthWriteFailed ? err.cause : err)) {
      request.log.error({ err }, 'database unavailable');
      return sendError(reply, unavailable('The database'));
    }
    if (isTemporalUnavailable(err)) {
      request.log.error({ err }, 'Temporal unavailable');
      return sendError(reply, unavailable('The workflow service'));
    }
    // "internal error": the line to look for (the test harness prints it when a suite ends: test/support/service.ts).
    request.log.error({ err }, 'internal error');
    return sendError(reply, new AppError('internal_error', 'Internal error; quote trace_id when reporting it'));
  });

  // Every route of this app, to tell an unknown path (404) from a known path asked with another method (405).
  const routes = FindMyWay({
    ignoreTrailingSlash: false,
    ignoreDuplicateSlashes: false,
    maxParamLength: MAX_PATH_PARAM_LENGTH
  });
  const methods = new Set<HTTPMethod>();
  app.addHook('onRoute', (route) => {
    for (const m of Array.isArray(route.method) ? route.method : [route.method]) {
      const method = m.toUpperCase() as HTTPMethod;
      methods.add(method);
      if (!routes.hasRoute(method, route.url)) routes.on(method, route.url, () => undefined);
    }
  });

  const allowedOn = (request: FastifyRequest, path: string) =>
    [...methods].filter(
      (m) => m !== request.method && routes.find(m, path) !== null && routes.find(m, path) !== undefined
    );
  const methodNotAllowed = (request: FastifyRequest, reply: FastifyReply, path: string, allowed: HTTPMethod[]) => {
    const allow = allowed.sort().join(', ');
    return sendError(
      reply,
      new AppError(
        'method_not_allowed',
        `${request.method} is not allowed on ${path}; use ${allow}`,
        { allow: allowed },
        { Allow: allow }
      )
    );
  };
  // Decided at onRequest, before Fastify looks at the body: a QUERY without Content-Type would otherwise get
  // Fastify's 400 (RFC 10008 §2) before the not-found handler could answer 405.
  app.addHook('onRequest', async (request, reply) => {
    if (!request.is404) return;
    const path = request.url.split('?')[0]!;
    const allowed = allowedOn(request, path);
    if (allowed.length > 0) return methodNotAllowed(request, reply, path, allowed);
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = allowedOn(request, path);
    if (allowed.length > 0) return methodNotAllowed(request, reply, path, allowed);
    return sendError(reply, new AppError('not_found', `No route ${request.method} ${path}`));
  });
}

/** Fastify's errors before routing (its `frameworkErrors` option): a malformed URL, an over-long path parameter. */
export function frameworkErrorHandler(err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void sendError(
      reply,
      new AppError('uri_too_long', `A path segment is longer than ${MAX_PATH_PARAM_LENGTH} characters`)
    );
  } else if (err.code === 'FST_ERR_BAD_URL') {
    void sendError(reply, new AppError('invalid_request', 'The URL is not valid (malformed percent-encoding)'));
  } else {
    reply.log.error({ err }, 'request failed before routing');
    void sendError(reply, new AppError('internal_error', 'Internal error; quote trace_id when reporting it'));
  }
}

/**
 * Node's HTTP parser errors (Fastify's `clientErrorHandler` option): no request object exists yet, so the answer
 * is written to the socket directly, in the one shape, with a fresh trace id.
 */
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const [code, message]: [ErrorCode, string] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? ['headers_too_large', 'The request headers are larger than the server accepts']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['request_timeout', 'The request was not received in time']
        : ['invalid_request', 'The HTTP request is malformed'];
  const status = ERROR_STATUS[code];
  const trace = randomBytes(12).toString('hex');
  const body = JSON.stringify(errorBody(new AppError(code, message), trace));
  this.log.info({ trace_id: trace, code: err.code }, 'malformed HTTP request');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Trace: ${trace}\r\nConnection: close\r\n\r\n${body}`
  );
}

/**
 * Temporal client failures that mean "the workflow service cannot serve right now": gRPC UNAVAILABLE (14),
 * DEADLINE_EXCEEDED (4) and RESOURCE_EXHAUSTED (8, e.g. a namespace rate limit), wrapped in a ServiceError or not.
 * Other ServiceErrors (a bad request, an SDK bug) are 500s.
 */
const TEMPORAL_UNAVAILABLE_CODES = new Set([4, 8, 14]);

export function isTemporalUnavailable(err: unknown): boolean {
  const grpc = (e: unknown) => isGrpcServiceError(e) && TEMPORAL_UNAVAILABLE_CODES.has((e as { code: number }).code);
  if (err instanceof ServiceError) return grpc(err.cause);
  return grpc(err);
}

/**
 * MongoDB errors that mean "the database cannot be reached or cannot serve right now" (retry later) rather than a
 * bug: the driver's network, selection, timeout and pool errors, and server answers that a node is shutting down,
 * stepping down or unreachable. Any other database error is a 500 (and logged).
 */
const MONGO_UNAVAILABLE_NAMES =
  /^(MongoServerSelectionError|MongoNetworkError|MongoNetworkTimeoutError|MongoTopologyClosedError|MongoNotConnectedError|MongoOperationTimeoutError|MongoWaitQueueTimeoutError|MongoPoolClosedError|MongoServerClosedError|PoolClearedError|PoolClearedOnNetworkError)$/;
/**
 * Server answers that mean "not now": shutting down, stepping down, not primary, unreachable, interrupted, out of
 * time (HostUnreachable 6, HostNotFound 7, ExceededTimeLimit 50 and 262, NetworkTimeout 89, ShutdownInProgress 91,
 * PrimarySteppedDown 189, SocketException 9001, NotWritablePrimary 10107, NotPrimaryNoSecondaryOk 13435,
 * NotPrimaryOrSecondary 13436, InterruptedAtShutdown 11600, InterruptedDueToReplStateChange 11602, 10058).
 */
const MONGO_UNAVAILABLE_CODES = new Set([6, 7, 50, 89, 91, 189, 262, 9001, 10058, 10107, 11600, 11602, 13435, 13436]);

export function isMongoUnavailable(err: unknown): boolean {
  if (!(err instanceof MongoError)) return false;
  if (MONGO_UNAVAILABLE_NAMES.test(err.name)) return true;
  // MongoServerError and its subclasses (a write concern or bulk write error carries the server's code too).
  if (err instanceof MongoServerError && typeof err.code === 'number' && MONGO_UNAVAILABLE_CODES.has(err.code))
    return true;
  return err.hasErrorLabel('RetryableWriteError') || err.hasErrorLabel('ResetPool');
}

export default fp(errorsPlugin, { name: 'errors' });
