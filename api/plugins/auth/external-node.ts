/** Model `external_node`: X-External-Node + X-External-Key from POST /a2a/register; a rejected node gets 403. */
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import { AppError, unauthorized } from '../../../core/errors';
import { Authenticator, header } from './principal';

export const externalNode: Authenticator = async (request, { nodeCache }) => {
  const nodeId = header(request, 'x-external-node');
  const key = header(request, 'x-external-key');
  if (!nodeId || !key) throw unauthorized('X-External-Node and X-External-Key headers are both required');
  const node = await nodeCache.get(nodeId);
  if (!node || !digestsEqual(node.api_key_hash, hashSecret(key))) throw unauthorized('Unknown node or wrong key');
  if (node.state === 'rejected') throw new AppError('forbidden', 'This node was rejected by review');
  return { model: 'external_node', id: node.node_id, nodeState: node.state };
};
