/**
 * POST /a2a/heartbeat (external_node: X-External-Node + X-External-Key; 401 if either is missing or wrong, 403 for
 * a rejected node). The sample is recorded in presence (stored before the answer, except an approved node's while
 * its shard's writes keep up: PRESENCE_ACK_LAG_MS, store/federation/presence-recorder.ts), and that is all: the presence
 * sweeper (node-sweeper/<group>) brings an offline node that beats back online at its next tick (about 1 s) and
 * records the change; no workflow is signalled per heartbeat. Pending nodes may heartbeat (reviewers see them
 * alive) and stay pending_review. A heartbeat with no body counts; figures the hub does not know are kept in
 * the sample's `extra` (bounded) or ignored, never refused. The process makes sure the presence sweepers
 * (node-sweeper/<group>) run at its start and then at most once a minute at a heartbeat, off the heartbeat's path.
 */
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { FederationConfig, ServiceConfig, TemporalConfig } from '../../../core/config.node';
import { HeartbeatBody, heartbeatBody, NODE_STATES } from '../../../core/federation/vocabulary';
import { ensureNodeSweepers } from '../../../workflows/federation/node-lifecycle-sweeper.client';
import type { NodeCache } from '../../../store/federation/node-cache';
import type { PresenceRecorder } from '../../../store/federation/presence-recorder';

const NO_FIGURES: HeartbeatBody = heartbeatBody.parse({});

const heartbeatResponse = z.object({
  ok: z.literal(true),
  node_id: z.string(),
  state: z.enum(NODE_STATES).describe("the node's state after this heartbeat (an offline node is back online)"),
  received_at: z.string(),
  next_heartbeat_within_s: z
    .number()
    .int()
    .describe('NODE_OFFLINE_AFTER_S: silence this long makes an online node offline'),
  ignored_fields: z.array(z.string()).describe("figures the hub neither knows nor could keep in the sample's extra")
});

export const heartbeatRoutes: FastifyPluginAsyncZod<{
  presenceRecorder: PresenceRecorder;
  nodeCache: NodeCache;
  temporal: Client;
  config: Pick<FederationConfig, 'NODE_OFFLINE_AFTER_S'> &
    Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'> &
    Pick<ServiceConfig, 'SERVICE_DID'>;
}> = async (app, { presenceRecorder, temporal, config }) => {
  let sweepersEnsuredAt = 0;
  const ensureSweepers = (now: number) => {
    if (now - sweepersEnsuredAt < 60_000) return;
    sweepersEnsuredAt = now;
    ensureNodeSweepers(temporal, config.TEMPORAL_TASK_QUEUE, config.NODE_OFFLINE_AFTER_S, config.SERVICE_DID).catch(
      (err) => {
        sweepersEnsuredAt = Date.now() - 55_000;
        app.log.warn({ err }, 'could not start the presence sweepers; trying again in 5 s');
      }
    );
  };
  // At start too, not only at the first heartbeat: a sweeper's first workflow task must not wait behind a backlog
  // of other workflow tasks (a registration burst queues one per node) before liveness is swept.
  ensureSweepers(Date.now());
  app.post(
    '/a2a/heartbeat',
    {
      config: {
        auth: 'external_node',
        presenceHold: true,
        directory: {
          group: 'a2a_standard',
          summary: 'Heartbeat with resource and performance figures; offline after NODE_OFFLINE_AFTER_S of silence'
        }
      },
      schema: { body: heartbeatBody.nullish(), response: { 200: heartbeatResponse } }
    },
    async (request, reply) => {
      // Where this heartbeat's time went, for operators and benches (Server-Timing: from Fastify's receipt of the
      // request to this handler, i.e. authentication with its node read, the body and its validation; then the
      // presence write, when the answer waits for it).
      const received = reply.elapsedTime;
      // The route schema already validated (and defaulted) a body that was sent; an empty request means no figures.
      const body = request.body ?? NO_FIGURES;
      const nodeId = request.principal!.id;
      const state = request.principal!.nodeState!;
      // Seen at its arrival while it held the presence clock (api/plugins/presence-hold.ts): a heartbeat that waited
      // in authentication was on time if it arrived in time.
      const seenAt = request.presenceHold?.seenAt() ?? Date.now();
      ensureSweepers(seenAt);
      const hasExtra = Object.keys(body.extra).length > 0;
      // An approved node's heartbeat (online or offline) may be answered before its write while the shard's writes
      // keep up (PRESENCE_ACK_LAG_MS); a pending node's waits, since a review decision reads it (presence-recorder.ts).
      await presenceRecorder.record(
        nodeId,
        {
          at: new Date(seenAt).toISOString(),
          resources: body.resources,
          performance: body.performance,
          ...(hasExtra ? { extra: body.extra } : {})
        },
        seenAt,
        state === 'online' || state === 'offline'
      );
      reply.header(
        'server-timing',
        `auth;dur=${received.toFixed(1)}, presence;dur=${(reply.elapsedTime - received).toFixed(1)}`
      );
      // An offline node that beats is online from now on: the sweeper records it at its next tick (the node
      // document, the ledger and this process's cache follow within about 2 s).
      return {
        ok: true as const,
        node_id: nodeId,
        state: state === 'offline' ? 'online' : state,
        received_at: new Date(seenAt).toISOString(),
        next_heartbeat_within_s: config.NODE_OFFLINE_AFTER_S,
        // Figures the hub neither knows nor could keep (see core/federation/vocabulary.ts, HEARTBEAT_EXTRA_MAX_MEMBERS).
        ignored_fields: body.ignored
      };
    }
  );
};
