/**
 * The client side of deploy-config, for the routes: run a config change and wait for its outcome. The workflow id
 * is the lock (one config change at a time across targets: they share one nginx config); a request while one runs is
 * 409. Not part of the workflow bundle.
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@temporalio/client';
import { releaseId } from '../../core/deploy/web';
import { DeployStateAttr, DeployTargetAttr } from '../../core/search-attributes';
import { taskQueueFor } from '../../contracts/task-queues';
import { resultWithin, startLocked } from '../client-support';
import type { deployConfigWorkflow } from './config';
import {
  DEPLOY_CONFIG_TASK_QUEUES,
  DEPLOY_CONFIG_WORKFLOW_ID,
  DeployConfigInput,
  DeployConfigResult
} from '../../contracts/deploy/config.contract';

const RESULT_WAIT_MS = 60_000;

export async function runDeployConfig(
  client: Client,
  coreQueue: string,
  request: Omit<DeployConfigInput, 'version' | 'operation_id'>
): Promise<DeployConfigResult & { workflow_id: string }> {
  const workflowId = DEPLOY_CONFIG_WORKFLOW_ID;
  const input: DeployConfigInput = {
    version: 1,
    ...request,
    operation_id: releaseId(new Date(), randomBytes(4).toString('hex')).replace(/^r/, 'c')
  };
  await startLocked<typeof deployConfigWorkflow>(
    client,
    'deployConfigWorkflow',
    {
      workflowId,
      taskQueue: taskQueueFor(coreQueue, DEPLOY_CONFIG_TASK_QUEUES.workflow),
      args: [input],
      typedSearchAttributes: [
        { key: DeployTargetAttr, value: request.target },
        { key: DeployStateAttr, value: 'running' }
      ],
      memo: { actor: request.actor, operation_id: input.operation_id }
    },
    { message: `a config change is in progress (${workflowId}); retry when it has finished`, retryAfterS: 2 }
  );
  const result = await resultWithin<typeof deployConfigWorkflow>(client, workflowId, RESULT_WAIT_MS);
  return { ...result, workflow_id: workflowId };
}
