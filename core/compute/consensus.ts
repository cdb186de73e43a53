/**
 * Group consensus (workflow group-consensus/<id>), the pure part: the exact bytes a member signs for a ballot, and
 * the tally. Safe in the workflow sandbox.
 *
 * A proposal carries a quorum q among the n members of the epoch it was opened in. It is accepted as soon as q
 * members approve; rejected as soon as q approvals can no longer be reached (more than n - q rejections); and
 * expired when its deadline passes first.
 */

export const BALLOT_CHOICES = ['approve', 'reject'] as const;
export type BallotChoice = (typeof BALLOT_CHOICES)[number];
export type ConsensusOutcome = 'accepted' | 'rejected' | 'expired';

/** The UTF-8 text a member signs with its Ed25519 key (signature: 64 bytes, base64url). */
export function ballotMessage(b: {
  group_id: string;
  epoch: number;
  consensus_id: string;
  member_id: string;
  choice: BallotChoice;
}): string {
  return `zh-slim/v1 ballot|${b.group_id}|${b.epoch}|${b.consensus_id}|${b.member_id}|${b.choice}`;
}

export function tally(
  ballots: { choice: BallotChoice }[],
  members: number,
  quorum: number
): { approvals: number; rejections: number; outcome: Exclude<ConsensusOutcome, 'expired'> | null } {
  const approvals = ballots.filter((b) => b.choice === 'approve').length;
  const rejections = ballots.length - approvals;
  const outcome = approvals >= quorum ? 'accepted' : rejections > members - quorum ? 'rejected' : null;
  return { approvals, rejections, outcome };
}
