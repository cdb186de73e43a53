/** A node document as registration writes it, for store and workflow tests that seed the database directly. */
import type { NodeState } from '../../core/federation/vocabulary';
import type { NodeDocument } from '../../store/federation/node-document';

/** A node document before any liveness transition, in `state`. */
export const nodeDocument = (id: string, seq: number, state: NodeState): NodeDocument => ({
  _id: id,
  seq,
  name: id,
  brand: { code: 'custom', model_base: null },
  instance: { os: null, cpu: null, memory_gb: null, gpu: null },
  capabilities: [],
  api_key_hash: 'digest',
  state,
  created_at: new Date().toISOString(),
  state_changed_at: new Date().toISOString(),
  review: null
});
