/**
 * daemon-dag/<dag_id>: one dispatch's tasks in topological order, independent tasks in parallel up to
 * max_parallel. For each task, right before its model call: the two factors are re-checked against the current
 * credential state (an activity; failure → `rejected`, the asset isolated, no call), then the breaker admits it
 * (while open the task is `paused`), then the model is called on the models queue: a failed call (the model's
 * answer, or its time limit) is the task's failure, never retried, and counts for the breaker; an attempt lost with
 * its worker (killed: no heartbeat for 30 s; shut down: cancelled after the worker's grace time) is made again on
 * another worker, up to three attempts. A task whose dependency did not finish DONE is `skipped`. Each outcome is an
 * audit line; the DAG's final root is mirrored to the ledger. Completed calls are in the history, so a worker
 * restarted mid-DAG never repeats them.
 */
import { condition, getExternalWorkflowHandle, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { DaemonCoreActivities, DaemonModelActivities } from '../../activities/daemon';
import { DagState, DagTask, globalTaskId, resolveQuotes, TaskResult } from '../../core/daemon/dag';
import { taskQueueFor } from '../../contracts/task-queues';
import {
  BreakerAnswer,
  breakerAdmitSignal,
  breakerAnswerSignal,
  breakerReportSignal
} from '../../contracts/daemon/breaker.contract';
import { DagInput, DagView, dagStateQuery } from '../../contracts/daemon/dag.contract';

const core = proxyActivities<DaemonCoreActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' }
});

const message = (err: unknown): string => {
  const e = err as { cause?: { message?: string }; message?: string };
  return (e.cause?.message ?? e.message ?? String(err)).slice(0, 500);
};

export async function daemonDagWorkflow(input: DagInput): Promise<DagView> {
  const models = proxyActivities<DaemonModelActivities>({
    taskQueue: taskQueueFor(workflowInfo().taskQueue, 'models'),
    startToCloseTimeout: `${input.call_timeout_s + 15} seconds`,
    // The SDK sends heartbeats at most every 0.8 × this (24 s), so this leaves 6 s for a busy worker or server.
    heartbeatTimeout: '30 seconds',
    // The activity throws the model's failures as non-retryable; what is retried is a lost or cancelled attempt.
    retry: { maximumAttempts: 3, initialInterval: '1 second' }
  });
  const workflowId = workflowInfo().workflowId;
  const byId = new Map<string, DagTask>(input.tasks.map((t) => [t.id, t]));
  const results = new Map<string, TaskResult>(
    input.tasks.map((t) => [
      t.id,
      {
        task_id: globalTaskId(input.dag_id, t.id),
        id: t.id,
        model: t.model,
        depends_on: t.depends_on,
        status: 'queued',
        output: null,
        output_sha256: null,
        usage: null,
        cost: null,
        audit_root: null,
        error: null,
        started_at: null,
        finished_at: null
      }
    ])
  );
  const view: DagView = {
    dag_id: input.dag_id,
    workflow_id: workflowId,
    asset_id: input.asset_id,
    status: 'running',
    tasks: [],
    audit_root: null,
    submitted_at: input.submitted_at,
    finished_at: null,
    ledger_seq: null
  };
  setHandler(dagStateQuery, (): DagView => ({ ...view, tasks: input.order.map((id) => ({ ...results.get(id)! })) }));

  const answers = new Map<string, BreakerAnswer[]>();
  setHandler(breakerAnswerSignal, (a) => {
    const list = answers.get(a.task_id) ?? [];
    list.push(a);
    answers.set(a.task_id, list);
  });
  const breaker = getExternalWorkflowHandle(input.breaker_workflow_id);
  const nextAnswer = async (taskId: string): Promise<BreakerAnswer> => {
    await condition(() => (answers.get(taskId)?.length ?? 0) > 0);
    return answers.get(taskId)!.shift()!;
  };

  const audit = async (r: TaskResult, record: Parameters<DaemonCoreActivities['appendDaemonAudit']>[0]) => {
    const head = await core.appendDaemonAudit({
      asset_id: input.asset_id,
      dag_id: input.dag_id,
      task_id: r.task_id,
      ...record
    });
    r.audit_root = head.hash;
    view.audit_root = head.hash;
    return head;
  };
  let lastSeq: number | null = null;

  const identityOk = async (r: TaskResult): Promise<boolean> => {
    const check = await core.checkDaemonIdentity({
      asset_id: input.asset_id,
      order_root_sha256: input.order_root_sha256,
      order_root_version: input.order_root_version,
      dag_id: input.dag_id,
      task_id: r.task_id
    });
    if (check.ok) return true;
    r.status = 'rejected';
    r.error = `identity check failed: ${check.reason ?? ''}`;
    r.finished_at = new Date().toISOString();
    return false;
  };

  const runTask = async (task: DagTask): Promise<void> => {
    const r = results.get(task.id)!;
    const outputs: Record<string, string> = {};
    for (const d of task.depends_on) outputs[d] = results.get(d)!.output ?? '';
    if (!(await identityOk(r))) return;
    const me = { workflow_id: workflowId, task_id: task.id };
    await breaker.signal(breakerAdmitSignal, me);
    let a = await nextAnswer(task.id);
    if (!a.allowed) {
      r.status = 'paused';
      a = await nextAnswer(task.id);
      // Time has passed while paused: the factors are checked again right before the call.
      if (!(await identityOk(r))) {
        await breaker.signal(breakerReportSignal, { ...me, ok: null });
        return;
      }
    }
    r.status = 'running';
    r.started_at = new Date().toISOString();
    try {
      const out = await models.callDaemonModel({
        dag_id: input.dag_id,
        task_id: r.task_id,
        model: task.model,
        messages: resolveQuotes(task.messages, outputs),
        max_tokens: task.max_tokens,
        timeout_s: input.call_timeout_s
      });
      await breaker.signal(breakerReportSignal, { ...me, ok: true });
      r.output = out.output;
      r.output_sha256 = out.output_sha256;
      r.usage = out.usage;
      r.cost = out.cost;
      r.finished_at = new Date().toISOString();
      const head = await audit(r, {
        event: 'executed',
        model: task.model,
        probe: a.probe,
        output_sha256: out.output_sha256,
        prompt_tokens: out.usage.prompt_tokens,
        completion_tokens: out.usage.completion_tokens,
        cost: out.cost
      });
      lastSeq = head.seq;
      r.status = 'DONE';
    } catch (err) {
      await breaker.signal(breakerReportSignal, { ...me, ok: false });
      r.status = 'failed';
      r.error = message(err);
      r.finished_at = new Date().toISOString();
      lastSeq = (await audit(r, { event: 'failed', model: task.model, probe: a.probe, reason: r.error })).seq;
    }
  };

  const terminal = (id: string) => ['DONE', 'failed', 'skipped', 'rejected'].includes(results.get(id)!.status);
  const started = new Set<string>();
  let running = 0;
  let changes = 0;
  const inFlight: Promise<void>[] = [];
  while (!input.order.every(terminal)) {
    let progressed = false;
    for (const id of input.order) {
      const r = results.get(id)!;
      if (r.status !== 'queued' || started.has(id)) continue;
      const task = byId.get(id)!;
      const deps = task.depends_on.map((d) => results.get(d)!);
      if (deps.some((d) => terminal(d.id) && d.status !== 'DONE')) {
        r.status = 'skipped';
        r.error = `dependency ${deps.find((d) => terminal(d.id) && d.status !== 'DONE')!.id} did not finish DONE`;
        r.finished_at = new Date().toISOString();
        lastSeq = (await audit(r, { event: 'skipped', reason: r.error })).seq;
        progressed = true;
        continue;
      }
      if (deps.every((d) => d.status === 'DONE') && running < input.max_parallel) {
        running++;
        started.add(id);
        inFlight.push(
          runTask(task).finally(() => {
            running--;
            changes++;
          })
        );
        progressed = true;
      }
    }
    if (progressed) continue;
    const seen = changes;
    await condition(() => changes !== seen);
  }
  await Promise.all(inFlight);

  const statuses = input.order.map((id) => results.get(id)!.status);
  const status: DagState = statuses.every((s) => s === 'DONE')
    ? 'DONE'
    : statuses.some((s) => s === 'rejected')
      ? 'rejected'
      : 'failed';
  view.status = status;
  view.finished_at = new Date().toISOString();
  const mirrored = await core.mirrorDaemonRoot({
    dag_id: input.dag_id,
    workflow_id: workflowId,
    status,
    audit_root: view.audit_root,
    audit_seq: lastSeq,
    tasks: input.order.map((id) => ({
      task_id: results.get(id)!.task_id,
      status: results.get(id)!.status,
      output_sha256: results.get(id)!.output_sha256
    }))
  });
  view.ledger_seq = mirrored.seq;
  return { ...view, tasks: input.order.map((id) => ({ ...results.get(id)! })) };
}
