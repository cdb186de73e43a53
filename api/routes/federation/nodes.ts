/**
 * The node directory and the live network view (no auth; never an API key or its digest):
 *   GET /a2a/nodes?state=&brand=&limit=&offset=   paginated directory, with last-seen time and latest sample
 *   GET /a2a/nodes/:node_id                        one node, with its down-sampled heartbeat history
 *   GET /a2a/dashboard                             online rate, counts by state and brand, resource aggregates,
 *                                                  heartbeats in the last minute
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { queryInt } from '../../../core/identifiers';
import type { Config } from '../../../core/config.node';
import { notFound } from '../../../core/errors';
import { BRAND_CODES, heartbeatBody, NODE_STATES, nodeIdParam } from '../../../core/federation/vocabulary';
import type { HeartbeatHistoryStore } from '../../../store/federation/heartbeat-history';
import type { PresenceEntry, PresenceStore } from '../../../store/federation/presence';
import { publicNode, type NodeStore, type PublicNode } from '../../../store/federation/nodes';

/** A node as the directory and the review queue show it (store/federation/nodes.ts PublicNode): never the key digest. */
export const publicNodeSchema = z.object({
  node_id: z.string(),
  seq: z.number().int(),
  name: z.string(),
  brand: z.object({ code: z.enum(BRAND_CODES), model_base: z.string().nullable() }),
  instance: z.object({
    os: z.string().nullable(),
    cpu: z.string().nullable(),
    memory_gb: z.number().nullable(),
    gpu: z.string().nullable()
  }),
  capabilities: z.array(z.string()),
  state: z.enum(NODE_STATES),
  created_at: z.string(),
  state_changed_at: z.string(),
  review: z
    .object({ decision: z.enum(['approved', 'rejected']), reviewer: z.string(), reason: z.string(), at: z.string() })
    .nullable()
});

// The known figures are the heartbeat body's (core/federation/vocabulary.ts), so a figure added there is served here too.
const heartbeatShape = heartbeatBody.in.shape;
/** One recorded heartbeat sample (core/federation/vocabulary.ts HeartbeatSample). */
export const heartbeatSampleSchema = z.object({
  at: z.string(),
  resources: z.object(heartbeatShape.resources.unwrap().shape),
  performance: z.object(heartbeatShape.performance.unwrap().shape),
  extra: z
    .record(z.string(), z.union([z.number(), z.string(), z.boolean(), z.null()]))
    .optional()
    .describe('figures the hub does not know, when the node sent any')
});

const directoryNode = publicNodeSchema.extend({
  last_seen_at: z.string().nullable().describe('when the hub last heard a heartbeat, within the presence window'),
  latest: heartbeatSampleSchema.nullable()
});
const listResponse = z.object({
  ok: z.literal(true),
  total: z.number().int(),
  offset: z.number().int(),
  limit: z.number().int(),
  next_offset: z.number().int().nullable(),
  nodes: z.array(directoryNode)
});
const nodeResponse = z.object({
  ok: z.literal(true),
  node: directoryNode.extend({
    heartbeat_history: z.array(heartbeatSampleSchema).describe('down-sampled, oldest first')
  })
});
const count = z.number().int();
const mean = z.number().nullable();
const dashboardResponse = z.object({
  ok: z.literal(true),
  nodes_total: count,
  online: count,
  online_rate: z.number().describe('online / (online + offline), 0 when no node is approved'),
  by_state: z.record(z.enum(NODE_STATES), count),
  by_brand: z.partialRecord(z.enum(BRAND_CODES), count).describe('brands with at least one node'),
  resources: z.object({
    declared_memory_gb_total: z.number(),
    reporting_nodes: count,
    gpus: z.number(),
    memory_used_gb_total: z.number(),
    mean_cpu_percent: mean,
    mean_gpu_util_percent: mean,
    mean_latency_ms: mean
  }),
  heartbeats_last_minute: count,
  generated_at: z.string()
});

const withPresence = (node: PublicNode, presence: PresenceEntry | undefined) => ({
  ...node,
  last_seen_at: presence ? new Date(presence.seen_at).toISOString() : null,
  latest: presence?.sample ?? null
});

export const nodeDirectoryRoutes: FastifyPluginAsyncZod<{
  nodes: NodeStore;
  presence: PresenceStore;
  heartbeatHistory: HeartbeatHistoryStore;
  config: Config;
}> = async (app, { nodes: nodeStore, presence: presenceStore, heartbeatHistory, config }) => {
  app.get(
    '/a2a/nodes',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'a2a_standard',
          summary: 'Node directory (never api_key); filter by state and brand; paginated'
        }
      },
      schema: {
        querystring: z.object({
          state: z.enum(NODE_STATES).optional(),
          brand: z.enum(BRAND_CODES).optional(),
          limit: queryInt(1, 200).default(50),
          offset: queryInt(0).default(0)
        }),
        response: { 200: listResponse }
      }
    },
    async (request) => {
      const q = request.query;
      const [{ total, nodes }, presence] = await Promise.all([
        nodeStore.list({ state: q.state, brand: q.brand }, q),
        presenceStore.snapshot()
      ]);
      const next = q.offset + nodes.length < total ? q.offset + nodes.length : null;
      return {
        ok: true as const,
        total,
        offset: q.offset,
        limit: q.limit,
        next_offset: next,
        nodes: nodes.map((n) => withPresence(n, presence.nodes.get(n.node_id)))
      };
    }
  );

  app.get(
    '/a2a/nodes/:node_id',
    {
      config: { auth: 'none' },
      schema: { params: z.object({ node_id: nodeIdParam }), response: { 200: nodeResponse } }
    },
    async (request) => {
      const { node_id } = request.params;
      // The node first: an unknown id costs one read, not one per history interval.
      const found = await nodeStore.findPublic(node_id);
      if (!found) throw notFound(`No node ${node_id}`);
      const [history, presence] = await Promise.all([heartbeatHistory.recent(node_id), presenceStore.snapshot()]);
      return {
        ok: true as const,
        node: { ...withPresence(publicNode(found), presence.nodes.get(node_id)), heartbeat_history: history }
      };
    }
  );

  app.get(
    '/a2a/dashboard',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'a2a_standard',
          summary: 'Live network state: online rate, states, brands, resources, heartbeats per minute'
        }
      },
      schema: { response: { 200: dashboardResponse } }
    },
    async () => {
      const [agg, presence] = await Promise.all([nodeStore.aggregates(), presenceStore.snapshot()]);
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
  );
};
