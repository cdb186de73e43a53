/**
 * The client side of deploy/<target>, for the routes: run a deploy or a rollback and wait for its outcome. The
 * workflow id is the per-target deploy lock: a request while a run is in progress is 409 (retry after it ends).
 * Not part of the workflow bundle.
 */
import { randomBytes } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { Client, WorkflowFailedError } from '@temporalio/client';
import { AppError } from '../../core/errors';
import { releaseId } from '../../core/deploy/web';
import { DeployStateAttr, DeployTargetAttr } from '../../core/search-attributes';
import type { ReleaseFile } from '../../activities/deploy';
import { taskQueueFor } from '../../contracts/task-queues';
import { resultWithin, startLocked } from '../client-support';
import type { deployWorkflow } from './deploy';
import {
  DEPLOY_TASK_QUEUES,
  DeployInput,
  DeployResult,
  deployWorkflowId,
  NO_ROLLBACK_TARGET
} from '../../contracts/deploy/deploy.contract';

/** How long a request waits for the run's outcome; past it the answer is 504 and the run goes on. */
const RESULT_WAIT_MS = 90_000;

export async function runDeploy(
  client: Client,
  coreQueue: string,
  request: {
    mode: 'deploy' | 'rollback';
    target: string;
    files?: ReleaseFile[];
    keep: number;
    hub_did: string;
    actor: string;
  }
): Promise<DeployResult & { workflow_id: string }> {
  const workflowId = deployWorkflowId(request.target);
  const input: DeployInput = {
    version: 1,
    ...request,
    operation_id: releaseId(new Date(), randomBytes(4).toString('hex'))
  };
  await startLocked<typeof deployWorkflow>(
    client,
    'deployWorkflow',
    {
      workflowId,
      taskQueue: taskQueueFor(coreQueue, DEPLOY_TASK_QUEUES.workflow),
      args: [input],
      typedSearchAttributes: [
        { key: DeployTargetAttr, value: request.target },
        { key: DeployStateAttr, value: 'running' }
      ],
      memo: { mode: request.mode, actor: request.actor, operation_id: input.operation_id }
    },
    {
      message: `a deploy of ${request.target} is in progress (${workflowId}); retry when it has finished`,
      retryAfterS: 5
    }
  );
  try {
    const result = await resultWithin<typeof deployWorkflow>(client, workflowId, RESULT_WAIT_MS);
    return { ...result, workflow_id: workflowId };
  } catch (err) {
    if (
      err instanceof WorkflowFailedError &&
      err.cause instanceof ApplicationFailure &&
      err.cause.type === NO_ROLLBACK_TARGET
    ) {
      throw new AppError('conflict', err.cause.message, { workflow_id: workflowId });
    }
    throw err;
  }
}
