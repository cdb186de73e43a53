/**
 * The status-data family (four JSON resources) and the per-node instruction queue.
 *   GET /api/status-data/metrics   live metrics: ledger size and root, entries in the last minute/hour, approvals
 *   GET /api/status-data/nodes     node registry: node ids, names and states
 *   GET /api/status-data/sync      local-cloud sync state: the ledger head every listener serves, and its age
 *   GET /api/status-data/assets    local asset index: what the hub holds, counted by kind
 *   GET /api/instructions/:node_id the node's instruction queue (work orders pushed by the deployment gateway's
 *                                  inbox_push), oldest first; read it after GET /api/status
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Db } from 'mongodb';
import { z } from 'zod';
import type { Config, ListenerConfig } from '../../../core/config.node';
import { RawJson, rawJsonSchema } from '../../../core/raw-json';
import { NODE_STATES } from '../../../core/federation/vocabulary';
import type { Ledger } from '../../../store/ledger/ledger';
import type { NodeStore } from '../../../store/federation/nodes';
import type { PresenceStore } from '../../../store/federation/presence';
import type { WorkOrderStore } from '../../../store/deploy/work-orders';
import { createStatusData } from '../../../services/ledger/read-status-data';

const hex = z.string().regex(/^[0-9a-f]{64}$/);
const metricsResponse = z.object({
  ok: z.literal(true),
  resource: z.literal('metrics'),
  ledger: z.object({ size: z.number().int(), root: hex }),
  appends: z.object({ last_minute: z.number().int(), last_hour: z.number().int() }),
  uptime_s: z.number().int(),
  at: z.string()
});
const nodesResponse = z.object({
  ok: z.literal(true),
  resource: z.literal('nodes'),
  count: z.number().int(),
  nodes: z.array(
    z.object({
      node_id: z.string(),
      name: z.string(),
      brand: z.string().nullable(),
      state: z.enum(NODE_STATES),
      last_seen_at: z.string().nullable()
    })
  )
});
const syncResponse = z.object({
  ok: z.literal(true),
  resource: z.literal('sync'),
  state: z.literal('in_sync'),
  ledger_head: z.object({ size: z.number().int(), root: hex, last_entry_at: z.string().nullable() }),
  listeners: z.object({ main: z.string(), backup_port: z.number().int() }),
  at: z.string()
});
const assetsResponse = z.object({
  ok: z.literal(true),
  resource: z.literal('assets'),
  truths_by_type: z
    .record(z.string(), z.number().int())
    .describe(
      'truths by type: every type of the truth record, `untyped`, and `other` when a truth carries a type outside the list'
    ),
  hub_records: z.number().int().describe("the hub's own events in the ledger"),
  registered_dids: z.number().int(),
  nodes: z.number().int()
});
const instructionsResponse = z.object({
  ok: z.literal(true),
  node_id: z.string(),
  count: z.number().int(),
  instructions: z.array(
    z.object({
      instruction_id: z.string(),
      key: z.string(),
      value: rawJsonSchema('the work order'),
      created_at: z.string(),
      acked_at: z.string().nullable()
    })
  )
});

export const statusDataRoutes: FastifyPluginAsyncZod<{
  db: Db;
  ledger: Ledger;
  nodes: NodeStore;
  presence: PresenceStore;
  workOrders: WorkOrderStore;
  config: Pick<Config, 'publicUrl'> & Pick<ListenerConfig, 'BACKUP_PORT'>;
}> = async (app, deps) => {
  const { config, workOrders } = deps;
  const status = createStatusData(deps);
  const started = Date.now();

  app.get(
    '/api/status-data/metrics',
    { config: { auth: 'none' }, schema: { response: { 200: metricsResponse } } },
    async () => {
      const now = Date.now();
      return {
        ok: true as const,
        resource: 'metrics' as const,
        ...(await status.appendMetrics(now)),
        uptime_s: Math.round((now - started) / 1000),
        at: new Date(now).toISOString()
      };
    }
  );

  app.get(
    '/api/status-data/nodes',
    { config: { auth: 'none' }, schema: { response: { 200: nodesResponse } } },
    async () => {
      const nodes = await status.nodeRegistry();
      return { ok: true as const, resource: 'nodes' as const, count: nodes.length, nodes };
    }
  );

  app.get(
    '/api/status-data/sync',
    { config: { auth: 'none' }, schema: { response: { 200: syncResponse } } },
    async () => ({
      ok: true as const,
      resource: 'sync' as const,
      // Main and backup listeners append to and read from one database, so both serve this head.
      state: 'in_sync' as const,
      ledger_head: await status.headWithLastEntry(),
      listeners: { main: config.publicUrl, backup_port: config.BACKUP_PORT },
      at: new Date().toISOString()
    })
  );

  app.get(
    '/api/status-data/assets',
    { config: { auth: 'none' }, schema: { response: { 200: assetsResponse } } },
    async () => ({ ok: true as const, resource: 'assets' as const, ...(await status.assets()) })
  );

  app.get(
    '/api/instructions/:node_id',
    {
      config: { auth: 'did' },
      schema: {
        params: z.object({ node_id: z.string().min(1).max(100) }),
        querystring: z.object({
          include_acked: z
            .enum(['true', 'false'])
            .default('false')
            .transform((v) => v === 'true')
        }),
        response: { 200: instructionsResponse }
      }
    },
    async (request) => {
      const { node_id } = request.params;
      const { include_acked } = request.query;
      const rows = await workOrders.forNode(node_id, include_acked, 200);
      return {
        ok: true as const,
        node_id,
        count: rows.length,
        instructions: rows.map((r) => ({
          instruction_id: r._id,
          key: r.key,
          value: new RawJson(r.value_json),
          created_at: r.created_at,
          acked_at: r.acked_at
        }))
      };
    }
  );
};
