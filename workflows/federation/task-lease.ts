/**
 * task-leases/<core queue>: durable lease expiry for the federation's task queue (contract: task-lease.contract.ts).
 * Loop: sweep (a local activity: requeue or fail every lapsed task, report the earliest lease left), then sleep on a
 * durable timer until that expiry (or the idle interval when nothing is claimed), never sooner than min_interval_ms
 * after the last sweep. A `configure` signal replaces the settings and wakes it. A timer that came due while the
 * worker or the Temporal server was down fires when they are back, and the sweep then catches up on every lapsed
 * lease. Each round is a handful of history events whatever the number of tasks; continue-as-new bounds the history.
 */
import { condition, continueAsNew, proxyLocalActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import {
  configureSignal,
  EXPIRY_MARGIN_MS,
  IDLE_MAX_MS,
  TaskLeaseSettings,
  TaskLeasesInput,
  TaskLeasesStatus,
  taskLeasesStatusQuery
} from '../../contracts/federation/task-lease.contract';

const { sweepTaskLeases } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '60 seconds',
  localRetryThreshold: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});

const now = (): number => Date.now();

const valid = (s: TaskLeaseSettings | undefined): s is TaskLeaseSettings =>
  !!s && Number.isInteger(s.lease_s) && s.lease_s >= 1 && Number.isInteger(s.max_attempts) && s.max_attempts >= 1;

export async function taskLeasesWorkflow(input: TaskLeasesInput): Promise<never> {
  const status: TaskLeasesStatus = {
    lease_s: input.lease_s,
    max_attempts: input.max_attempts,
    sweeps: input.carried?.sweeps ?? 0,
    requeued: input.carried?.requeued ?? 0,
    failed: input.carried?.failed ?? 0,
    runs: input.carried?.runs ?? 0,
    last_sweep_at: null,
    next_wake_at: null
  };
  let woken = false;
  setHandler(taskLeasesStatusQuery, () => status);
  setHandler(configureSignal, (settings) => {
    if (!valid(settings)) return;
    status.lease_s = settings.lease_s;
    status.max_attempts = settings.max_attempts;
    woken = true;
  });

  for (;;) {
    if (workflowInfo().historyLength >= input.history_limit || workflowInfo().continueAsNewSuggested) {
      const { sweeps, requeued, failed, runs } = status;
      return continueAsNew<typeof taskLeasesWorkflow>({
        ...input,
        lease_s: status.lease_s,
        max_attempts: status.max_attempts,
        carried: { sweeps, requeued, failed, runs: runs + 1 }
      });
    }
    woken = false;
    const swept = await sweepTaskLeases({ max_attempts: status.max_attempts });
    const sweptAt = now();
    status.sweeps += 1;
    status.requeued += swept.requeued;
    status.failed += swept.failed;
    status.last_sweep_at = new Date(sweptAt).toISOString();
    if (swept.more) continue;

    const idleUntil = sweptAt + Math.min(status.lease_s * 1000, IDLE_MAX_MS);
    const due =
      swept.next_expiry_ms === null ? idleUntil : Math.min(idleUntil, swept.next_expiry_ms + EXPIRY_MARGIN_MS);
    const wakeAt = Math.max(due, sweptAt + input.min_interval_ms);
    status.next_wake_at = new Date(wakeAt).toISOString();
    await condition(() => woken, Math.max(1, wakeAt - now()));
  }
}
