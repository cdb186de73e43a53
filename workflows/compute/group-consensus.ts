/**
 * group-consensus/<id>: one proposal voted on by the members of a SLIM group's epoch with Ed25519-signed ballots.
 * Ballots come by the `castBallot` update (validated: open, a member, not voted yet; the API uses it) or by the
 * `ballot` signal (the same checks; a refusal is listed in the status); an activity checks the signature (the
 * sandbox has no crypto), and a forged ballot (ForgedBallot) changes nothing.
 * The workflow ends at quorum, when quorum can no longer be reached, or at the deadline (a durable timer), and
 * records the outcome with every ballot in the ledger. Short-lived (at most a few hundred events): no continue-as-new.
 */
import { ApplicationFailure, condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import { ballotMessage, ConsensusOutcome, tally } from '../../core/compute/consensus';
import {
  Ballot,
  ballotSignal,
  castBallotUpdate,
  ConsensusStatus,
  consensusStatusQuery,
  FORGED_BALLOT,
  GroupConsensusInput
} from '../../contracts/compute/group-consensus.contract';

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
    outcome_seq: null,
    refused: []
  };
  const pending = new Set<string>();
  let decided: Exclude<ConsensusOutcome, 'expired'> | null = null;

  setHandler(consensusStatusQuery, () => status);
  /** Why a ballot cannot be counted now, or null. */
  const refusal = (ballot: Ballot): string | null => {
    if (!ballot || (ballot.choice !== 'approve' && ballot.choice !== 'reject') || typeof ballot.signature !== 'string')
      return 'a ballot is { member_id, choice: approve|reject, signature }';
    if (status.state !== 'open' || decided)
      return `consensus ${input.consensus_id} is closed (${decided ?? status.state})`;
    if (!input.members.some((m) => m.member_id === ballot.member_id))
      return `${String(ballot.member_id)} is not a member of epoch ${input.epoch}`;
    if (pending.has(ballot.member_id) || status.ballots.some((b) => b.member_id === ballot.member_id))
      return `${ballot.member_id} has already voted`;
    return null;
  };

  /** Verifies the signature (activity) and counts the ballot; throws ForgedBallot or ConsensusClosed. */
  const count = async (ballot: Ballot): Promise<void> => {
    const member = input.members.find((m) => m.member_id === ballot.member_id)!;
    pending.add(ballot.member_id);
    try {
      const message = ballotMessage({
        group_id: input.group_id,
        epoch: input.epoch,
        consensus_id: input.consensus_id,
        member_id: ballot.member_id,
        choice: ballot.choice
      });
      const valid = await verifyBallotSignature({ public_key: member.ed25519, message, signature: ballot.signature });
      if (!valid)
        throw ApplicationFailure.create({
          type: FORGED_BALLOT,
          message: `the ballot's signature does not verify with ${ballot.member_id}'s Ed25519 key`,
          nonRetryable: true
        });
      if (status.state !== 'open' || decided)
        throw ApplicationFailure.create({
          type: 'ConsensusClosed',
          message: `consensus ${input.consensus_id} closed while the ballot was checked`,
          nonRetryable: true
        });
      status.ballots.push({
        member_id: ballot.member_id,
        choice: ballot.choice,
        signature: ballot.signature,
        cast_at: new Date(Date.now()).toISOString()
      });
      const t = tally(status.ballots, input.members.length, input.quorum);
      status.approvals = t.approvals;
      status.rejections = t.rejections;
      decided = t.outcome;
    } finally {
      pending.delete(ballot.member_id);
    }
  };

  const refuse = (ballot: Ballot, reason: string) => {
    if (status.refused.length < 50) status.refused.push({ member_id: String(ballot?.member_id ?? ''), reason });
  };

  setHandler(
    castBallotUpdate,
    async (ballot: Ballot) => {
      await count(ballot);
      return { ...status, ballots: [...status.ballots], refused: [...status.refused] };
    },
    {
      validator: (ballot: Ballot) => {
        const why = refusal(ballot);
        if (why) throw new Error(why);
      }
    }
  );
  setHandler(ballotSignal, async (ballot: Ballot) => {
    const why = refusal(ballot);
    if (why) return refuse(ballot, why);
    try {
      await count(ballot);
    } catch (err) {
      refuse(ballot, err instanceof Error ? err.message : String(err));
    }
  });

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
