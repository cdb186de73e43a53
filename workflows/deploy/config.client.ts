/**
 * The client side of deploy-config, for the routes: run a config change and wait for its outcome. The workflow id
 * is the lock (one config change at a time across targets: they share one nginx config); a request while one runs is
 * 409. Not part of the workflow bundle.
 */
import { randomBytes } from 'node:crypto';
import { Client, WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/client';
import { AppError } from '../../core/errors';
import { releaseId } from '../../core/deploy/web';
import { DeployStateAttr, DeployTargetAttr } from '../../core/search-attributes';
import { taskQueueFor } from '../task-queues';
import { startWorkflowWithRetry, within } from '../client-support';
import type { deployConfigWorkflow } from './config';
import { DEPLOY_CONFIG_TASK_QUEUES, DEPLOY_CONFIG_WORKFLOW_ID, DeployConfigInput, DeployConfigResult } from './config.contract';

const RESULT_WAIT_MS = 60_000;

export async function runDeployConfig(
  client: Client,
  coreQueue: string,
  request: Omit<DeployConfigInput, 'version' | 'operation_id'>
): Promise<DeployConfigResult & { workflow_id: string }> {
  const workflowId = DEPLOY_CONFIG_WORKFLOW_ID;
  const input: DeployConfigInput = { version: 1, ...request, operation_id: releaseId(new Date(), randomBytes(4).toString('hex')).replace(/^r/, 'c') };
  try {
    await startWorkflowWithRetry<typeof deployConfigWorkflow>(client, 'deployConfigWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(coreQueue, DEPLOY_CONFIG_TASK_QUEUES.workflow),
      args: [input],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      typedSearchAttributes: [
        { key: DeployTargetAttr, value: request.target },
        { key: DeployStateAttr, value: 'running' }
      ],
      memo: { actor: request.actor, operation_id: input.operation_id }
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw new AppError('conflict', `a config change is in progress (${workflowId}); retry when it has finished`, { workflow_id: workflowId }, { 'Retry-After': '2' });
    }
    throw err;
  }
  const result = await within(RESULT_WAIT_MS, client.workflow.getHandle<typeof deployConfigWorkflow>(workflowId).result());
  if (result === null) throw new AppError('timeout', `${workflowId} has not finished within ${RESULT_WAIT_MS / 1000} s; it goes on (see the Temporal UI)`, { workflow_id: workflowId });
  return { ...result, workflow_id: workflowId };
}
