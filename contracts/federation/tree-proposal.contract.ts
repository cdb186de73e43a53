/**
 * What the API, operators and the tree-proposal/<id> workflow share. A proposal is open until it is merged,
 * rejected or superseded (by a newer proposal of the same author that names it in `supersedes`).
 * Reviewers decide with the update `decide` (the merge endpoint sends it; from the CLI:
 *   temporal workflow update execute --workflow-id tree-proposal/<id> --name decide \
 *     --input '{"decision":"merge","reviewer":"alice","reason":"ok"}'
 * A merge that conflicts fails the update with an ApplicationFailure of type TreeConflict (details: conflicts)
 * and leaves the proposal open.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';
import type { ProposalDocument } from '../../store/federation/directory-tree';

export const treeProposalWorkflowId = (proposalId: string): string => `tree-proposal/${proposalId}`;

/** Task queues (contracts/task-queues.ts): the workflow and its activities (MongoDB only) run on the core queue. */
export const TREE_PROPOSAL_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };
export const TREE_CONFLICT = 'TreeConflict';

export interface TreeProposalInput {
  version: 1;
  proposal_id: string;
  base_version: number;
  title: string;
  author: string;
  created_at: string;
  hub_did: string;
  history_limit: number;
  /** Carried across continue-as-new. */
  carried?: { merge_attempts: number };
}

export interface ProposalDecision {
  decision: 'merge' | 'reject';
  reviewer: string;
  reason: string;
}

/** The workflow's view: the stored proposal's decision fields, plus what only the workflow knows. */
export type ProposalStatus = Pick<
  ProposalDocument,
  | 'state'
  | 'base_version'
  | 'title'
  | 'author'
  | 'created_at'
  | 'decided_at'
  | 'decided_by'
  | 'reason'
  | 'merged_version'
  | 'superseded_by'
> & {
  proposal_id: string;
  merge_attempts: number;
  decision_seq: number | null;
};

/** What the workflow's memo holds (written at start by the client module). */
export type TreeProposalMemo = Pick<TreeProposalInput, 'title' | 'author' | 'base_version'>;

export const decideUpdate = defineUpdate<ProposalStatus, [ProposalDecision]>('decide');
export const supersedeSignal = defineSignal<[{ by: string }]>('supersede');
export const proposalStatusQuery = defineQuery<ProposalStatus>('proposalStatus');
