/**
 * work-order/<instruction_id>: an execution-seed work order held for the high-risk approval, then queued for its
 * node. The approval is the child workflow truth-approval/<approval_id> (approvers decide it where they decide any
 * held write); only an approved order is inserted into the node's instruction queue (an idempotent activity).
 */
import { executeChild, ParentClosePolicy, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import { ApprovalStateAttr, TruthKeyAttr, TruthTypeAttr } from '../../core/search-attributes';
import type { truthApprovalWorkflow } from '../ledger/truth-approval';
import { truthApprovalWorkflowId, TruthApprovalMemo } from '../../contracts/ledger/truth-approval.contract';
import type { WorkOrderInput, WorkOrderResult } from '../../contracts/deploy/work-order.contract';

const { appendLedgerEntry, queueWorkOrder } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});

export async function workOrderWorkflow(input: WorkOrderInput): Promise<WorkOrderResult> {
  const a = input.approval;
  const memo: TruthApprovalMemo = {
    key: a.truth.key,
    truth_type: a.truth.truth_type,
    did: a.truth.did,
    held_because: a.held_because,
    requested_at: a.requested_at,
    expires_at: new Date(Date.parse(a.requested_at) + a.timeout_seconds * 1000).toISOString()
  };
  const status = await executeChild<typeof truthApprovalWorkflow>('truthApprovalWorkflow', {
    workflowId: truthApprovalWorkflowId(a.approval_id),
    taskQueue: workflowInfo().taskQueue,
    args: [a],
    memo,
    typedSearchAttributes: [
      { key: TruthKeyAttr, value: a.truth.key },
      { key: TruthTypeAttr, value: a.truth.truth_type ?? 'unknown' },
      { key: ApprovalStateAttr, value: 'pending' }
    ],
    // The approval stands on its own: it is decided (and recorded) even if this workflow were terminated.
    parentClosePolicy: ParentClosePolicy.ABANDON
  });
  const state = status.state === 'approved' ? 'approved' : status.state === 'rejected' ? 'rejected' : 'expired';
  if (state === 'approved') {
    await queueWorkOrder({
      instruction_id: input.instruction_id,
      node_id: input.node_id,
      key: a.truth.key,
      value_json: a.truth.value_json,
      approval_id: a.approval_id,
      pushed_by: a.truth.did
    });
  }
  const recorded = await appendLedgerEntry({
    kind: 'event',
    key: state === 'approved' ? 'hub.deploy.inbox_pushed' : 'hub.deploy.inbox_refused',
    value: {
      instruction_id: input.instruction_id,
      node_id: input.node_id,
      key: a.truth.key,
      approval_id: a.approval_id,
      state,
      truth_seq: status.seq,
      actor: input.actor
    },
    truth_type: null,
    did: input.hub_did,
    idempotency_key: `${workflowInfo().workflowId}/outcome`
  });
  return {
    instruction_id: input.instruction_id,
    approval_id: a.approval_id,
    state,
    truth_seq: status.seq,
    ledger_seq: recorded.seq
  };
}
