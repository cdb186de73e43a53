/**
 * POST /a2a/heartbeat (external_node: X-External-Node + X-External-Key; 401 if either is missing or wrong, 403 for
 * a rejected node). The sample is recorded in presence (durably, before the answer); if this process believes the
 * node is offline it signals node/<node_id> (once per node per NODE_OFFLINE_AFTER_S), which brings it back online. Pending nodes may heartbeat (reviewers
 * see them alive) and stay pending_review. A heartbeat with no body counts; figures the hub does not know are kept in
 * the sample's `extra` (bounded) or ignored, never refused. The process makes sure the presence sweepers
 * (node-sweeper/<group>) run at its first heartbeat and then at most once a minute, off the heartbeat's path.
 */
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { HeartbeatBody, heartbeatBody, NODE_STATES } from '../../../core/federation/vocabulary';
import { wakeNode } from '../../../workflows/federation/node-lifecycle.client';
import { ensureNodeSweepers } from '../../../workflows/federation/node-lifecycle-sweeper.client';
import type { NodeCache } from '../../../store/federation/node-cache';
import type { PresenceRecorder } from '../../../store/federation/presence-recorder';

const NO_FIGURES: HeartbeatBody = heartbeatBody.parse({});

const heartbeatResponse = z.object({
  ok: z.literal(true),
  node_id: z.string(),
  state: z.enum(NODE_STATES).describe('the node\'s state after this heartbeat (an offline node is back online)'),
  received_at: z.string(),
  next_heartbeat_within_s: z.number().int().describe('NODE_OFFLINE_AFTER_S: silence this long makes an online node offline'),
  ignored_fields: z.array(z.string()).describe('figures the hub neither knows nor could keep in the sample\'s extra')
});

export const heartbeatRoutes: FastifyPluginAsyncZod<{ presenceRecorder: PresenceRecorder; nodeCache: NodeCache; temporal: Client; config: Config }> = async (
  app,
  { presenceRecorder, nodeCache, temporal, config }
) => {
  const offlineAfterMs = config.NODE_OFFLINE_AFTER_S * 1000;
  const wokenAt = new Map<string, number>();
  const rememberWake = (nodeId: string, at: number) => {
    wokenAt.delete(nodeId);
    wokenAt.set(nodeId, at);
    // Oldest first (insertion order): drop the wakes older than a window.
    for (const [id, t] of wokenAt) {
      if (at - t < offlineAfterMs && wokenAt.size <= 200_000) break;
      wokenAt.delete(id);
    }
  };
  let sweepersEnsuredAt = 0;
  const ensureSweepers = (now: number) => {
    if (now - sweepersEnsuredAt < 60_000) return;
    sweepersEnsuredAt = now;
    ensureNodeSweepers(temporal, config.TEMPORAL_TASK_QUEUE, config.NODE_OFFLINE_AFTER_S).catch((err) => {
      sweepersEnsuredAt = Date.now() - 55_000;
      app.log.warn({ err }, 'could not start the presence sweepers; trying again in 5 s');
    });
  };
  app.post(
    '/a2a/heartbeat',
    {
      config: { auth: 'external_node', directory: { group: 'a2a_standard', summary: 'Heartbeat with resource and performance figures; offline after NODE_OFFLINE_AFTER_S of silence' } },
      schema: { body: heartbeatBody.nullish(), response: { 200: heartbeatResponse } }
    },
    async (request) => {
      // The route schema already validated (and defaulted) a body that was sent; an empty request means no figures.
      const body = request.body ?? NO_FIGURES;
      const nodeId = request.principal!.id;
      const state = request.principal!.nodeState!;
      const seenAt = Date.now();
      ensureSweepers(seenAt);
      const hasExtra = Object.keys(body.extra).length > 0;
      await presenceRecorder.record(
        nodeId,
        { at: new Date(seenAt).toISOString(), resources: body.resources, performance: body.performance, ...(hasExtra ? { extra: body.extra } : {}) },
        seenAt
      );
      let woke = false;
      if (state === 'offline') {
        // One wake per node per window: until the workflow records the change, the node document (and so this
        // process's cache once it reloads) still says offline, and signalling again at every heartbeat would
        // multiply the workflow tasks of a mass online (a hub restart). A node can only go offline again after
        // a whole window of silence, so a second wake within the window is never needed.
        if (seenAt - (wokenAt.get(nodeId) ?? -Infinity) >= offlineAfterMs) {
          await wakeNode(temporal, nodeId, seenAt);
          rememberWake(nodeId, seenAt);
        }
        nodeCache.note(nodeId, 'online');
        woke = true;
      }
      return {
        ok: true as const,
        node_id: nodeId,
        state: woke ? 'online' : state,
        received_at: new Date(seenAt).toISOString(),
        next_heartbeat_within_s: config.NODE_OFFLINE_AFTER_S,
        // Figures the hub neither knows nor could keep (see core/federation/vocabulary.ts, HEARTBEAT_EXTRA_MAX_MEMBERS).
        ignored_fields: body.ignored
      };
    }
  );
};
