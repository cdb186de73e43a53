/**
 * Activities of the group-consensus/<id> workflow: the Ed25519 check of a ballot (node:crypto, outside the
 * sandbox) and the ledger record of the outcome with every ballot, once (idempotency key group-consensus:<id>).
 */
import { verifyEd25519 } from '../core/compute/group-crypto.node';
import type { ConsensusOutcome } from '../core/compute/consensus';
import type { Ballot } from '../contracts/compute/group-consensus.contract';
import { Ledger } from '../store/ledger/ledger';

export interface ConsensusOutcomeRecord {
  consensus_id: string;
  group_id: string;
  epoch: number;
  proposal: string;
  proposal_sha256: string;
  quorum: number;
  members: string[];
  outcome: ConsensusOutcome;
  approvals: number;
  rejections: number;
  ballots: (Ballot & { cast_at: string })[];
  proposed_by: string;
  decided_at: string;
  hub_did: string;
}

export function createComputeActivities(deps: { ledger: Ledger }) {
  return {
    async verifyBallotSignature(input: { public_key: string; message: string; signature: string }): Promise<boolean> {
      return verifyEd25519(input.public_key, input.message, input.signature);
    },

    async recordConsensusOutcome(record: ConsensusOutcomeRecord): Promise<{ seq: number }> {
      const { hub_did, ...value } = record;
      const { entry } = await deps.ledger.append({
        kind: 'event',
        key: `hub.slim.consensus.${record.outcome}`,
        value: { ...value, ballots: record.ballots.map((b) => ({ ...b })) },
        truth_type: 'decision',
        did: hub_did,
        idempotencyKey: `group-consensus:${record.consensus_id}`
      });
      return { seq: entry.seq };
    }
  };
}
