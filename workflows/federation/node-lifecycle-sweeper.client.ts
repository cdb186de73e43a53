/**
 * The client side of node-sweeper/<group>: the API makes sure the sweepers run (at its first heartbeat and then
 * once a minute; "already started" means done). Not part of the workflow bundle.
 */
import { Client, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import { taskQueueFor } from '../../contracts/task-queues';
import type { nodeSweeperWorkflow } from './node-lifecycle-sweeper';
import {
  NodeSweeperInput,
  nodeSweeperWorkflowId,
  NODE_SWEEPER_GROUPS,
  NODE_SWEEPER_RUN_MS,
  NODE_SWEEPER_TASK_QUEUES,
  NODE_SWEEPER_TICK_MS
} from '../../contracts/federation/node-lifecycle-sweeper.contract';

export async function ensureNodeSweepers(
  client: Client,
  coreQueue: string,
  offlineAfterS: number,
  hubDid: string
): Promise<void> {
  await Promise.all(
    Array.from({ length: NODE_SWEEPER_GROUPS }, async (_, group) => {
      const input: NodeSweeperInput = {
        version: 1,
        group,
        groups: NODE_SWEEPER_GROUPS,
        offline_after_s: offlineAfterS,
        tick_ms: NODE_SWEEPER_TICK_MS,
        run_ms: NODE_SWEEPER_RUN_MS,
        hub_did: hubDid
      };
      try {
        await client.workflow.start<typeof nodeSweeperWorkflow>('nodeSweeperWorkflow', {
          workflowId: nodeSweeperWorkflowId(coreQueue, group),
          taskQueue: taskQueueFor(coreQueue, NODE_SWEEPER_TASK_QUEUES.workflow),
          args: [input],
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE
        });
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
    })
  );
}
