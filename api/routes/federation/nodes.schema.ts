/** Nodes as the directory, the review queue and the dashboard show them (./nodes.ts, ./review.ts). */
import { z } from 'zod';
import { BRAND_CODES, heartbeatBody, NODE_STATES } from '../../../core/federation/vocabulary';

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
export const listResponse = z.object({
  ok: z.literal(true),
  total: z.number().int(),
  offset: z.number().int(),
  limit: z.number().int(),
  next_offset: z.number().int().nullable(),
  nodes: z.array(directoryNode)
});
export const nodeResponse = z.object({
  ok: z.literal(true),
  node: directoryNode.extend({
    heartbeat_history: z.array(heartbeatSampleSchema).describe('down-sampled, oldest first')
  })
});
const count = z.number().int();
const mean = z.number().nullable();
export const dashboardResponse = z.object({
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
