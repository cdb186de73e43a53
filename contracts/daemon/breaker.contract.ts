/**
 * What the API, the daemon-dag workflows and operators share about the daemon's circuit breaker, one long-lived
 * workflow `daemon-breaker/<core task queue>` (one per daemon deployment; it continues as new). States: closed (calls
 * run), open (after DAEMON_BREAKER_THRESHOLD consecutive failed model calls: no call runs, tasks wait as `paused`),
 * half_open (after DAEMON_BREAKER_COOLDOWN_S one probe task runs; success closes, failure opens again). A DAG task
 * asks with the admit signal and gets its answer as a signal back; it reports its call's outcome.
 * Operators: `BreakerState = "open"` in the Web UI, and a reset:
 *   temporal workflow signal --workflow-id daemon-breaker/zhongshu-hub --name daemonBreakerReset --input '{"actor":"operator"}'
 * (or `npm run admin -- daemon-breaker-reset`).
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';

export const daemonBreakerWorkflowId = (coreQueue: string): string => `daemon-breaker/${coreQueue}`;
export const DAEMON_BREAKER_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };

export const BREAKER_STATES = ['closed', 'open', 'half_open'] as const;
export type BreakerStateName = (typeof BREAKER_STATES)[number];

export interface BreakerRequester {
  workflow_id: string;
  task_id: string;
}

export interface BreakerSnapshot {
  state: BreakerStateName;
  consecutive_failures: number;
  /** Workflow time (ms since the epoch) the breaker last opened. */
  opened_at: number | null;
  probe: BreakerRequester | null;
  /** Tasks paused while open, answered in order when it closes (the first becomes the probe when half-open). */
  waiting: BreakerRequester[];
  changes: number;
}

export interface BreakerInput {
  version: 1;
  threshold: number;
  cooldown_ms: number;
  /** Continue as new past this many history events (default 2000). */
  history_limit?: number;
  /** Carried over by continue-as-new. */
  carried?: BreakerSnapshot;
}

export interface BreakerView extends BreakerSnapshot {
  threshold: number;
  cooldown_ms: number;
  /** When the breaker goes half-open (ISO time), while open. */
  half_open_at: string | null;
}

export interface BreakerAnswer {
  task_id: string;
  /** true: call now; false: paused (another answer follows when the task may run). */
  allowed: boolean;
  probe: boolean;
  state: BreakerStateName;
}

export interface BreakerReport extends BreakerRequester {
  /** true: the call succeeded; false: it failed; null: the task did not call after all (e.g. identity check failed). */
  ok: boolean | null;
}

export const breakerAdmitSignal = defineSignal<[BreakerRequester]>('daemonBreakerAdmit');
export const breakerReportSignal = defineSignal<[BreakerReport]>('daemonBreakerReport');
export const breakerResetSignal = defineSignal<[{ actor?: string }]>('daemonBreakerReset');
/** Sent by the breaker to the asking daemon-dag workflow. */
export const breakerAnswerSignal = defineSignal<[BreakerAnswer]>('daemonBreakerAnswer');
export const breakerStateQuery = defineQuery<BreakerView>('daemonBreakerState');
