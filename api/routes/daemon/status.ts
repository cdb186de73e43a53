/**
 * The local daemon's status (loopback listener only): 200 for a caller that passes the two-factor identity check
 * (X-Asset-Id + X-Order-Root of the current protocol version), 403 otherwise. GET /health stays public. Reports the
 * queue (DAGs running), the circuit breaker (daemon-breaker/<queue>) and the audit chain's length and root.
 */
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config, DaemonConfig, TemporalConfig } from '../../../core/config.node';
import { AuditChainError, auditChainFor } from '../../../core/daemon/audit.node';
import { BREAKER_STATES } from '../../../contracts/daemon/breaker.contract';
import { countRunningDags, readBreaker } from '../../../workflows/daemon/dag.client';

const statusResponse = z.object({
  ok: z.literal(true),
  status: z.literal('up'),
  asset_id: z.string(),
  protocol_version: z.number().int(),
  started_at: z.string(),
  queue: z.object({
    running_dags: z.number().int().nullable().describe('null when Temporal visibility did not answer'),
    max_parallel: z.number().int()
  }),
  breaker: z.object({
    state: z.enum([...BREAKER_STATES, 'not_started']).describe('not_started: no dispatch yet'),
    consecutive_failures: z.number().int(),
    threshold: z.number().int(),
    cooldown_s: z.number(),
    half_open_at: z.string().nullable(),
    waiting: z.number().int().describe('tasks paused until it closes'),
    workflow_id: z.string()
  }),
  audit: z.object({
    file: z.string(),
    length: z.number().int(),
    root: z.string(),
    error: z.string().nullable().describe('e.g. a torn last line: run npm run daemon:verify')
  })
});

export const daemonStatusRoutes: FastifyPluginAsyncZod<{
  config: Pick<
    DaemonConfig,
    'DAEMON_PROTOCOL_VERSION' | 'DAEMON_MAX_PARALLEL' | 'DAEMON_BREAKER_THRESHOLD' | 'DAEMON_BREAKER_COOLDOWN_S'
  > &
    Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'> &
    Pick<Config, 'dataDir'>;
  temporal: Client;
}> = async (app, { config, temporal }) => {
  const started = new Date().toISOString();
  const chain = auditChainFor(config.dataDir);
  const queue = config.TEMPORAL_TASK_QUEUE;
  app.get('/status', { config: { auth: 'daemon' }, schema: { response: { 200: statusResponse } } }, async (request) => {
    const [breaker, running] = await Promise.all([
      readBreaker(temporal, queue).catch(() => null),
      countRunningDags(temporal, queue)
    ]);
    let audit: { length: number; root: string; error: string | null };
    try {
      const head = chain.readHead();
      audit = { length: head.seq, root: head.hash, error: null };
    } catch (err) {
      if (!(err instanceof AuditChainError)) throw err;
      audit = { length: -1, root: '', error: err.message };
    }
    return {
      ok: true as const,
      status: 'up' as const,
      asset_id: request.principal!.id,
      protocol_version: config.DAEMON_PROTOCOL_VERSION,
      started_at: started,
      queue: { running_dags: running, max_parallel: config.DAEMON_MAX_PARALLEL },
      breaker: {
        state: breaker?.state ?? ('not_started' as const),
        consecutive_failures: breaker?.consecutive_failures ?? 0,
        threshold: breaker?.threshold ?? config.DAEMON_BREAKER_THRESHOLD,
        cooldown_s: (breaker?.cooldown_ms ?? config.DAEMON_BREAKER_COOLDOWN_S * 1000) / 1000,
        half_open_at: breaker?.half_open_at ?? null,
        waiting: breaker?.waiting.length ?? 0,
        workflow_id: `daemon-breaker/${queue}`
      },
      audit: { file: chain.file, ...audit }
    };
  });
};
