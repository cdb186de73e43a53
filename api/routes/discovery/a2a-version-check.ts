/**
 * The A2A-Version service parameter on every operation of the binding (services/a2a/a2a-version.ts): read from the
 * header, else from the query parameter of that name; a version not served is VersionNotSupported. The HTTP+JSON
 * routes refuse in a preValidation hook (refuseUnsupportedVersion); the JSON-RPC route calls checkVersion itself, to
 * answer with the request's id.
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { A2A_VERSIONS, negotiateVersion } from '../../../services/a2a/a2a-version';
import { A2aRefusalError, isJsonRpcRoute } from './a2a-replies';

/** The query parameter, read before the route's schema runs (a preValidation hook): any other member is ignored. */
const versionQuery = z.looseObject({ 'A2A-Version': z.string().optional(), 'a2a-version': z.string().optional() });

/** The A2A-Version a request names: its header, else its query parameter of that name; undefined when neither. */
const versionOf = (request: FastifyRequest): string | undefined => {
  const header = request.headers['a2a-version'];
  if (header !== undefined) return Array.isArray(header) ? header.join(',') : header;
  const query = versionQuery.safeParse(request.query ?? {});
  return query.success ? (query.data['A2A-Version'] ?? query.data['a2a-version']) : undefined;
};

/**
 * The version check of every operation: the version served, or a VersionNotSupported refusal. The header is then set
 * to the version served (Major.Minor), which the routes' documented header schema takes.
 */
export const checkVersion = (
  request: FastifyRequest
): { ok: true } | { ok: false; message: string; metadata: Record<string, string> } => {
  const v = negotiateVersion(versionOf(request));
  if (!v.served)
    return {
      ok: false,
      message: v.refusal,
      // The ErrorInfo's metadata: what was asked, what is served.
      metadata: { requestedVersion: v.requested, supportedVersions: A2A_VERSIONS.join(',') }
    };
  request.headers['a2a-version'] = v.requested;
  return { ok: true };
};

/** The HTTP+JSON routes' check (a preValidation hook of the binding's plugin); the JSON-RPC route is left to itself. */
export async function refuseUnsupportedVersion(request: FastifyRequest): Promise<void> {
  if (isJsonRpcRoute(request)) return;
  const v = checkVersion(request);
  if (!v.ok) throw new A2aRefusalError('VERSION_NOT_SUPPORTED', v.message, v.metadata);
}
