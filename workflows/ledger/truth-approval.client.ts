/**
 * The client side of truth-approval/<id>, for the routes: hold a write for approval, read an approval's state, list
 * approvals, and send a decision. Workflow ids, the reuse policy, search attributes and the memo are built here and
 * nowhere else. Not part of the workflow bundle.
 */
import {
  Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError
} from '@temporalio/client';
import { AppError, notFound } from '../../core/errors';
import { ApprovalStateAttr, TruthKeyAttr, TruthTypeAttr } from '../../core/search-attributes';
import { taskQueueFor } from '../../contracts/task-queues';
import { startWorkflowWithRetry, within } from '../client-support';
import type { truthApprovalWorkflow } from './truth-approval';
import {
  ApprovalDecision,
  ApprovalState,
  approvalStatusQuery,
  approveSignal,
  pendingApprovalStatus,
  rejectSignal,
  TruthApprovalInput,
  TruthApprovalMemo,
  TruthApprovalStatus,
  truthApprovalWorkflowId,
  TRUTH_APPROVAL_TASK_QUEUES
} from '../../contracts/ledger/truth-approval.contract';

const WORKFLOW_TYPE = 'truthApprovalWorkflow';
/** How long a read waits for the worker to answer the query before falling back to the memo. */
const QUERY_WAIT_MS = 2_000;
/** How long a decision waits for the workflow to append and record it, so the answer is final. */
const DECISION_WAIT_MS = 10_000;

const expiresAt = (input: TruthApprovalInput) =>
  new Date(Date.parse(input.requested_at) + input.timeout_seconds * 1000).toISOString();

/** Whether truth-approval/<id> exists (running or closed): a retried held write finds its first hold. */
export async function approvalExists(client: Client, approvalId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(truthApprovalWorkflowId(approvalId)).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * Starts truth-approval/<id>; a second start with the same id (a retried write) finds the same workflow, and
 * `started` says which happened.
 */
export async function holdTruthForApproval(
  client: Client,
  coreQueue: string,
  input: TruthApprovalInput
): Promise<{ workflowId: string; started: boolean }> {
  const workflowId = truthApprovalWorkflowId(input.approval_id);
  const memo: TruthApprovalMemo = {
    key: input.truth.key,
    truth_type: input.truth.truth_type,
    did: input.truth.did,
    held_because: input.held_because,
    requested_at: input.requested_at,
    expires_at: expiresAt(input)
  };
  try {
    await startWorkflowWithRetry<typeof truthApprovalWorkflow>(client, WORKFLOW_TYPE, {
      workflowId,
      taskQueue: taskQueueFor(coreQueue, TRUTH_APPROVAL_TASK_QUEUES.workflow),
      args: [input],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: [
        { key: TruthKeyAttr, value: input.truth.key },
        { key: TruthTypeAttr, value: input.truth.truth_type ?? 'unknown' },
        { key: ApprovalStateAttr, value: 'pending' }
      ],
      memo
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    return { workflowId, started: false };
  }
  return { workflowId, started: true };
}

/**
 * The exact state: the query while running, the result once closed. A query needs a worker; when none answers
 * within QUERY_WAIT_MS the state comes from the search attributes and memo (what the Web UI shows).
 */
export async function approvalStatus(client: Client, approvalId: string): Promise<TruthApprovalStatus> {
  const handle = client.workflow.getHandle(truthApprovalWorkflowId(approvalId));
  try {
    const description = await handle.describe();
    if (description.status.name === 'RUNNING') {
      const answered = await within(
        QUERY_WAIT_MS,
        handle.query(approvalStatusQuery).catch(() => null)
      );
      if (answered) return answered;
      const memo = (description.memo ?? {}) as Partial<TruthApprovalMemo>;
      return pendingApprovalStatus({
        approval_id: approvalId,
        key: String(memo.key ?? description.typedSearchAttributes.get(TruthKeyAttr) ?? ''),
        truth_type: memo.truth_type ?? null,
        did: String(memo.did ?? ''),
        held_because: String(memo.held_because ?? ''),
        requested_at: String(memo.requested_at ?? description.startTime.toISOString()),
        expires_at: String(memo.expires_at ?? '')
      });
    }
    if (description.status.name === 'COMPLETED') return (await handle.result()) as TruthApprovalStatus;
    throw new AppError(
      'conflict',
      `approval workflow is ${description.status.name.toLowerCase()}; see the Temporal Web UI`
    );
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw notFound(`No approval ${approvalId}`);
    throw err;
  }
}

export interface ApprovalListing {
  approval_id: string;
  workflow_id: string;
  state: string;
  key: string;
  truth_type: string | null;
  did: string | null;
  held_because: string | null;
  requested_at: string | null;
}

/** Approvals in one state, from Temporal visibility (eventually consistent: a just-held write may take a moment). */
export async function listApprovals(
  client: Client,
  coreQueue: string,
  state: ApprovalState,
  limit: number
): Promise<ApprovalListing[]> {
  const running = state === 'pending' ? " AND ExecutionStatus = 'Running'" : '';
  const query = `WorkflowType = '${WORKFLOW_TYPE}' AND ${ApprovalStateAttr.name} = '${state}'${running} AND TaskQueue = '${taskQueueFor(coreQueue, TRUTH_APPROVAL_TASK_QUEUES.workflow)}'`;
  const approvals: ApprovalListing[] = [];
  for await (const wf of client.workflow.list({ query, pageSize: limit })) {
    const memo = (wf.memo ?? {}) as Partial<TruthApprovalMemo>;
    approvals.push({
      approval_id: wf.workflowId.replace(/^truth-approval\//, ''),
      workflow_id: wf.workflowId,
      state: wf.typedSearchAttributes.get(ApprovalStateAttr) ?? state,
      key: wf.typedSearchAttributes.get(TruthKeyAttr) ?? memo.key ?? '',
      truth_type: wf.typedSearchAttributes.get(TruthTypeAttr) ?? memo.truth_type ?? null,
      did: memo.did ?? null,
      held_because: memo.held_because ?? null,
      requested_at: memo.requested_at ?? null
    });
    if (approvals.length >= limit) break;
  }
  return approvals;
}

/**
 * Sends an approver's decision to a pending approval and waits (at most DECISION_WAIT_MS) for the workflow to act on
 * it. `final: false` means the worker has not answered yet: the decision is stored in Temporal and applied later.
 */
export async function decideApproval(
  client: Client,
  approvalId: string,
  verdict: 'approve' | 'reject',
  decision: ApprovalDecision
): Promise<{ approval: TruthApprovalStatus; final: boolean }> {
  const current = await approvalStatus(client, approvalId);
  if (current.state !== 'pending')
    throw new AppError('conflict', `approval ${approvalId} is already ${current.state}`, { approval: current });
  const handle = client.workflow.getHandle(truthApprovalWorkflowId(approvalId));
  await handle.signal(verdict === 'approve' ? approveSignal : rejectSignal, decision);
  const final = await within(DECISION_WAIT_MS, handle.result() as Promise<TruthApprovalStatus>);
  return { approval: final ?? current, final: final !== null };
}
