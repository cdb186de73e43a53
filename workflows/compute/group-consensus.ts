/**
 * group-consensus/<id>: one proposal voted on by the members of a SLIM group's epoch with Ed25519-signed ballots.
 * Ballots come by the `castBallot` update (validated: open, a member, not voted yet); an activity checks the
 * signature (the sandbox has no crypto), a forged ballot fails the update (ForgedBallot) and changes nothing.
 * The workflow ends at quorum, when quorum can no longer be reached, or at the deadline (a durable timer), and
 * records the outcome with every ballot in the ledger. Short-lived (at most a few hundred events): no continue-as-new.
 */
import { ApplicationFailure, condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import { ballotMessage, ConsensusOutcome, tally } from '../../core/compute/consensus';
import { Ballot, castBallotUpdate, ConsensusStatus, consensusStatusQuery, FORGED_BALLOT, GroupConsensusInput } from './group-consensus.contract';

const { verifyBallotSignature, recordConsensusOutcome } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' }
});

export async function groupConsensusWorkflow(input: GroupConsensusInput): Promise<ConsensusStatus> {
  const started = Date.now();
  const status: ConsensusStatus = {
    consensus_id: input.consensus_id,
    group_id: input.group_id,
    epoch: input.epoch,
    proposal: input.proposal,
    proposal_sha256: input.proposal_sha256,
    quorum: input.quorum,
    members: input.members.length,
    state: 'open',
    approvals: 0,
    rejections: 0,
    ballots: [],
    created_at: input.created_at,
    deadline_at: new Date(started + input.deadline_s * 1000).toISOString(),
    decided_at: null,
    outcome_seq: null
  };
  const pending = new Set<string>();
  let decided: Exclude<ConsensusOutcome, 'expired'> | null = null;

  setHandler(consensusStatusQuery, () => status);
  setHandler(
    castBallotUpdate,
    async (ballot: Ballot) => {
      const member = input.members.find((m) => m.member_id === ballot.member_id)!;
      pending.add(ballot.member_id);
      try {
        const message = ballotMessage({ group_id: input.group_id, epoch: input.epoch, consensus_id: input.consensus_id, member_id: ballot.member_id, choice: ballot.choice });
        const valid = await verifyBallotSignature({ public_key: member.ed25519, message, signature: ballot.signature });
        if (!valid) throw ApplicationFailure.create({ type: FORGED_BALLOT, message: `the ballot's signature does not verify with ${ballot.member_id}'s Ed25519 key`, nonRetryable: true });
        if (status.state !== 'open' || decided) throw ApplicationFailure.create({ type: 'ConsensusClosed', message: `consensus ${input.consensus_id} closed while the ballot was checked`, nonRetryable: true });
        status.ballots.push({ member_id: ballot.member_id, choice: ballot.choice, signature: ballot.signature, cast_at: new Date(Date.now()).toISOString() });
        const t = tally(status.ballots, input.members.length, input.quorum);
        status.approvals = t.approvals;
        status.rejections = t.rejections;
        decided = t.outcome;
        return { ...status, ballots: [...status.ballots] };
      } finally {
        pending.delete(ballot.member_id);
      }
    },
    {
      validator: (ballot: Ballot) => {
        if (!ballot || (ballot.choice !== 'approve' && ballot.choice !== 'reject') || typeof ballot.signature !== 'string') throw new Error('a ballot is { member_id, choice: approve|reject, signature }');
        if (status.state !== 'open' || decided) throw new Error(`consensus ${input.consensus_id} is closed (${decided ?? status.state})`);
        if (!input.members.some((m) => m.member_id === ballot.member_id)) throw new Error(`${String(ballot.member_id)} is not a member of epoch ${input.epoch}`);
        if (pending.has(ballot.member_id) || status.ballots.some((b) => b.member_id === ballot.member_id)) throw new Error(`${ballot.member_id} has already voted`);
      }
    }
  );

  const inTime = await condition(() => decided !== null && pending.size === 0, input.deadline_s * 1000);
  const outcome: ConsensusOutcome = inTime && decided ? decided : 'expired';
  status.state = outcome;
  status.decided_at = new Date(Date.now()).toISOString();
  const recorded = await recordConsensusOutcome({
    consensus_id: input.consensus_id,
    group_id: input.group_id,
    epoch: input.epoch,
    proposal: input.proposal,
    proposal_sha256: input.proposal_sha256,
    quorum: input.quorum,
    members: input.members.map((m) => m.member_id),
    outcome,
    approvals: status.approvals,
    rejections: status.rejections,
    ballots: status.ballots,
    proposed_by: input.proposed_by,
    decided_at: status.decided_at,
    hub_did: input.hub_did
  });
  status.outcome_seq = recorded.seq;
  await condition(() => pending.size === 0);
  return status;
}
