/**
 * The client side of tree-proposal/<id>, for the routes: open a proposal, supersede one, and send a reviewer's
 * decision. Ids, reuse policy, search attributes and memo are built here only. Not part of the workflow bundle.
 */
import { ApplicationFailure } from '@temporalio/common';
import { Client, WorkflowIdReusePolicy, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { AppError } from '../../core/errors';
import { ProposalStateAttr } from '../../core/search-attributes';
import type { MergeOutcome } from '../../activities/federation/tree-proposal';
import { taskQueueFor } from '../../contracts/task-queues';
import { executeUpdateWithin, startWorkflowWithRetry } from '../client-support';
import type { treeProposalWorkflow } from './tree-proposal';
import {
  decideUpdate,
  ProposalDecision,
  ProposalStatus,
  supersedeSignal,
  TREE_CONFLICT,
  TreeProposalInput,
  TreeProposalMemo,
  treeProposalWorkflowId,
  TREE_PROPOSAL_TASK_QUEUES
} from '../../contracts/federation/tree-proposal.contract';

export async function openTreeProposal(
  client: Client,
  coreQueue: string,
  input: TreeProposalInput
): Promise<{ workflowId: string }> {
  const workflowId = treeProposalWorkflowId(input.proposal_id);
  const memo: TreeProposalMemo = { title: input.title, author: input.author, base_version: input.base_version };
  await startWorkflowWithRetry<typeof treeProposalWorkflow>(client, 'treeProposalWorkflow', {
    workflowId,
    taskQueue: taskQueueFor(coreQueue, TREE_PROPOSAL_TASK_QUEUES.workflow),
    args: [input],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    typedSearchAttributes: [{ key: ProposalStateAttr, value: 'open' }],
    memo
  });
  return { workflowId };
}

/** Closes an open proposal as superseded by a newer one of the same author. */
export async function supersedeTreeProposal(client: Client, proposalId: string, by: string): Promise<void> {
  await client.workflow.getHandle(treeProposalWorkflowId(proposalId)).signal(supersedeSignal, { by });
}

/**
 * Merges or rejects a proposal. A merge that no longer applies is 409 with the conflicts (the proposal stays open);
 * a closed proposal is 409 too.
 */
export async function decideTreeProposal(
  client: Client,
  proposalId: string,
  decision: ProposalDecision
): Promise<ProposalStatus> {
  try {
    return await executeUpdateWithin(client.workflow.getHandle(treeProposalWorkflowId(proposalId)), decideUpdate, [
      decision
    ]);
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError) {
      const cause = err.cause;
      if (cause instanceof ApplicationFailure && cause.type === TREE_CONFLICT) {
        const outcome = cause.details?.[0] as Extract<MergeOutcome, { merged: false }>;
        throw new AppError('conflict', cause.message, {
          proposal_id: proposalId,
          base_version: outcome.base_version,
          latest_version: outcome.latest_version,
          conflicts: outcome.conflicts
        });
      }
      throw new AppError('conflict', (cause as Error | undefined)?.message ?? err.message, { proposal_id: proposalId });
    }
    if (err instanceof WorkflowNotFoundError)
      throw new AppError('conflict', `tree-proposal/${proposalId} is closed`, { proposal_id: proposalId });
    throw err;
  }
}
