/**
 * What the API, operators and the truth-approval workflow share: id scheme, input, signals, query, states.
 * Approvers can signal from the API, the Temporal Web UI or the CLI, e.g.
 *   temporal workflow signal --workflow-id truth-approval/<id> --name approve --input '{"approver":"alice","reason":"checked"}'
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';

export const truthApprovalWorkflowId = (approvalId: string): string => `truth-approval/${approvalId}`;

/** Task queues (contracts/task-queues.ts): the workflow and its activities (MongoDB only) run on the core queue. */
export const TRUTH_APPROVAL_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };

export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'expired';

/** The truth write being held, exactly as it will be appended (value as canonical JSON text). */
export interface HeldTruth {
  key: string;
  value_json: string;
  truth_type: string | null;
  did: string;
  /** The writer's Idempotency-Key, if any, carried into the final append. */
  idempotency_key: string | null;
}

export interface TruthApprovalInput {
  version: 1;
  approval_id: string;
  truth: HeldTruth;
  /** Why it was held: "truth_type risk", "key prefix KERNEL.EVOLUTION.DIRECTIVE.", … */
  held_because: string;
  requested_at: string;
  timeout_seconds: number;
  /** The hub's own DID, under which the decision is recorded in the ledger. */
  hub_did: string;
}

export interface ApprovalDecision {
  /** Who decided: the approver's principal id (token id or DID), or a name given on the CLI. */
  approver: string;
  reason: string;
}

export interface TruthApprovalStatus {
  approval_id: string;
  state: ApprovalState;
  key: string;
  truth_type: string | null;
  did: string;
  held_because: string;
  requested_at: string;
  expires_at: string;
  decided_at: string | null;
  approver: string | null;
  reason: string | null;
  /** Set once the approved truth is appended. */
  seq: number | null;
  event_id: string | null;
  /** The ledger entry that records the decision itself. */
  decision_seq: number | null;
}

/** A held write's status before any decision (the workflow's start state, and the API's view without a worker). */
export function pendingApprovalStatus(
  held: Pick<
    TruthApprovalStatus,
    'approval_id' | 'key' | 'truth_type' | 'did' | 'held_because' | 'requested_at' | 'expires_at'
  >
): TruthApprovalStatus {
  return {
    ...held,
    state: 'pending',
    decided_at: null,
    approver: null,
    reason: null,
    seq: null,
    event_id: null,
    decision_seq: null
  };
}

/** What the workflow's memo holds (written at start by the client module; shown in the Web UI's list). */
export type TruthApprovalMemo = Pick<
  TruthApprovalStatus,
  'key' | 'truth_type' | 'did' | 'held_because' | 'requested_at' | 'expires_at'
>;

export const approveSignal = defineSignal<[ApprovalDecision]>('approve');
export const rejectSignal = defineSignal<[ApprovalDecision]>('reject');
export const approvalStatusQuery = defineQuery<TruthApprovalStatus>('approvalStatus');
