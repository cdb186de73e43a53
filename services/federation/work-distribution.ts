/**
 * Work distribution: worker nodes claim queued tasks whose required capabilities they declared, each under a lease of
 * TASK_LEASE_S, extend it with progress, and finish with a result or a failure; and see which nodes are online. A
 * claim also makes sure the task-leases sweeper runs (in the background, at most every 10 min): lapsed leases are
 * still swept at every read meanwhile. The routes are api/routes/federation/work.ts.
 */
import type { Client } from '@temporalio/client';
import type { A2aConfig, TemporalConfig } from '../../core/config.node';
import { AppError, conflict, notFound } from '../../core/errors';
import { canonicalJson, type JsonValue } from '../../core/ledger/canonical-json';
import { NODE_PERMISSIONS } from '../../core/federation/vocabulary';
import type { NodeStore } from '../../store/federation/nodes';
import { SHARED_SNAPSHOT_MS, type PresenceStore } from '../../store/federation/presence';
import type { ClaimOutcome, TaskStore } from '../../store/federation/tasks';
import { taskLeaseSweeperKeeper } from '../../workflows/federation/task-lease.client';
import { publicTask } from './federation-tasks';

/** A node's call on a task it does not hold, as an error. */
function refused(outcome: Extract<ClaimOutcome, { ok: false }>, taskId: string): never {
  if (outcome.reason === 'not_found') throw notFound(`No task ${taskId}`);
  if (outcome.reason === 'canceled')
    throw conflict(`Task ${taskId} was canceled by its submitter`, { state: 'canceled' });
  if (outcome.reason === 'finished')
    throw conflict(`Task ${taskId} is already ${outcome.task?.state}`, { state: outcome.task?.state });
  throw conflict(`Task ${taskId} is not claimed by this node (its lease lapsed, or another node holds it)`, {
    state: outcome.task?.state
  });
}

export type WorkDistribution = ReturnType<typeof createWorkDistribution>;

export function createWorkDistribution(
  {
    tasks,
    nodes,
    presence,
    temporal,
    config
  }: {
    tasks: TaskStore;
    nodes: NodeStore;
    presence: PresenceStore;
    temporal: Client;
    config: Pick<A2aConfig, 'TASK_LEASE_S' | 'TASK_MAX_ATTEMPTS'> & Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'>;
  },
  /** Hears that the sweeper could not be started (it is tried again at the next claim). */
  onSweeperError: (err: unknown) => void
) {
  const leaseMs = config.TASK_LEASE_S * 1000;
  const keepSweeper = taskLeaseSweeperKeeper(
    temporal,
    config.TEMPORAL_TASK_QUEUE,
    { lease_s: config.TASK_LEASE_S, max_attempts: config.TASK_MAX_ATTEMPTS },
    onSweeperError
  );
  const finished = (taskId: string, out: ClaimOutcome) =>
    out.ok ? { ok: true as const, task: publicTask(out.task) } : refused(out, taskId);

  return {
    /** Claims up to `max` queued tasks for an online, reviewed node (403 for any other). */
    async claim(nodeId: string, max: number) {
      const node = await nodes.findPublic(nodeId);
      if (!node) throw notFound(`No node ${nodeId}`);
      if (!NODE_PERMISSIONS[node.state].claimTasks)
        throw new AppError(
          'forbidden',
          `node ${nodeId} is ${node.state}; only an online, reviewed node may claim tasks`
        );
      const claimed = await tasks.claim(nodeId, node.capabilities, max, leaseMs);
      if (claimed.length) keepSweeper();
      return { ok: true as const, node_id: nodeId, lease_s: config.TASK_LEASE_S, tasks: claimed.map(publicTask) };
    },

    /** Extends the lease (and records a note); canceled: true once the submitter canceled the task. */
    async progress(taskId: string, nodeId: string, note: string | null) {
      const out = await tasks.progress(taskId, nodeId, note, leaseMs);
      if (out.ok) return { ok: true as const, canceled: false, task: publicTask(out.task) };
      if (out.reason === 'canceled' && out.task)
        return { ok: true as const, canceled: true, task: publicTask(out.task) };
      return refused(out, taskId);
    },

    /** The result: the task is done. */
    async complete(taskId: string, nodeId: string, result: Record<string, unknown>) {
      return finished(taskId, await tasks.finish(taskId, nodeId, { result_json: canonicalJson(result as JsonValue) }));
    },

    /** The reason: the task failed (no retry; a lapsed lease is what retries). */
    async fail(taskId: string, nodeId: string, reason: string) {
      return finished(taskId, await tasks.finish(taskId, nodeId, { error: reason }));
    },

    /** The online nodes (by seq, from the node index), with when each was last heard from. */
    async onlineNodes(limit: number, offset: number) {
      const [page, snapshot] = await Promise.all([
        nodes.list({ state: 'online' }, { limit, offset }),
        presence.recentSnapshot(SHARED_SNAPSHOT_MS)
      ]);
      return {
        ok: true as const,
        total: page.total,
        offset,
        limit,
        nodes: page.nodes.map((n) => {
          const seen = snapshot.nodes.get(n.node_id)?.seen_at;
          return {
            node_id: n.node_id,
            name: n.name,
            brand: n.brand,
            capabilities: n.capabilities,
            last_seen_at: seen !== undefined ? new Date(seen).toISOString() : null
          };
        })
      };
    }
  };
}
