/**
 * The client side of work-order/<instruction_id>, for the routes: start it (it answers at once; the approval is
 * decided later). Not part of the workflow bundle.
 */
import { Client, WorkflowIdReusePolicy, WorkflowNotFoundError } from '@temporalio/client';
import { taskQueueFor } from '../../contracts/task-queues';
import { startWorkflowWithRetry } from '../client-support';
import type { workOrderWorkflow } from './work-order';
import {
  WORK_ORDER_TASK_QUEUES,
  WorkOrderInput,
  workOrderWorkflowId
} from '../../contracts/deploy/work-order.contract';
import { truthApprovalWorkflowId } from '../../contracts/ledger/truth-approval.contract';

const CHILD_WAIT_POLLS = 50;

export async function startWorkOrder(
  client: Client,
  coreQueue: string,
  input: WorkOrderInput
): Promise<{ workflow_id: string; approval_workflow_id: string }> {
  const workflowId = workOrderWorkflowId(input.instruction_id);
  await startWorkflowWithRetry<typeof workOrderWorkflow>(client, 'workOrderWorkflow', {
    workflowId,
    taskQueue: taskQueueFor(coreQueue, WORK_ORDER_TASK_QUEUES.workflow),
    args: [input],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    memo: { node_id: input.node_id, key: input.approval.truth.key, actor: input.actor }
  });
  // The approval is the workflow's child, started by its first task: wait (briefly) until it exists, so the status
  // URL in the answer works at once. Past the wait the answer is the same; the approval appears a moment later.
  const approvalWorkflowId = truthApprovalWorkflowId(input.approval.approval_id);
  for (let i = 0; i < CHILD_WAIT_POLLS; i++) {
    try {
      await client.workflow.getHandle(approvalWorkflowId).describe();
      break;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { workflow_id: workflowId, approval_workflow_id: approvalWorkflowId };
}
