/**
 * The client side of the daemon's workflows, for the routes and the admin CLI: make sure the breaker runs, start a
 * daemon-dag/<dag_id>, wait for it, read its state, read and reset the breaker. Not part of the workflow bundle.
 */
import {
  Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError
} from '@temporalio/client';
import { AppError } from '../../core/errors';
import { BreakerStateAttr } from '../../core/search-attributes';
import { startWorkflowWithRetry, within } from '../client-support';
import { taskQueueFor } from '../../contracts/task-queues';
import type { daemonBreakerWorkflow } from './breaker';
import {
  BreakerInput,
  BreakerView,
  breakerResetSignal,
  breakerStateQuery,
  daemonBreakerWorkflowId,
  DAEMON_BREAKER_TASK_QUEUES
} from '../../contracts/daemon/breaker.contract';
import type { daemonDagWorkflow } from './dag';
import {
  DAEMON_DAG_TASK_QUEUES,
  DagInput,
  DagView,
  daemonDagWorkflowId,
  dagStateQuery
} from '../../contracts/daemon/dag.contract';

/** Starts the breaker unless it runs already (its id is fixed per core queue). */
export async function ensureBreaker(
  client: Client,
  coreQueue: string,
  settings: { threshold: number; cooldown_ms: number }
): Promise<string> {
  const workflowId = daemonBreakerWorkflowId(coreQueue);
  const input: BreakerInput = { version: 1, ...settings };
  try {
    await startWorkflowWithRetry<typeof daemonBreakerWorkflow>(client, 'daemonBreakerWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(coreQueue, DAEMON_BREAKER_TASK_QUEUES.workflow),
      args: [input],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: [{ key: BreakerStateAttr, value: 'closed' }]
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  return workflowId;
}

export async function startDag(client: Client, coreQueue: string, input: DagInput): Promise<string> {
  const workflowId = daemonDagWorkflowId(input.dag_id);
  try {
    await startWorkflowWithRetry<typeof daemonDagWorkflow>(client, 'daemonDagWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(coreQueue, DAEMON_DAG_TASK_QUEUES.workflow),
      args: [input],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      memo: { asset_id: input.asset_id, tasks: input.tasks.length }
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError)
      throw new AppError('conflict', `dag_id ${input.dag_id} was used already (${workflowId}); choose another`, {
        workflow_id: workflowId
      });
    throw err;
  }
  return workflowId;
}

/** The DAG's outcome, or null when it has not finished within `ms`. */
export async function waitDag(client: Client, dagId: string, ms: number): Promise<DagView | null> {
  return within(ms, client.workflow.getHandle<typeof daemonDagWorkflow>(daemonDagWorkflowId(dagId)).result());
}

/** The DAG's current state (its outcome once finished), or null when there is no such DAG. */
export async function readDag(client: Client, dagId: string): Promise<DagView | null> {
  const handle = client.workflow.getHandle<typeof daemonDagWorkflow>(daemonDagWorkflowId(dagId));
  try {
    const d = await handle.describe();
    if (d.status.name === 'COMPLETED') return await handle.result();
    const view = await within(10_000, handle.query(dagStateQuery));
    if (!view)
      throw new AppError(
        'unavailable',
        `${handle.workflowId} did not answer within 10 s (is a worker running?); retry`,
        {},
        { 'Retry-After': '5' }
      );
    return view;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
}

export async function readBreaker(client: Client, coreQueue: string): Promise<BreakerView | null> {
  try {
    return await within(
      5_000,
      client.workflow
        .getHandle<typeof daemonBreakerWorkflow>(daemonBreakerWorkflowId(coreQueue))
        .query(breakerStateQuery)
    );
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
}

export async function resetBreaker(client: Client, coreQueue: string, actor: string): Promise<void> {
  await client.workflow.getHandle(daemonBreakerWorkflowId(coreQueue)).signal(breakerResetSignal, { actor });
}

/** DAGs of this daemon still running (Temporal visibility). */
export async function countRunningDags(client: Client, coreQueue: string): Promise<number | null> {
  try {
    const res = await client.workflow.count(
      `WorkflowType = "daemonDagWorkflow" AND ExecutionStatus = "Running" AND TaskQueue = "${taskQueueFor(coreQueue, 'core')}"`
    );
    return res.count;
  } catch {
    return null;
  }
}
