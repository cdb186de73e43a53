/**
 * What the API, operators and the witness/<core queue>/<witness name> workflows share. One workflow per witness of
 * this hub's log (TLOG_WITNESSES, or a witness key pinned in the peer registry): it submits the hub's newest signed
 * checkpoint to the witness (C2SP tlog-witness, activities/tlog/witness.ts), keeps each cosignature that verifies
 * with the configured key, and sleeps until the next checkpoint (the API's `configure` signal, sent with the
 * settings whenever it signs one) or the poll interval. A witness that is down or refuses is tried again with a
 * doubling backoff; it never blocks signing or serving. Continues as new to keep its history bounded. A witness
 * removed (from TLOG_WITNESSES or the registry) is sent `retire` by the API (witness.client.ts): its workflow ends,
 * `retired`. The core task queue names the hub (hubs sharing a namespace each have their own). Operators:
 *   temporal workflow query --workflow-id 'witness/zhongshu-hub/<name>' --type tlogWitnessStatus
 *   temporal workflow list --query 'WorkflowType = "tlogWitnessWorkflow" AND WitnessState = "unreachable"'
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';

export const tlogWitnessWorkflowId = (coreQueue: string, witnessName: string): string =>
  `witness/${coreQueue}/${witnessName}`;

/** The workflow and its activity (MongoDB reads and writes, one HTTP request to the witness) run on the core queue. */
export const TLOG_WITNESS_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };

export interface TlogWitnessSettings {
  /** The hub's checkpoint origin (TLOG_ORIGIN). */
  origin: string;
  /** The witness: its name, cosignature verifier key and submission prefix (TLOG_WITNESSES, or a peer's pins). */
  name: string;
  verifier_key: string;
  url: string;
}

export interface TlogWitnessInput extends TlogWitnessSettings {
  version: 1;
  /** With nothing new, the workflow looks again this often (a lost `configure` signal costs at most this). */
  poll_ms: number;
  /** The backoff after a failed submission starts here and doubles up to max_backoff_ms. */
  backoff_ms: number;
  max_backoff_ms: number;
  /** Continue as new once the history has this many events. */
  history_limit: number;
  /** What the run before this one ended with (continue-as-new). */
  carried?: {
    rounds: number;
    cosigned: number;
    failures: number;
    runs: number;
    state?: TlogWitnessStatus['state'];
    cosigned_size?: number;
  };
}

/** One submission's outcome (activity submitToWitness). */
export interface WitnessRound {
  /** cosigned: a verified cosignature of `hub_size` is stored (or it was already); idle: nothing new to submit. */
  outcome: 'cosigned' | 'idle' | 'unreachable' | 'refused';
  /** The hub's newest signed checkpoint size. */
  hub_size: number;
  /** The largest size the witness cosigned with a verified cosignature. */
  cosigned_size: number;
  reason: string | null;
}

export interface TlogWitnessStatus extends TlogWitnessSettings {
  /** retired: ended by the `retire` signal (the witness is no longer configured); the workflow's result. */
  state: 'pending' | 'cosigned' | 'unreachable' | 'refused' | 'retired';
  cosigned_size: number;
  hub_size: number;
  reason: string | null;
  rounds: number;
  cosigned: number;
  /** Failed submissions in a row (the backoff's exponent). */
  failures: number;
  runs: number;
  next_round_at: string | null;
}

export const DEFAULT_WITNESS_POLL_MS = 60_000;
export const DEFAULT_WITNESS_BACKOFF_MS = 1_000;
export const DEFAULT_WITNESS_MAX_BACKOFF_MS = 5 * 60_000;
export const DEFAULT_WITNESS_HISTORY_LIMIT = 1_000;

/** The settings (from the API's configuration) and a round now: sent with signal-with-start at every new checkpoint. */
export const witnessConfigureSignal = defineSignal<[TlogWitnessSettings]>('configure');
/**
 * The witness is no longer configured (sent by an API process whose witnesses lack it): the workflow ends after
 * the round under way, with its status as result. Signal-with-start of `configure` starts it again if it is added back.
 */
export const witnessRetireSignal = defineSignal<[{ reason: string }]>('retire');
export const tlogWitnessStatusQuery = defineQuery<TlogWitnessStatus>('tlogWitnessStatus');
