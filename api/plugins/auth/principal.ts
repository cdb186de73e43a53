/** Who made a request, as the authenticators establish it, and what an authenticator needs. */
import type { FastifyRequest } from 'fastify';
import type { AuthModel } from '../../../core/endpoint-groups';
import type { NodeState } from '../../../core/federation/vocabulary';
import type { ServiceContext } from '../../context';

export interface Principal {
  model: AuthModel;
  /** Who: a DID, node id, token id, API key id, OAuth client id, daemon asset id, or "admin" / "anonymous". */
  id: string;
  did?: string;
  scopes?: string[];
  /** For external_node: the node's state as this process last saw it (core/federation/vocabulary.ts NODE_PERMISSIONS). */
  nodeState?: NodeState;
  /** For api_key: the key's plan (core/chat/plans.ts). */
  plan?: string;
}

/** The dependencies authenticators may use (each uses a few). */
export type AuthDeps = Pick<
  ServiceContext,
  'config' | 'credentials' | 'nodeCache' | 'keys' | 'adminTokenHash' | 'partners' | 'slimGroups'
>;

/** Checks a request's credentials for one model: a Principal, or an AppError (401, or 403 where the model says). */
export type Authenticator = (request: FastifyRequest, deps: AuthDeps) => Promise<Principal>;

export const header = (request: FastifyRequest, name: string): string | undefined => {
  const v = request.headers[name];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
};

export function bearer(request: FastifyRequest): string | undefined {
  const value = header(request, 'authorization');
  const match = value ? /^Bearer\s+(\S+)$/i.exec(value) : null;
  return match?.[1];
}
