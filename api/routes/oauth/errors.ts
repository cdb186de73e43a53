/**
 * The error handler of the three OAuth endpoints (token, introspection, revocation): RFC 6749 §5.2's shape
 * `{ error, error_description }`, as OAuth clients parse them. Other statuses keep the service's error shape.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { AppError } from '../../../core/errors';
import { OAuthProtocolError } from '../../../services/oauth/access-tokens';

/** The codes RFC 6749 §5.2 defines that this server answers; any other 400/401 becomes invalid_request. */
const RFC_CODES = new Set([
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unsupported_grant_type',
  'invalid_scope'
]);

/** Errors of the three OAuth endpoints in RFC 6749 §5.2's shape; other statuses go to the service's handler. */
export function oauthErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.header('X-Trace', request.id).header('Cache-Control', 'no-store');
  if (err instanceof OAuthProtocolError) {
    for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
    return reply.code(400).send({ error: err.error, error_description: err.description });
  }
  if (err instanceof AppError && (err.status === 400 || err.status === 401)) {
    for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
    return reply
      .code(err.status)
      .send({ error: RFC_CODES.has(err.code) ? err.code : 'invalid_request', error_description: err.message });
  }
  if (hasZodFastifySchemaValidationErrors(err) || err.validation) {
    const what = (err.validation ?? [])
      .map((v) => `${v.instancePath.replace(/^\//, '') || 'body'}: ${v.message ?? 'is invalid'}`)
      .join('; ');
    return reply.code(400).send({ error: 'invalid_request', error_description: `Invalid request: ${what}` });
  }
  // Anything else (415, 413, 429, dependency outages, internal errors): the service's handler and shape.
  throw err;
}
