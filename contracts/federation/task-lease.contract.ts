/**
 * What the API, operators and the task-leases/<core queue> workflow share. One sweeper per hub (per core task queue:
 * each hub has its own): it sleeps on a durable timer until the earliest lease of a claimed task ends, then returns
 * lapsed tasks to the queue (or fails them after TASK_MAX_ATTEMPTS) in the database, and sleeps again. The API starts
 * it (signal-with-start of `configure`, carrying TASK_LEASE_S and TASK_MAX_ATTEMPTS) when a node claims work; it
 * runs for good, continuing as new to keep its history bounded. Operators can look at it:
 *   temporal workflow query --workflow-id task-leases/zhongshu-hub --type taskLeasesStatus
 * and wake it at once (a sweep now):
 *   temporal workflow signal --workflow-id task-leases/zhongshu-hub --name configure --input '{"lease_s":300,"max_attempts":3}'
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';

export const taskLeasesWorkflowId = (coreQueue: string): string => `task-leases/${coreQueue}`;

/** The workflow and its one (local) activity, a MongoDB sweep, run on the core queue. */
export const TASK_LEASES_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };

export interface TaskLeaseSettings {
  /** TASK_LEASE_S: with no claimed task the sweeper still looks this often (at most IDLE_MAX_MS). */
  lease_s: number;
  /** TASK_MAX_ATTEMPTS: a task whose lease lapses on this claim fails instead of going back to the queue. */
  max_attempts: number;
}

export interface TaskLeasesInput extends TaskLeaseSettings {
  version: 1;
  /** Two sweeps are at least this far apart (workflow load bounded however many leases end at distinct times). */
  min_interval_ms: number;
  /** Continue as new once the history has this many events. */
  history_limit: number;
  carried?: TaskLeasesTotals;
}

export interface TaskLeasesTotals {
  sweeps: number;
  requeued: number;
  failed: number;
  /** How many times the workflow continued as new. */
  runs: number;
}

export interface TaskLeasesStatus extends TaskLeasesTotals, TaskLeaseSettings {
  last_sweep_at: string | null;
  /** When the sweeper wakes next (the earliest lease expiry, or the idle interval). */
  next_wake_at: string | null;
}

/** The input of the sweep activity and what it finds. */
export interface LeaseSweepRequest {
  max_attempts: number;
}
export interface LeaseSweepResult {
  requeued: number;
  failed: number;
  /** A full batch was read: sweep again at once. */
  more: boolean;
  /** The earliest lease expiry left (ms since the epoch), or null when no task is claimed. */
  next_expiry_ms: number | null;
}

/**
 * With no claimed task the sweeper sleeps min(lease_s, IDLE_MAX_MS). Since every claim's lease is TASK_LEASE_S,
 * a claim made during such a sleep ends after the sleeper wakes, and one made while it sleeps toward an earlier
 * expiry ends after that expiry: a claim never needs to wake the sweeper, so claims cost Temporal nothing.
 * IDLE_MAX_MS bounds the delay should a process run with a shorter TASK_LEASE_S than the sweeper was told.
 */
export const IDLE_MAX_MS = 60_000;
/** The sweep wakes this long after the expiry it waits for (the store compares with a strict `<`). */
export const EXPIRY_MARGIN_MS = 50;
export const DEFAULT_MIN_INTERVAL_MS = 1_000;
export const DEFAULT_HISTORY_LIMIT = 1_000;

/** New settings (and a sweep now); the API sends it with signal-with-start. */
export const configureSignal = defineSignal<[TaskLeaseSettings]>('configure');
export const taskLeasesStatusQuery = defineQuery<TaskLeasesStatus>('taskLeasesStatus');
