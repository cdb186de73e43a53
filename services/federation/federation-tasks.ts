/**
 * The federation's task queue (store/federation/tasks.ts) as its users meet it: submitters queue tasks
 * (POST /a2a/task, hub listener) and read them back, anyone reads the queue's figures, and the task as every answer
 * shows it (publicTask), for submitters and for the worker nodes that claim them (./work-distribution.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { canonicalJson, type JsonValue } from '../../core/ledger/canonical-json';
import { notFound } from '../../core/errors';
import { RawJson } from '../../core/raw-json';
import type { Config } from '../../core/config.node';
import type { TaskBody } from '../../core/federation/vocabulary';
import type { TaskDocument, TaskStore } from '../../store/federation/tasks';

/**
 * A task as the API shows it: payload, result and the conversation after the payload's message (`history`: the
 * node's questions and the submitter's answers, A2A Messages) as canonical JSON; the claim id, the artifacts and a
 * direct answer (the A2A binding's to show) left out.
 */
export const publicTask = (t: TaskDocument) => {
  const {
    _id,
    payload_json,
    result_json,
    history_json,
    artifact_updates_json: _artifacts,
    reply_json: _reply,
    resumed: _resumed,
    claim_id: _claim,
    claimed_at,
    finished_at,
    progress,
    context_id,
    ...rest
  } = t;
  return {
    task_id: _id,
    ...rest,
    claimed_at: claimed_at ?? null,
    finished_at: finished_at ?? null,
    progress: progress ?? null,
    context_id: context_id ?? null,
    payload: new RawJson(payload_json),
    history: (history_json ?? []).map((m) => new RawJson(m)),
    result: result_json === null ? null : new RawJson(result_json)
  };
};

export type FederationTasks = ReturnType<typeof createFederationTasks>;

export function createFederationTasks({ tasks, config }: { tasks: TaskStore; config: Pick<Config, 'hubPublicUrl'> }) {
  return {
    /** Queues a task; with an Idempotency-Key a retry returns the first task instead of queuing a second one. */
    async submit(submitter: string, body: TaskBody, idempotencyKey: string | undefined) {
      const id = idempotencyKey
        ? `task_${createHash('sha256').update(`${submitter}\n${idempotencyKey}`).digest('hex').slice(0, 24)}`
        : `task_${randomBytes(12).toString('hex')}`;
      const { task, duplicate } = await tasks.submit({
        _id: id,
        type: body.type,
        payload_json: canonicalJson(body.payload as JsonValue),
        required_capabilities: body.required_capabilities,
        priority: body.priority,
        submitted_by: submitter
      });
      return {
        ok: true as const,
        task_id: task._id,
        state: task.state,
        duplicate,
        task: publicTask(task),
        status_url: `${config.hubPublicUrl}/a2a/task/${task._id}`
      };
    },

    async find(taskId: string) {
      const task = await tasks.find(taskId);
      if (!task) throw notFound(`No task ${taskId}`);
      return { ok: true as const, task: publicTask(task) };
    }
  };
}

/** The queue's figures: depth (queued), in flight (claimed), outcomes, mean wait and run times. */
export async function queueStats(tasks: TaskStore) {
  const s = await tasks.stats();
  return {
    ok: true as const,
    depth: s.queued,
    in_flight: s.claimed,
    input_required: s.input_required,
    done: s.done,
    failed: s.failed,
    canceled: s.canceled,
    mean_wait_s: s.mean_wait_s,
    mean_run_s: s.mean_run_s,
    total: s.total,
    open_by_type: s.by_type,
    at: new Date().toISOString()
  };
}
