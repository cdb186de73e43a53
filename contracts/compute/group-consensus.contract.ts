/**
 * What the API, operators and the group-consensus/<id> workflow share. A proposal of a SLIM group is open until
 * quorum is reached (accepted), can no longer be reached (rejected) or its deadline passes (expired); the outcome
 * and every ballot are then written to the ledger (`hub.slim.consensus.<outcome>`).
 * Ballots arrive with the update `castBallot` (POST /v1/slim/group/consensus sends it; from the CLI:
 *   temporal workflow update execute --workflow-id group-consensus/<id> --name castBallot \
 *     --input '{"member_id":"client_…","choice":"approve","signature":"<Ed25519, base64url>"}'
 * ), or with the signal `ballot` (same input, fire-and-forget: a refused or forged ballot is then only listed in
 * the status's `refused`). Every ballot's signature is checked by an activity against the member's Ed25519 key of the proposal's epoch
 * (core/compute/consensus.ts ballotMessage); a forged one fails the update with ApplicationFailure ForgedBallot.
 *   temporal workflow query --workflow-id group-consensus/<id> --type consensusStatus
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { FlowTaskQueues } from '../task-queues';
import type { BallotChoice, ConsensusOutcome } from '../../core/compute/consensus';

export const groupConsensusWorkflowId = (consensusId: string): string => `group-consensus/${consensusId}`;

/** Task queues (contracts/task-queues.ts): the workflow and its activities (a signature check, a ledger append) on core. */
export const GROUP_CONSENSUS_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };
export const FORGED_BALLOT = 'ForgedBallot';

export interface GroupConsensusInput {
  version: 1;
  consensus_id: string;
  group_id: string;
  epoch: number;
  proposal: string;
  proposal_sha256: string;
  quorum: number;
  /** The members of the epoch, with their Ed25519 public keys (raw, base64url). */
  members: { member_id: string; ed25519: string }[];
  deadline_s: number;
  proposed_by: string;
  created_at: string;
  hub_did: string;
}

export interface Ballot {
  member_id: string;
  choice: BallotChoice;
  /** Ed25519 signature over ballotMessage(...), base64url. */
  signature: string;
}

export interface ConsensusStatus {
  consensus_id: string;
  group_id: string;
  epoch: number;
  proposal: string;
  proposal_sha256: string;
  quorum: number;
  members: number;
  state: 'open' | ConsensusOutcome;
  approvals: number;
  rejections: number;
  ballots: (Ballot & { cast_at: string })[];
  created_at: string;
  deadline_at: string;
  decided_at: string | null;
  /** The ledger seq of the recorded outcome. */
  outcome_seq: number | null;
  /** Ballots sent by signal that were refused (the update's refusals go back to its caller); the first 50. */
  refused: { member_id: string; reason: string }[];
}

export const ballotSignal = defineSignal<[Ballot]>('ballot');
export const castBallotUpdate = defineUpdate<ConsensusStatus, [Ballot]>('castBallot');
export const consensusStatusQuery = defineQuery<ConsensusStatus>('consensusStatus');
