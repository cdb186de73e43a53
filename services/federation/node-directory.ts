/**
 * The node directory and the live network view: nodes as the public sees them (never an API key or its digest), with
 * when the hub last heard each and its latest heartbeat sample, one node's down-sampled history, and the network's
 * figures (online rate, counts by state and brand, resource aggregates, heartbeats in the last minute).
 * The routes are api/routes/federation/nodes.ts.
 */
import type { FederationConfig } from '../../core/config.node';
import { notFound } from '../../core/errors';
import { BRAND_CODES, type BrandCode, NODE_STATES, type NodeState } from '../../core/federation/vocabulary';
import type { HeartbeatHistoryStore } from '../../store/federation/heartbeat-history';
import { SHARED_SNAPSHOT_MS, type PresenceEntry, type PresenceStore } from '../../store/federation/presence';
import { publicNode, type NodeStore, type PublicNode } from '../../store/federation/nodes';

const withPresence = (node: PublicNode, presence: PresenceEntry | undefined) => ({
  ...node,
  last_seen_at: presence ? new Date(presence.seen_at).toISOString() : null,
  latest: presence?.sample ?? null
});

export type NodeDirectoryQuery = { state?: NodeState; brand?: BrandCode; limit: number; offset: number };

export function createNodeDirectory({
  nodes: nodeStore,
  presence: presenceStore,
  heartbeatHistory,
  config
}: {
  nodes: NodeStore;
  presence: PresenceStore;
  heartbeatHistory: HeartbeatHistoryStore;
  config: Pick<FederationConfig, 'NODE_OFFLINE_AFTER_S'>;
}) {
  return {
    /**
     * A page of the directory, filtered by state and brand: the order, filter and total from the node index (about a
     * second behind the node documents), the page's documents, presence from a snapshot at most SHARED_SNAPSHOT_MS old.
     */
    async list(q: NodeDirectoryQuery) {
      const [{ total, nodes }, snapshot] = await Promise.all([
        nodeStore.list({ state: q.state, brand: q.brand }, q),
        presenceStore.recentSnapshot(SHARED_SNAPSHOT_MS)
      ]);
      const presence = snapshot.nodes;
      const next = q.offset + nodes.length < total ? q.offset + nodes.length : null;
      return {
        ok: true as const,
        total,
        offset: q.offset,
        limit: q.limit,
        next_offset: next,
        nodes: nodes.map((n) => withPresence(n, presence.get(n.node_id)))
      };
    },

    /**
     * One node, with its down-sampled heartbeat history: when it was last heard from as of now, its latest sample
     * from its shard's samples read at most SHARED_SNAPSHOT_MS ago (samples are written at most every few seconds).
     */
    async node(nodeId: string) {
      // The node first: an unknown id costs one read, not one per history interval.
      const found = await nodeStore.findPublic(nodeId);
      if (!found) throw notFound(`No node ${nodeId}`);
      const [history, presence] = await Promise.all([
        heartbeatHistory.recent(nodeId),
        presenceStore.entriesOf([nodeId], SHARED_SNAPSHOT_MS)
      ]);
      return {
        ok: true as const,
        node: { ...withPresence(publicNode(found), presence.get(nodeId)), heartbeat_history: history }
      };
    },

    /**
     * The network's live figures: counts from the node index, resources from every node's latest sample (a snapshot
     * at most SHARED_SNAPSHOT_MS old).
     */
    async dashboard() {
      const [agg, presence] = await Promise.all([
        nodeStore.aggregates(),
        presenceStore.recentSnapshot(SHARED_SNAPSHOT_MS)
      ]);
      const online = agg.byState.online ?? 0;
      const approved = online + (agg.byState.offline ?? 0);
      // Resource figures come from the latest sample of each node heard from within the offline window.
      const fresh = [...presence.nodes.values()].filter(
        (e) => Date.now() - e.seen_at < config.NODE_OFFLINE_AFTER_S * 1000
      );
      const mean = (values: number[]) =>
        values.length ? Math.round((values.reduce((a, b) => a + b, 0) / values.length) * 10) / 10 : null;
      const defined = (values: (number | undefined)[]) => values.filter((v): v is number => typeof v === 'number');
      return {
        ok: true as const,
        nodes_total: agg.total,
        online,
        online_rate: approved > 0 ? Math.round((online / approved) * 1000) / 1000 : 0,
        by_state: Object.fromEntries(NODE_STATES.map((s) => [s, agg.byState[s] ?? 0])) as Record<
          (typeof NODE_STATES)[number],
          number
        >,
        by_brand: Object.fromEntries(BRAND_CODES.filter((b) => agg.byBrand[b]).map((b) => [b, agg.byBrand[b]!])),
        resources: {
          declared_memory_gb_total: agg.memoryGb,
          reporting_nodes: fresh.length,
          gpus: defined(fresh.map((e) => e.sample.resources.gpu_count)).reduce((a, b) => a + b, 0),
          memory_used_gb_total: defined(fresh.map((e) => e.sample.resources.memory_used_gb)).reduce((a, b) => a + b, 0),
          mean_cpu_percent: mean(defined(fresh.map((e) => e.sample.resources.cpu_percent))),
          mean_gpu_util_percent: mean(defined(fresh.map((e) => e.sample.resources.gpu_util_percent))),
          mean_latency_ms: mean(defined(fresh.map((e) => e.sample.performance.latency_ms)))
        },
        heartbeats_last_minute: presence.heartbeatsLastMinute,
        generated_at: new Date().toISOString()
      };
    }
  };
}
