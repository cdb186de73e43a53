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
import type { Config } from '../../../core/config.node';
import { RawJson, rawJsonSchema } from '../../../core/raw-json';
import { assetsFromTally, LedgerTally, tallyCategory } from '../../../core/ledger/tally';
import { NODE_STATES } from '../../../core/federation/vocabulary';
import type { Ledger } from '../../../store/ledger/ledger';
import type { NodeStore } from '../../../store/federation/nodes';
import type { PresenceStore } from '../../../store/federation/presence';
import type { WorkOrderStore } from '../../../store/deploy/work-orders';

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
  config: Config;
}> = async (app, deps) => {
  const { db, config, workOrders } = deps;
  const ledger = db.collection('ledger');
  const started = Date.now();

  app.get(
    '/api/status-data/metrics',
    { config: { auth: 'none' }, schema: { response: { 200: metricsResponse } } },
    async () => {
      const now = Date.now();
      const since = (ms: number) => new Date(now - ms).toISOString();
      const head = await deps.ledger.head();
      // From the ledger's marks (store/ledger/heads.ts, appendsSince: one small read, 5 s resolution); counting the
      // entries by created_at (every entry of the window, or of the ledger on FerretDB/SQLite) only for a ledger begun
      // before marks existed, until it has a mark as old as the window (its first hour).
      const appendsSince = async (ms: number) => {
        const marked = await deps.ledger.appendsSince(new Date(now - ms), head);
        return marked.marked ? marked.appends : ledger.countDocuments({ created_at: { $gte: since(ms) } });
      };
      const [lastMinute, lastHour] = await Promise.all([appendsSince(60_000), appendsSince(3_600_000)]);
      return {
        ok: true as const,
        resource: 'metrics' as const,
        ledger: { size: head.size, root: head.root },
        appends: { last_minute: lastMinute, last_hour: lastHour },
        uptime_s: Math.round((now - started) / 1000),
        at: new Date(now).toISOString()
      };
    }
  );

  app.get(
    '/api/status-data/nodes',
    { config: { auth: 'none' }, schema: { response: { 200: nodesResponse } } },
    async () => {
      const [nodes, presence] = await Promise.all([
        deps.nodes.nodes
          .find({}, { projection: { _id: 1, name: 1, state: 1, 'brand.code': 1 } })
          .sort({ seq: 1 })
          .limit(1000)
          .toArray(),
        deps.presence.snapshot()
      ]);
      const seen = (id: string) => {
        const at = presence.nodes.get(id)?.seen_at;
        return at ? new Date(at).toISOString() : null;
      };
      return {
        ok: true as const,
        resource: 'nodes' as const,
        count: nodes.length,
        nodes: nodes.map((n) => ({
          node_id: n._id,
          name: n.name,
          brand: n.brand?.code ?? null,
          state: n.state,
          last_seen_at: seen(n._id)
        }))
      };
    }
  );

  app.get(
    '/api/status-data/sync',
    { config: { auth: 'none' }, schema: { response: { 200: syncResponse } } },
    async () => {
      // The head record carries its last entry's time; records written before it did are the only reason to read the entry.
      const head = await deps.ledger.headWithTime();
      const lastEntryAt =
        head.last_entry_at ?? (head.size > 0 ? ((await deps.ledger.get(head.size))?.created_at ?? null) : null);
      return {
        ok: true as const,
        resource: 'sync' as const,
        // Main and backup listeners append to and read from one database, so both serve this head.
        state: 'in_sync' as const,
        ledger_head: { size: head.size, root: head.root, last_entry_at: lastEntryAt },
        listeners: { main: config.publicUrl, backup_port: config.BACKUP_PORT },
        at: new Date().toISOString()
      };
    }
  );

  app.get(
    '/api/status-data/assets',
    { config: { auth: 'none' }, schema: { response: { 200: assetsResponse } } },
    async () => {
      // The ledger's counts from the tally its head carries (core/ledger/tally.ts: one small read at any size); a
      // ledger begun before tallies existed is counted by grouping its entries (a scan of the ledger).
      const ledgerCounts = async () => {
        const { tally } = await deps.ledger.headWithTally();
        if (tally) return assetsFromTally(tally);
        const [byType, events] = await Promise.all([
          ledger
            .aggregate<{ _id: string | null; count: number }>([
              { $match: { kind: 'truth' } },
              { $group: { _id: '$truth_type', count: { $sum: 1 } } }
            ])
            .toArray(),
          ledger.countDocuments({ kind: 'event' })
        ]);
        const counted: LedgerTally = { event: events };
        for (const row of byType) {
          const category = tallyCategory('truth', row._id ?? null);
          counted[category] = (counted[category] ?? 0) + row.count;
        }
        return assetsFromTally(counted);
      };
      const [counts, dids, nodes] = await Promise.all([
        ledgerCounts(),
        db.collection('dids').countDocuments({ revoked_at: null }),
        db.collection('nodes').countDocuments({})
      ]);
      return { ok: true as const, resource: 'assets' as const, ...counts, registered_dids: dids, nodes };
    }
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
