/**
 * truth-approval/<id>: a high-risk truth write held until a human approves or rejects it, or it expires.
 * Approved: the truth is appended (idempotently) and its seq/event_id become queryable. Rejected or expired:
 * nothing is appended. Every outcome is itself recorded in the ledger (who, when, why).
 * The history is small and bounded (one timer, at most two signals acted on, two activities): no continue-as-new.
 */
import {
  condition,
  log,
  proxyActivities,
  setDefaultSignalHandler,
  setHandler,
  upsertSearchAttributes,
  workflowInfo
} from '@temporalio/workflow';
import type { Activities } from '../../activities';
import {
  ApprovalDecision,
  ApprovalState,
  approvalStatusQuery,
  approveSignal,
  pendingApprovalStatus,
  rejectSignal,
  TruthApprovalInput,
  TruthApprovalStatus
} from '../../contracts/ledger/truth-approval.contract';
import { ApprovalStateAttr } from '../../core/search-attributes';

const { appendLedgerEntry } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});

export async function truthApprovalWorkflow(input: TruthApprovalInput): Promise<TruthApprovalStatus> {
  const requested = new Date(input.requested_at).getTime();
  const status: TruthApprovalStatus = pendingApprovalStatus({
    approval_id: input.approval_id,
    key: input.truth.key,
    truth_type: input.truth.truth_type,
    did: input.truth.did,
    held_because: input.held_because,
    requested_at: input.requested_at,
    expires_at: new Date(requested + input.timeout_seconds * 1000).toISOString()
  });
  let decision: { verdict: 'approved' | 'rejected'; by: ApprovalDecision } | undefined;

  const decide = (verdict: 'approved' | 'rejected') => (by: ApprovalDecision) => {
    // The first decision wins; later signals are ignored (they stay visible in the history).
    if (decision) return;
    decision = { verdict, by: { approver: String(by?.approver ?? 'unknown'), reason: String(by?.reason ?? '') } };
  };
  // Both decisions go through the default signal handler, not one setHandler each: setHandler at once replays
  // the signals buffered for its own name only, so an approve and a reject that both arrived before the first
  // workflow task would be applied in registration order. The default handler gets buffered signals in arrival
  // order, so the first decision sent is the one that wins. (Signal names and payloads are unchanged.)
  setDefaultSignalHandler((name, by) => {
    if (name === approveSignal.name) decide('approved')(by as ApprovalDecision);
    else if (name === rejectSignal.name) decide('rejected')(by as ApprovalDecision);
  });
  setHandler(approvalStatusQuery, () => status);

  // Workflow time counts from when the write was requested, so a late-starting worker does not extend the hold.
  const remainingMs = Math.max(0, requested + input.timeout_seconds * 1000 - Date.now());
  const decided = await condition(() => decision !== undefined, remainingMs);

  const finalState: ApprovalState = decided && decision ? decision.verdict : 'expired';
  status.decided_at = new Date(Date.now()).toISOString();
  status.approver = decision?.by.approver ?? null;
  status.reason =
    decision?.by.reason ?? (finalState === 'expired' ? `no decision within ${input.timeout_seconds} s` : null);

  if (finalState === 'approved') {
    const appended = await appendLedgerEntry({
      kind: 'truth',
      key: input.truth.key,
      value_json: input.truth.value_json,
      truth_type: input.truth.truth_type,
      did: input.truth.did,
      idempotency_key: input.truth.idempotency_key ?? `approval:${input.approval_id}`
    });
    status.seq = appended.seq;
    status.event_id = appended.event_id;
  }

  const recorded = await appendLedgerEntry({
    kind: 'event',
    key: `hub.truth_approval.${finalState}`,
    value: {
      approval_id: input.approval_id,
      decision: finalState,
      truth_key: input.truth.key,
      truth_type: input.truth.truth_type,
      writer_did: input.truth.did,
      approver: status.approver,
      reason: status.reason,
      decided_at: status.decided_at,
      seq: status.seq
    },
    truth_type: 'decision',
    did: input.hub_did,
    idempotency_key: `approval-decision:${input.approval_id}`
  });
  status.decision_seq = recorded.seq;
  status.state = finalState;
  upsertSearchAttributes([{ key: ApprovalStateAttr, value: finalState }]);
  log.info('truth approval decided', { workflowId: workflowInfo().workflowId, state: finalState, seq: status.seq });
  return status;
}
