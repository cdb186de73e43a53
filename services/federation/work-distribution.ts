/**
 * Work distribution: worker nodes claim queued tasks whose required capabilities they declared, each under a lease of
 * TASK_LEASE_S, extend it with progress, and finish with a result or a failure; and see which nodes are online. A
 * claim also makes sure the task-leases sweeper runs (in the background, at most every 10 min): lapsed leases are
 * still swept at every read meanwhile. The routes are api/routes/federation/work.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { A2aConfig, TemporalConfig } from '../../core/config.node';
import { AppError, conflict, notFound } from '../../core/errors';
import { canonicalJson, type JsonValue } from '../../core/ledger/canonical-json';
import { NODE_PERMISSIONS } from '../../core/federation/vocabulary';
import type { NodeStore } from '../../store/federation/nodes';
import { SHARED_SNAPSHOT_MS, type PresenceStore } from '../../store/federation/presence';
import type { ClaimOutcome, TaskDocument, TaskStore } from '../../store/federation/tasks';
import { taskLeaseSweeperKeeper } from '../../workflows/federation/task-lease.client';
import { publicTask } from './federation-tasks';

/** A Message a node sends (a question, or its answer): A2A Parts and metadata. */
export type NodeMessage = { parts: Record<string, unknown>[]; metadata?: Record<string, unknown> };
/** An A2A Artifact as a node sends it. */
export type A2aArtifact = { artifactId: string; parts: Record<string, unknown>[] } & Record<string, unknown>;
/** What a node may finish a task with. */
export type NodeOutcome = { result?: Record<string, unknown>; artifacts?: A2aArtifact[]; message?: NodeMessage };

/** A node's message as an A2A agent Message in the task's context (a direct reply names no task: none was asked). */
function agentMessage(task: TaskDocument, m: NodeMessage, inTask: boolean): JsonValue {
  return {
    messageId: `msg_${randomBytes(12).toString('hex')}`,
    role: 'ROLE_AGENT',
    parts: m.parts,
    contextId: task.context_id ?? task._id,
    ...(inTask ? { taskId: task._id } : {}),
    ...(m.metadata ? { metadata: m.metadata } : {})
  } as unknown as JsonValue;
}

/** A node's call on a task it does not hold, as an error. */
function refused(outcome: Extract<ClaimOutcome, { ok: false }>, taskId: string): never {
  if (outcome.reason === 'not_found') throw notFound(`No task ${taskId}`);
  if (outcome.reason === 'canceled')
    throw conflict(`Task ${taskId} was canceled by its submitter`, { state: 'canceled' });
  if (outcome.reason === 'waiting')
    throw conflict(`Task ${taskId} waits for its submitter's input; it comes back through a claim once answered`, {
      state: 'input_required'
    });
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

    /**
     * The outcome: the task is done, with a result (any JSON object), artifacts (A2A Artifacts), or a Message as the
     * answer (A2A's direct reply), any of them.
     */
    async complete(taskId: string, nodeId: string, outcome: NodeOutcome) {
      const updates = (outcome.artifacts ?? []).map((artifact) =>
        canonicalJson({ artifact, append: false, lastChunk: true } as unknown as JsonValue)
      );
      const { message } = outcome;
      return finished(
        taskId,
        await tasks.finish(taskId, nodeId, {
          result_json: outcome.result ? canonicalJson(outcome.result as JsonValue) : null,
          artifact_updates_json: updates,
          ...(message ? { reply: (t: TaskDocument) => canonicalJson(agentMessage(t, message, false)) } : {})
        })
      );
    },

    /**
     * The node asks its submitter for more (A2A input-required), with a question or none: the task waits, with no
     * lease, until the submitter answers (then a claim of this node hands it back) or cancels it.
     */
    async requireInput(taskId: string, nodeId: string, question: NodeMessage | null) {
      const asked = question ? (t: TaskDocument) => canonicalJson(agentMessage(t, question, true)) : null;
      return finished(taskId, await tasks.requireInput(taskId, nodeId, asked));
    },

    /** An artifact (or a chunk of one: `append`) while the node works; extends the lease like progress. */
    async addArtifact(
      taskId: string,
      nodeId: string,
      update: { artifact: A2aArtifact; append: boolean; last_chunk: boolean }
    ) {
      const json = canonicalJson({
        artifact: update.artifact,
        append: update.append,
        lastChunk: update.last_chunk
      } as unknown as JsonValue);
      return finished(taskId, await tasks.addArtifact(taskId, nodeId, json, leaseMs));
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
