/**
 * The stored shape of a federation node: one document of the `nodes` collection, as the node store's modules
 * (nodes.ts, node-registrations.ts, node-writes.ts, node-liveness.ts) and the registration service read and write it.
 */
import type { BrandCode, NodeState } from '../../core/federation/vocabulary';

export interface NodeDocument {
  _id: string; // node id
  seq: number;
  name: string;
  brand: { code: BrandCode; model_base: string | null };
  instance: { os: string | null; cpu: string | null; memory_gb: number | null; gpu: string | null };
  capabilities: string[];
  api_key_hash: string;
  state: NodeState;
  created_at: string;
  state_changed_at: string;
  review: { decision: 'approved' | 'rejected'; reviewer: string; reason: string; at: string } | null;
  /**
   * Liveness transitions (online ⇄ offline) recorded by the presence sweeper (applyLiveness), absent before the
   * first: each one's ledger event is idempotent by node and this number.
   */
  liveness_seq?: number;
}
