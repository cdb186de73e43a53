/**
 * Model `did`: X-DID of a registered, unrevoked DID.
 *
 * Every request reads the DID from the store, so a revocation counts at once on every API process (deploy's DID
 * registry relies on it), except on routes that declare `config.didRecentlyActive` (the truth write, where every
 * round trip counts): there a DID this process found active within TRUTH_DID_CACHE_MS is taken as active without a
 * read (store/active-dids.ts), so a DID revoked by another API process can still write truths here for at most
 * TRUTH_DID_CACHE_MS (default 1 s); a revocation by this process counts at once.
 */
import { unauthorized } from '../../../core/errors';
import { Authenticator, header } from './principal';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route accepts a DID found active within TRUTH_DID_CACHE_MS (see api/plugins/auth/did.ts). */
    didRecentlyActive?: boolean;
  }
}

export const did: Authenticator = async (request, { credentials, config }) => {
  const value = header(request, 'x-did');
  if (!value) throw unauthorized('X-DID header is required');
  const ttl = request.routeOptions.config.didRecentlyActive ? config.TRUTH_DID_CACHE_MS : 0;
  if (!(await credentials.activeDids.isActive(value, ttl))) throw unauthorized('X-DID is not a registered DID');
  return { model: 'did', id: value, did: value };
};
