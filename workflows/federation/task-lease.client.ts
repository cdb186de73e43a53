/**
 * The client side of task-leases/<core queue>, for the claim route: make sure the sweeper runs with this process's
 * settings. Signal-with-start of `configure`: it starts the workflow when absent and otherwise only passes the
 * settings (and wakes it). Not part of the workflow bundle.
 */
import type { Client } from '@temporalio/client';
import { taskQueueFor } from '../../contracts/task-queues';
import type { taskLeasesWorkflow } from './task-lease';
import {
  configureSignal,
  DEFAULT_HISTORY_LIMIT,
  DEFAULT_MIN_INTERVAL_MS,
  TaskLeaseSettings,
  taskLeasesWorkflowId,
  TASK_LEASES_TASK_QUEUES
} from '../../contracts/federation/task-lease.contract';

export async function ensureTaskLeaseSweeper(
  client: Client,
  coreQueue: string,
  settings: TaskLeaseSettings
): Promise<void> {
  await client.workflow.signalWithStart<typeof taskLeasesWorkflow, [TaskLeaseSettings]>('taskLeasesWorkflow', {
    workflowId: taskLeasesWorkflowId(coreQueue),
    taskQueue: taskQueueFor(coreQueue, TASK_LEASES_TASK_QUEUES.workflow),
    args: [{ version: 1, ...settings, min_interval_ms: DEFAULT_MIN_INTERVAL_MS, history_limit: DEFAULT_HISTORY_LIMIT }],
    signal: configureSignal,
    signalArgs: [settings]
  });
}

/**
 * Calls ensureTaskLeaseSweeper in the background at most once per `everyMs` (and again soon after a failure), so a
 * claim never waits for Temporal and never fails because it is down (the reads sweep meanwhile).
 */
export function taskLeaseSweeperKeeper(
  client: Client,
  coreQueue: string,
  settings: TaskLeaseSettings,
  onError: (err: unknown) => void,
  everyMs = 10 * 60_000
) {
  let nextAt = 0;
  let inFlight = false;
  return (): void => {
    const t = Date.now();
    if (inFlight || t < nextAt) return;
    inFlight = true;
    ensureTaskLeaseSweeper(client, coreQueue, settings).then(
      () => {
        nextAt = Date.now() + everyMs;
        inFlight = false;
      },
      (err: unknown) => {
        nextAt = Date.now() + 5_000;
        inFlight = false;
        onError(err);
      }
    );
  };
}
