/**
 * tree-proposal/<id>: one proposed change to the shared directory tree, open until merged, rejected or superseded.
 * The `decide` update merges (an activity applies the patch and stores the next version; a conflict fails the
 * update with TreeConflict and the proposal stays open) or rejects. The `supersede` signal closes it in favour of
 * a newer proposal. The final state is recorded by an activity (ledger event + proposal document).
 */
import {
  ApplicationFailure,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo
} from '@temporalio/workflow';
import type { Activities } from '../../activities';
import type { ProposalState } from '../../store/federation/directory-tree';
import {
  decideUpdate,
  ProposalStatus,
  proposalStatusQuery,
  supersedeSignal,
  TREE_CONFLICT,
  TreeProposalInput
} from '../../contracts/federation/tree-proposal.contract';
import { ProposalStateAttr } from '../../core/search-attributes';

const { mergeTreeProposal, recordProposalDecision } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});

export async function treeProposalWorkflow(input: TreeProposalInput): Promise<ProposalStatus> {
  const status: ProposalStatus = {
    proposal_id: input.proposal_id,
    state: 'open',
    base_version: input.base_version,
    title: input.title,
    author: input.author,
    created_at: input.created_at,
    decided_at: null,
    decided_by: null,
    reason: null,
    merged_version: null,
    superseded_by: null,
    merge_attempts: input.carried?.merge_attempts ?? 0,
    decision_seq: null
  };
  let busy = false;
  let supersededBy: string | null = null;

  const close = async (
    state: Exclude<ProposalState, 'open'>,
    by: string,
    reason: string | null,
    mergedVersion: number | null
  ) => {
    const at = new Date(Date.now()).toISOString();
    const recorded = await recordProposalDecision({
      proposal_id: input.proposal_id,
      state,
      at,
      by,
      reason,
      merged_version: mergedVersion,
      superseded_by: state === 'superseded' ? supersededBy : null,
      hub_did: input.hub_did
    });
    Object.assign(status, {
      state,
      decided_at: at,
      decided_by: by,
      reason,
      merged_version: mergedVersion,
      decision_seq: recorded.seq
    });
    if (state === 'superseded') status.superseded_by = supersededBy;
    upsertSearchAttributes([{ key: ProposalStateAttr, value: state }]);
  };

  setHandler(proposalStatusQuery, () => status);
  setHandler(supersedeSignal, (s) => {
    if (typeof s?.by === 'string' && !supersededBy) supersededBy = s.by;
  });
  setHandler(
    decideUpdate,
    async (request) => {
      busy = true;
      try {
        const reviewer = String(request.reviewer);
        const reason = String(request.reason ?? '');
        if (request.decision === 'reject') {
          await close('rejected', reviewer, reason, null);
          return { ...status };
        }
        status.merge_attempts += 1;
        const outcome = await mergeTreeProposal({
          proposal_id: input.proposal_id,
          merged_by: reviewer,
          at: new Date(Date.now()).toISOString()
        });
        if (!outcome.merged) {
          throw ApplicationFailure.create({
            type: TREE_CONFLICT,
            message: `proposal ${input.proposal_id} no longer applies to version ${outcome.latest_version}`,
            details: [outcome],
            nonRetryable: true
          });
        }
        await close('merged', reviewer, reason, outcome.version);
        return { ...status };
      } finally {
        busy = false;
      }
    },
    {
      validator: (request) => {
        if (!request || (request.decision !== 'merge' && request.decision !== 'reject'))
          throw new Error('decision must be merge or reject');
        if (status.state !== 'open') throw new Error(`proposal ${input.proposal_id} is already ${status.state}`);
        if (busy) throw new Error(`proposal ${input.proposal_id} is being decided by another request`);
      }
    }
  );

  while (status.state === 'open') {
    await condition(
      () =>
        status.state !== 'open' ||
        (!busy && (supersededBy !== null || workflowInfo().historyLength >= input.history_limit))
    );
    if (status.state !== 'open') break;
    if (supersededBy !== null) {
      busy = true;
      await close('superseded', 'hub', `superseded by ${supersededBy}`, null);
      busy = false;
      break;
    }
    return continueAsNew<typeof treeProposalWorkflow>({ ...input, carried: { merge_attempts: status.merge_attempts } });
  }
  await condition(() => !busy);
  return status;
}
