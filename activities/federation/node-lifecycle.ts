/**
 * Activities of the node/<node_id> workflow: read when the node was last heard from (presence), and record a state
 * change of registration or review (a ledger event, then the node document's state). The presence sweep of
 * node-sweeper/<group>, which decides and records every online ⇄ offline transition itself, is in
 * node-lifecycle-sweeper.ts. The ledger append carries an idempotency key made of the node id and the transition
 * number, so a retried activity never records a change twice.
 */
import type { NodeState } from '../../core/federation/vocabulary';
import { Ledger } from '../../store/ledger/ledger';
import { NodeStore } from '../../store/federation/nodes';
import { PresenceCheck, PresenceStore, presenceShardOf } from '../../store/federation/presence';
import { PRESENCE_SNAPSHOT_MAX_AGE_MS } from '../../contracts/federation/node-lifecycle.contract';

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
  /** The registration only: the DID it linked to the node (services/federation/node-registration.ts). */
  did?: string;
}

export function createNodeActivities(deps: {
  ledger: Ledger;
  nodes: NodeStore;
  presence: PresenceStore;
  hubDid?: string;
}) {
  // Many node workflows check presence around their deadlines; those of one presence shard share one read of that
  // shard (its few documents, one per API process), at most PRESENCE_SNAPSHOT_MAX_AGE_MS old (PRESENCE_GRACE_MS in
  // the workflow allows for it). A caller that must see a heartbeat acknowledged a moment ago (a review decision,
  // the re-check) asks for max_age_ms 0. A check never reads the other shards.
  const shared = new Map<number, { at: number; read: Promise<Map<string, number>> }>();
  const shardRead = (shard: number, maxAgeMs: number) => {
    const hit = shared.get(shard);
    if (hit && Date.now() - hit.at <= maxAgeMs) return hit.read;
    const read = deps.presence.readSeen(shard).then((s) => s.nodes);
    const entry = { at: Date.now(), read };
    shared.set(shard, entry);
    read.catch(() => shared.get(shard) === entry && shared.delete(shard));
    return read;
  };
  // A check after a sweeper's report must see presence at least as new as the sweeper's read: it shares a read of
  // the shard only if that read started no sooner than the report's read (so many checks of one shard, e.g. after
  // a mass silence, share one read), and the judgement applies to the time that read started.
  const checks = new Map<number, { startedAt: number; read: Promise<Map<string, number>> }>();
  const checkRead = (shard: number, notBefore: number) => {
    const hit = checks.get(shard);
    if (hit && hit.startedAt >= notBefore && Date.now() - hit.startedAt <= PRESENCE_SNAPSHOT_MAX_AGE_MS) return hit;
    const startedAt = Date.now();
    const entry = { startedAt, read: deps.presence.readSeen(shard).then((r) => r.nodes) };
    checks.set(shard, entry);
    entry.read.catch(() => checks.get(shard) === entry && checks.delete(shard));
    return entry;
  };
  return {
    /** The node's newest heartbeat in presence, from a read of its shard started no sooner than not_before_ms. */
    async checkNodePresence(input: { node_id: string; not_before_ms: number }): Promise<PresenceCheck> {
      const { startedAt, read } = checkRead(presenceShardOf(input.node_id), Number(input.not_before_ms) || 0);
      return { seen_at: (await read).get(input.node_id) ?? null, checked_at: startedAt };
    },

    /** Milliseconds since the epoch of the newest heartbeat any API process recorded for the node, or null. */
    async readNodeLastSeen(input: { node_id: string; max_age_ms: number }): Promise<number | null> {
      const maxAge = Math.min(input.max_age_ms, PRESENCE_SNAPSHOT_MAX_AGE_MS);
      return (await shardRead(presenceShardOf(input.node_id), maxAge)).get(input.node_id) ?? null;
    },

    async recordNodeStateChange(change: NodeStateChange): Promise<{ seq: number }> {
      const { entry } = await deps.ledger.append({
        kind: 'event',
        key: 'hub.node.state_changed',
        value: {
          node_id: change.node_id,
          from: change.from,
          to: change.to,
          at: change.at,
          reason: change.reason,
          actor: change.actor,
          transition: change.transition,
          ...(change.did ? { did: change.did } : {})
        },
        truth_type: 'data',
        did: change.hub_did,
        idempotencyKey: `node-state:${change.node_id}:${change.transition}`
      });
      await deps.nodes.setState(
        change.node_id,
        change.to,
        change.at,
        change.review ? { ...change.review, at: change.at } : undefined,
        { registration: change.from === null }
      );
      return { seq: entry.seq };
    }
  };
}
