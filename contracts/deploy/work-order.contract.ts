/**
 * What the API, operators and the work-order workflow share. inbox_push of POST /dal/deploy starts
 * `work-order/<instruction_id>`, which holds the order's KERNEL.EVOLUTION.DIRECTIVE.* truth for the high-risk
 * approval as its child `truth-approval/<approval_id>` (the same workflow, routes, signals and CLI as any held
 * write); once approved, the truth is in the ledger and the order is put in the node's queue (GET
 * /api/instructions/<node_id>); rejected or expired, it never is. The outcome is a ledger record
 * `hub.deploy.inbox_pushed` or `hub.deploy.inbox_refused`.
 */
import type { FlowTaskQueues } from '../task-queues';
import type { TruthApprovalInput } from '../ledger/truth-approval.contract';

export const workOrderWorkflowId = (instructionId: string): string => `work-order/${instructionId}`;
/** The workflow, its child and their activities (MongoDB only) run on core. */
export const WORK_ORDER_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };

export interface WorkOrderInput {
  version: 1;
  instruction_id: string;
  node_id: string;
  /** The child's input: the held truth (key, canonical value, the pusher's DID). */
  approval: TruthApprovalInput;
  hub_did: string;
  actor: string;
}

export interface WorkOrderResult {
  instruction_id: string;
  approval_id: string;
  state: 'approved' | 'rejected' | 'expired';
  /** The approved truth's ledger seq (null unless approved). */
  truth_seq: number | null;
  ledger_seq: number;
}
