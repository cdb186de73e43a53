/**
 * Model `external_node`: a registered node, by its key (X-External-Node + X-External-Key from POST /a2a/register),
 * or by X-DID alone where the DID is linked to the node (the DID record's node_id, set by the registration's did or by
 * did_register: the seed's "DID single header" on node endpoints). A rejected node gets 403, and so does a DID linked to no node, or to one that is not registered.
 * The DID's record is read at every request (a revoked DID is refused at once, on every API process); the node, as
 * for its key, through the node cache (a rejection or removal counts on every process within NODE_CHANGES_POLL_MS).
 */
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import { AppError, unauthorized } from '../../../core/errors';
import { AuthDeps, Authenticator, header, Principal } from './principal';

export const externalNode: Authenticator = async (request, deps) => {
  const nodeId = header(request, 'x-external-node');
  const key = header(request, 'x-external-key');
  const did = header(request, 'x-did');
  if (!nodeId && !key && did) return linkedNode(did, deps);
  if (!nodeId || !key)
    throw unauthorized('Send X-External-Node and X-External-Key, or X-DID of a DID linked to the node');
  const node = await deps.nodeCache.get(nodeId);
  if (!node || !digestsEqual(node.api_key_hash, hashSecret(key))) throw unauthorized('Unknown node or wrong key');
  if (node.state === 'rejected') throw new AppError('forbidden', 'This node was rejected by review');
  return { model: 'external_node', id: node.node_id, nodeState: node.state };
};

/** X-DID alone: the node the (registered, unrevoked) DID is linked to. */
async function linkedNode(did: string, { credentials, nodeCache }: AuthDeps): Promise<Principal> {
  const record = await credentials.activeDid(did);
  if (!record) throw unauthorized('X-DID is not a registered DID');
  if (!record.node_id)
    throw new AppError(
      'forbidden',
      `X-DID ${did} is linked to no node: link it when registering the node (did), or with did_register ` +
        "(POST /dal/deploy, with the node's key), or send X-External-Node and X-External-Key"
    );
  const node = await nodeCache.get(record.node_id);
  if (!node)
    throw new AppError('forbidden', `X-DID ${did} is linked to node ${record.node_id}, which is not registered here`);
  if (node.state === 'rejected') throw new AppError('forbidden', 'This node was rejected by review');
  return { model: 'external_node', id: node.node_id, nodeState: node.state, did };
}
