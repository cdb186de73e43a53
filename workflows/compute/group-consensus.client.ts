/**
 * The client side of group-consensus/<id>, for POST /v1/slim/group/consensus: open a proposal, cast a ballot (the
 * update; a forged ballot is 403, a refused one 409), read the status (query; the result once closed). Not bundled.
 */
import { ApplicationFailure } from '@temporalio/common';
import { Client, WorkflowIdReusePolicy, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { AppError, notFound } from '../../core/errors';
import { taskQueueFor } from '../../contracts/task-queues';
import { executeUpdateWithin, startWorkflowWithRetry } from '../client-support';
import type { groupConsensusWorkflow } from './group-consensus';
import {
  Ballot,
  castBallotUpdate,
  ConsensusStatus,
  consensusStatusQuery,
  FORGED_BALLOT,
  GROUP_CONSENSUS_TASK_QUEUES,
  GroupConsensusInput,
  groupConsensusWorkflowId
} from '../../contracts/compute/group-consensus.contract';

export async function openGroupConsensus(
  client: Client,
  coreQueue: string,
  input: GroupConsensusInput
): Promise<{ workflowId: string }> {
  const workflowId = groupConsensusWorkflowId(input.consensus_id);
  await startWorkflowWithRetry<typeof groupConsensusWorkflow>(client, 'groupConsensusWorkflow', {
    workflowId,
    taskQueue: taskQueueFor(coreQueue, GROUP_CONSENSUS_TASK_QUEUES.workflow),
    args: [input],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    memo: { group_id: input.group_id, epoch: input.epoch, quorum: input.quorum }
  });
  return { workflowId };
}

/** The status of a proposal, open or closed; 404 when there is none. */
export async function groupConsensusStatus(client: Client, consensusId: string): Promise<ConsensusStatus> {
  const handle = client.workflow.getHandle(groupConsensusWorkflowId(consensusId));
  try {
    return await handle.query(consensusStatusQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw notFound(`No consensus ${consensusId}`);
    throw err;
  }
}

export async function castGroupBallot(client: Client, consensusId: string, ballot: Ballot): Promise<ConsensusStatus> {
  try {
    return await executeUpdateWithin(
      client.workflow.getHandle(groupConsensusWorkflowId(consensusId)),
      castBallotUpdate,
      [ballot]
    );
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError) {
      const cause = err.cause;
      if (cause instanceof ApplicationFailure && cause.type === FORGED_BALLOT)
        throw new AppError('forbidden', cause.message, { consensus_id: consensusId });
      throw new AppError('conflict', (cause as Error | undefined)?.message ?? err.message, {
        consensus_id: consensusId
      });
    }
    if (err instanceof WorkflowNotFoundError)
      throw new AppError('conflict', `consensus ${consensusId} is closed`, { consensus_id: consensusId });
    throw err;
  }
}
