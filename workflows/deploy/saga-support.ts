/**
 * What deploy/<target> and deploy-config share inside the workflow sandbox: the ledger proxy, the commands-queue
 * proxy (derived from the run's own queue, so made per run: contracts/task-queues.ts) and the error text a step
 * records. Deterministic: no I/O, no Node built-ins.
 */
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import type { DeployActivities } from '../../activities/deploy';
import { taskQueueFor } from '../../contracts/task-queues';

export const { appendLedgerEntry } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});

/** The deploy activities on this run's commands queue: three attempts, then the step fails. */
export function commandsProxy(nonRetryableErrorTypes: string[] = []) {
  return proxyActivities<DeployActivities>({
    taskQueue: taskQueueFor(workflowInfo().taskQueue, 'commands'),
    startToCloseTimeout: '30 seconds',
    retry: {
      initialInterval: '500 milliseconds',
      backoffCoefficient: 2,
      maximumInterval: '5 seconds',
      maximumAttempts: 3,
      nonRetryableErrorTypes
    }
  });
}

/** A failed step's error as recorded: the activity's own message when Temporal wrapped it, cut at `max` chars. */
export function stepError(err: unknown, max: number): string {
  const e = err as { cause?: { message?: string }; message?: string };
  return (e.cause?.message ?? e.message ?? String(err)).slice(0, max);
}
