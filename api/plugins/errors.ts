/**
 * One error handler for the whole app: every failure reaches the client as
 *   { ok: false, error: <code>, message: <text>, trace_id: <X-Trace>, ...details }
 * Validation failures become a 400 naming each bad field; unknown paths a 404; 5xx details stay in the log.
 */
import { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { AppError, ERROR_STATUS, ErrorCode } from '../../core/errors';

export interface FieldProblem {
  field: string;
  message: string;
}

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
  return reply.code(err.status).send({
    ok: false,
    error: err.code,
    message: err.message,
    trace_id: reply.request.id,
    ...err.details
  });
}

/** When a body breaks several rules that carry their own code, the one the spec names first wins. */
const CODE_PRIORITY: ErrorCode[] = ['empty_value_rejected', 'value_must_be_object', 'invalid_key', 'invalid_patch'];

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
  return { problems, code: 'invalid_request', message: `Invalid request: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}` };
}

function errorsPlugin(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      if (err.status >= 500) request.log.error({ err }, 'request failed');
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
      // Fastify's own client errors (malformed JSON, empty body with a JSON content type, …): safe to say.
      const code: ErrorCode = status === 429 ? 'rate_limited' : status === 404 ? 'not_found' : 'invalid_request';
      return reply.code(status).send({ ok: false, error: code, message: err.message, trace_id: request.id });
    }
    if (isMongoUnavailable(err)) {
      request.log.error({ err }, 'database unavailable');
      return sendError(reply, new AppError('unavailable', 'The database is unavailable; retry later', {}, { 'Retry-After': '5' }));
    }
    request.log.error({ err }, 'request failed');
    return sendError(reply, new AppError('internal_error', 'Internal error; quote trace_id when reporting it'));
  });

  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new AppError('not_found', `No route ${request.method} ${request.url.split('?')[0]}`))
  );
}

/** Driver errors that mean "the database cannot be reached right now" rather than a bug. */
export function isMongoUnavailable(err: unknown): boolean {
  const name = (err as { name?: string })?.name ?? '';
  return /MongoServerSelectionError|MongoNetworkError|MongoNetworkTimeoutError|MongoTopologyClosedError|MongoNotConnectedError|PoolClearedError/.test(
    name
  );
}

export default fp(errorsPlugin, { name: 'errors' });
