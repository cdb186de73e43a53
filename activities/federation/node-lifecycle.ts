/**
 * Activities of the node/<node_id> workflow: read when the node was last heard from (presence), and record a state
 * change (a ledger event, then the node document's state). The ledger append carries an idempotency key made of the
 * node id and the transition number, so a retried activity never records a change twice.
 */
import type { NodeState } from '../../core/federation/vocabulary';
import { Ledger } from '../../store/ledger/ledger';
import { NodeStore } from '../../store/federation/nodes';
import { PresenceEntry, PresenceStore } from '../../store/federation/presence';
import { PRESENCE_SNAPSHOT_MAX_AGE_MS } from '../../workflows/federation/node-lifecycle.contract';

export interface NodeStateChange {
  node_id: string;
  from: NodeState | null;
  to: NodeState;
  /** ISO time of the change (workflow time). */
  at: string;
  /** Why: "registered", "no heartbeat for 90 s", "heartbeat received", "approved by review", … */
  reason: string;
  /** Who: "hub" for timer and heartbeat changes, the reviewer's principal id for review decisions. */
  actor: string;
  /** 1 for the first change of this node, then 2, 3, … (carried across continue-as-new). */
  transition: number;
  hub_did: string;
  review?: { decision: 'approved' | 'rejected'; reviewer: string; reason: string };
}

export function createNodeActivities(deps: { ledger: Ledger; nodes: NodeStore; presence: PresenceStore }) {
  // Many node workflows check presence around their deadlines; those share one read of the presence documents,
  // at most PRESENCE_SNAPSHOT_MAX_AGE_MS old (PRESENCE_GRACE_MS in the workflow allows for it). A caller that
  // must see a heartbeat acknowledged a moment ago (a review decision, the re-check) asks for max_age_ms 0.
  let shared: { at: number; read: Promise<Map<string, PresenceEntry>> } | null = null;
  const snapshot = (maxAgeMs: number) => {
    if (!shared || Date.now() - shared.at > maxAgeMs) {
      const read = deps.presence.snapshot().then((s) => s.nodes);
      shared = { at: Date.now(), read };
      read.catch(() => (shared = null));
    }
    return shared.read;
  };
  return {
    /** Milliseconds since the epoch of the newest heartbeat any API process recorded for the node, or null. */
    async readNodeLastSeen(input: { node_id: string; max_age_ms: number }): Promise<number | null> {
      return (await snapshot(Math.min(input.max_age_ms, PRESENCE_SNAPSHOT_MAX_AGE_MS))).get(input.node_id)?.seen_at ?? null;
    },

    async recordNodeStateChange(change: NodeStateChange): Promise<{ seq: number }> {
      const { entry } = await deps.ledger.append({
        kind: 'event',
        key: 'hub.node.state_changed',
        value: { node_id: change.node_id, from: change.from, to: change.to, at: change.at, reason: change.reason, actor: change.actor, transition: change.transition },
        truth_type: 'data',
        did: change.hub_did,
        idempotencyKey: `node-state:${change.node_id}:${change.transition}`
      });
      await deps.nodes.setState(change.node_id, change.to, change.at, change.review ? { ...change.review, at: change.at } : undefined);
      return { seq: entry.seq };
    }
  };
}
