/**
 * Who may do what on the deploy routes (docs/deploy.md#actions): X-DID authenticates (auth model did); the
 * caller's registry entry then decides. The administrator token (Authorization: Bearer, beside X-DID) allows
 * everything. A node's key sent beside X-DID (X-External-Node + X-External-Key) proves that node (nodeKey): with it,
 * did_register links the calling DID to the node without arbitrator rights (actions/registry.ts).
 */
import type { FastifyRequest } from 'fastify';
import { AppError, unauthorized } from '../../../core/errors';
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import type { DidRegistryStore, RegistryEntry } from '../../../store/deploy/registry';
import { externalNode } from '../../plugins/auth/external-node';
import { type AuthDeps, header } from '../../plugins/auth/principal';

/** The registry channel that allows deploy, rollback, config and the port pool. */
export const DEPLOY_CHANNEL = 'deploy';

export interface DeployAccess {
  isAdmin(request: FastifyRequest): boolean;
  /** The caller's entry when it may act as `need`; otherwise 403 saying what it lacks. */
  allow(
    request: FastifyRequest,
    need: 'deploy' | 'arbitrator'
  ): Promise<{ admin: boolean; entry: RegistryEntry | null }>;
  /**
   * The node whose key the request sends beside X-DID, checked as the node's own requests are (401 unknown node or
   * wrong key, 403 rejected); null when it sends no node key headers.
   */
  nodeKey(request: FastifyRequest): Promise<string | null>;
}

export function createDeployAccess(deps: {
  registry: Pick<DidRegistryStore, 'get'>;
  adminTokenHash: string;
  /** DEPLOY_ARBITRATOR_LEVEL: the autonomy level from which a DID may use did_register and did_revoke. */
  arbitratorLevel: number;
  /** What checking a node's key needs (the node cache). */
  nodeAuth: AuthDeps;
}): DeployAccess {
  const isAdmin = (request: FastifyRequest): boolean => {
    const m = /^Bearer\s+(\S+)$/i.exec(String(request.headers.authorization ?? ''));
    return m !== null && digestsEqual(deps.adminTokenHash, hashSecret(m[1]!));
  };
  const allow: DeployAccess['allow'] = async (request, need) => {
    const admin = isAdmin(request);
    const entry = await deps.registry.get(request.principal!.id);
    if (admin) return { admin, entry };
    if (need === 'deploy' && !(entry?.channels ?? []).includes(DEPLOY_CHANNEL)) {
      throw new AppError(
        'forbidden',
        `${request.principal!.id} has no "${DEPLOY_CHANNEL}" channel in the registry (did_register by an arbitrator, or the admin token)`
      );
    }
    if (need === 'arbitrator' && (entry?.autonomy_level ?? 0) < deps.arbitratorLevel) {
      throw new AppError(
        'forbidden',
        `registry actions need an arbitrator: autonomy level ${deps.arbitratorLevel} or above (or the admin token); ${request.principal!.id} has ${entry?.autonomy_level ?? 0}`
      );
    }
    return { admin, entry };
  };
  const nodeKey: DeployAccess['nodeKey'] = async (request) => {
    if (!header(request, 'x-external-node') && !header(request, 'x-external-key')) return null;
    // Both headers present: external_node's key path (X-DID beside them is not looked at there).
    if (!header(request, 'x-external-node') || !header(request, 'x-external-key'))
      throw unauthorized('Send both X-External-Node and X-External-Key');
    return (await externalNode(request, deps.nodeAuth)).id;
  };
  return { isAdmin, allow, nodeKey };
}
