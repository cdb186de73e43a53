/**
 * The node directory and the live network view (no auth; never an API key or its digest):
 *   GET /a2a/nodes?state=&brand=&limit=&offset=   paginated directory, with last-seen time and latest sample
 *   GET /a2a/nodes/:node_id                        one node, with its down-sampled heartbeat history
 *   GET /a2a/dashboard                             online rate, counts by state and brand, resource aggregates,
 *                                                  heartbeats in the last minute
 */
import { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { notFound } from '../../../core/errors';
import { BRAND_CODES, NODE_STATES, nodeIdParam } from '../../../core/federation';
import { PresenceEntry } from '../../../activities/store/presence';
import { PublicNode, publicNode } from '../../../activities/store/nodes';
import type { ServiceContext } from '../../context';

const withPresence = (node: PublicNode, presence: PresenceEntry | undefined) => ({
  ...node,
  last_seen_at: presence ? new Date(presence.seen_at).toISOString() : null,
  latest: presence?.sample ?? null
});

export async function nodeDirectoryRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;

  app.get(
    '/a2a/nodes',
    {
      config: { auth: 'none', directory: { group: 'a2a_standard', summary: 'Node directory (never api_key); filter by state and brand; paginated' } },
      schema: {
        querystring: z.object({
          state: z.enum(NODE_STATES).optional(),
          brand: z.enum(BRAND_CODES).optional(),
          limit: z.coerce.number().int().min(1).max(200).default(50),
          offset: z.coerce.number().int().min(0).default(0)
        })
      }
    },
    async (request) => {
      const q = request.query as { state?: (typeof NODE_STATES)[number]; brand?: (typeof BRAND_CODES)[number]; limit: number; offset: number };
      const [{ total, nodes }, presence] = await Promise.all([ctx.nodes.list({ state: q.state, brand: q.brand }, q), ctx.presence.snapshot()]);
      const next = q.offset + nodes.length < total ? q.offset + nodes.length : null;
      return { ok: true, total, offset: q.offset, limit: q.limit, next_offset: next, nodes: nodes.map((n) => withPresence(n, presence.nodes.get(n.node_id))) };
    }
  );

  app.get('/a2a/nodes/:node_id', { config: { auth: 'none' }, schema: { params: z.object({ node_id: nodeIdParam }) } }, async (request) => {
    const { node_id } = request.params as { node_id: string };
    // The node first: an unknown id costs one read, not one per history interval.
    const found = await ctx.nodes.findPublic(node_id);
    if (!found) throw notFound(`No node ${node_id}`);
    const [history, presence] = await Promise.all([ctx.heartbeatHistory.recent(node_id), ctx.presence.snapshot()]);
    return { ok: true, node: { ...withPresence(publicNode(found), presence.nodes.get(node_id)), heartbeat_history: history } };
  });

  app.get('/a2a/dashboard', { config: { auth: 'none', directory: { group: 'a2a_standard', summary: 'Live network state: online rate, states, brands, resources, heartbeats per minute' } } }, async () => {
    const [agg, presence] = await Promise.all([ctx.nodes.aggregates(), ctx.presence.snapshot()]);
    const online = agg.byState.online ?? 0;
    const approved = online + (agg.byState.offline ?? 0);
    // Resource figures come from the latest sample of each node heard from within the offline window.
    const fresh = [...presence.nodes.values()].filter((e) => Date.now() - e.seen_at < ctx.config.NODE_OFFLINE_AFTER_S * 1000);
    const mean = (values: number[]) => (values.length ? Math.round((values.reduce((a, b) => a + b, 0) / values.length) * 10) / 10 : null);
    const defined = (values: (number | undefined)[]) => values.filter((v): v is number => typeof v === 'number');
    return {
      ok: true,
      nodes_total: agg.total,
      online,
      online_rate: approved > 0 ? Math.round((online / approved) * 1000) / 1000 : 0,
      by_state: Object.fromEntries(NODE_STATES.map((s) => [s, agg.byState[s] ?? 0])),
      by_brand: Object.fromEntries(BRAND_CODES.filter((b) => agg.byBrand[b]).map((b) => [b, agg.byBrand[b]])),
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
  });
}
