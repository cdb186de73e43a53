/**
 * A short-lived, per-process cache of what heartbeat authentication needs about a node (key digest, state, brand),
 * so the heartbeat path does not read the node document on every call. Entries live NODE_CACHE_TTL_MS; a key
 * change or a rejection is therefore seen within that time. The node workflow re-checks presence once after a
 * node goes offline, which covers heartbeats answered from a cache that still said "online".
 */
import type { NodeState } from '../../core/federation/vocabulary';
import { NodeStore } from './nodes';

export interface CachedNode {
  node_id: string;
  api_key_hash: string;
  state: NodeState;
  brand: string;
  loaded_at: number;
}

export class NodeCache {
  private readonly entries = new Map<string, CachedNode>();
  constructor(
    private readonly nodes: NodeStore,
    private readonly ttlMs: number
  ) {}

  async get(nodeId: string): Promise<CachedNode | null> {
    const hit = this.entries.get(nodeId);
    if (hit && Date.now() - hit.loaded_at < this.ttlMs) return hit;
    const doc = await this.nodes.findNode(nodeId);
    if (!doc) {
      this.entries.delete(nodeId);
      return null;
    }
    const entry: CachedNode = { node_id: doc._id, api_key_hash: doc.api_key_hash, state: doc.state, brand: doc.brand.code, loaded_at: Date.now() };
    this.entries.set(nodeId, entry);
    if (this.entries.size > 100_000) this.entries.delete(this.entries.keys().next().value!);
    return entry;
  }

  /**
   * Remembers a state this process caused (e.g. it woke an offline node) for a full NODE_CACHE_TTL_MS: the node
   * document says so only once the workflow has recorded the change, and reloading it meanwhile would make every
   * heartbeat of a waking node signal its workflow again (a mass online would multiply its workflow tasks).
   */
  note(nodeId: string, state: NodeState): void {
    const hit = this.entries.get(nodeId);
    if (hit) {
      hit.state = state;
      hit.loaded_at = Date.now();
    }
  }
}
