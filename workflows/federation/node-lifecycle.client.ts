/**
 * The client side of node/<node_id>, for the routes: start a registered node's lifecycle, wake an offline node on
 * a heartbeat, and send a review decision. Ids, reuse policy, search attributes and memo are built here only. Not
 * part of the workflow bundle.
 */
import {
  Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError
} from '@temporalio/client';
import type { NodeState } from '../../core/federation/vocabulary';
import { AppError } from '../../core/errors';
import { BrandAttr, NodeIdAttr, NodeStateAttr } from '../../core/search-attributes';
import { taskQueueFor } from '../../contracts/task-queues';
import { executeUpdateWithin, startWorkflowWithRetry } from '../client-support';
import type { nodeLifecycleWorkflow } from './node-lifecycle';
import {
  NodeLifecycleInput,
  NodeLifecycleMemo,
  NodeStatus,
  nodeWorkflowId,
  ReviewRequest,
  reviewUpdate,
  NODE_LIFECYCLE_TASK_QUEUES
} from '../../contracts/federation/node-lifecycle.contract';

/**
 * Starts node/<node_id>. A duplicate id of another registration is passed on (WorkflowExecutionAlreadyStartedError):
 * it means the id is taken in Temporal (a database reset), and the caller picks another.
 */
export async function startNodeLifecycle(
  client: Client,
  coreQueue: string,
  input: NodeLifecycleInput,
  memo: NodeLifecycleMemo,
  initialState: NodeState
): Promise<{ workflowId: string }> {
  const workflowId = nodeWorkflowId(input.node_id);
  try {
    await startWorkflowWithRetry<typeof nodeLifecycleWorkflow>(client, 'nodeLifecycleWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(coreQueue, NODE_LIFECYCLE_TASK_QUEUES.workflow),
      args: [input],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: [
        { key: NodeIdAttr, value: input.node_id },
        { key: BrandAttr, value: input.brand },
        { key: NodeStateAttr, value: initialState }
      ],
      memo
    });
  } catch (err) {
    // A start the frontend carried out but answered too late for the client (a busy server) is retried and then
    // found "already started": that run is this registration's own if its memo is this registration's.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const found = (
      await client.workflow
        .getHandle(workflowId)
        .describe()
        .catch(() => null)
    )?.memo as Partial<NodeLifecycleMemo> | undefined;
    if (found?.registered_at !== memo.registered_at || found?.name !== memo.name) throw err;
  }
  return { workflowId };
}

/** A reviewer's decision; 409 when it does not apply (already decided, or the node's workflow is closed). */
export async function reviewNode(client: Client, nodeId: string, request: ReviewRequest): Promise<NodeStatus> {
  try {
    return await executeUpdateWithin(client.workflow.getHandle(nodeWorkflowId(nodeId)), reviewUpdate, [request]);
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError)
      throw new AppError('conflict', (err.cause as Error | undefined)?.message ?? err.message, { node_id: nodeId });
    if (err instanceof WorkflowNotFoundError)
      throw new AppError('conflict', `node/${nodeId} is closed (the node was rejected)`, { node_id: nodeId });
    throw err;
  }
}
