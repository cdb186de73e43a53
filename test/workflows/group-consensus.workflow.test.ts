/**
 * groupConsensusWorkflow on its own, with @temporalio/testing on the dev server binary and the real activities
 * (Ed25519 check, ledger append on FerretDB): quorum reached, a forged ballot refused by the update, quorum made
 * unreachable by rejections, the deadline passing, and ballots by signal (a forged one listed as refused). With RECORD_HISTORIES=1 it saves the replay histories.
 */
import { generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ballotMessage, BallotChoice } from '../../core/compute/consensus';
import { groupConsensusWorkflow } from '../../workflows/compute/group-consensus';
import {
  Ballot,
  ballotSignal,
  castBallotUpdate,
  FORGED_BALLOT,
  GroupConsensusInput
} from '../../contracts/compute/group-consensus.contract';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

jest.setTimeout(120_000);
let wf: WorkflowTestEnv;

const keys = ['client_00000000000000a1', 'client_00000000000000b2', 'client_00000000000000c3'].map((id) => ({
  id,
  pair: generateKeyPairSync('ed25519')
}));
const raw = (k: KeyObject) => k.export({ format: 'jwk' }).x!;

beforeAll(async () => {
  wf = await startWorkflowTestEnv('group-consensus-wf-test');
});
afterAll(async () => {
  await wf?.close();
});

const input = (id: string, quorum: number, deadline_s: number): GroupConsensusInput => ({
  version: 1,
  consensus_id: id,
  group_id: 'sg_00000000000000aa',
  epoch: 1,
  proposal: 'adopt',
  proposal_sha256: '0'.repeat(64),
  quorum,
  members: keys.map((k) => ({ member_id: k.id, ed25519: raw(k.pair.publicKey) })),
  deadline_s,
  proposed_by: 'sg_00000000000000aa#1',
  created_at: '2026-11-21T00:00:00.000Z',
  hub_did: 'did:zhongshu:hub'
});

const ballot = (id: string, member: number, choice: BallotChoice, signer = member): Ballot => ({
  member_id: keys[member]!.id,
  choice,
  signature: sign(
    null,
    Buffer.from(
      ballotMessage({
        group_id: 'sg_00000000000000aa',
        epoch: 1,
        consensus_id: id,
        member_id: keys[member]!.id,
        choice
      })
    ),
    keys[signer]!.pair.privateKey
  ).toString('base64url')
});

const start = (id: string, quorum: number, deadline_s: number) =>
  wf.env.client.workflow.start(groupConsensusWorkflow, {
    workflowId: `group-consensus/${id}`,
    taskQueue: wf.taskQueue,
    args: [input(id, quorum, deadline_s)]
  });

test('accepted at quorum; a forged ballot fails the update and counts for nothing; the outcome is in the ledger', async () => {
  const id = 'gc_00000000000000a1';
  const handle = await start(id, 2, 600);
  const forged = await handle
    .executeUpdate(castBallotUpdate, { args: [ballot(id, 1, 'approve', 0)] })
    .catch((e: unknown) => e);
  expect(forged).toBeInstanceOf(WorkflowUpdateFailedError);
  expect(((forged as WorkflowUpdateFailedError).cause as ApplicationFailure).type).toBe(FORGED_BALLOT);
  expect((await handle.executeUpdate(castBallotUpdate, { args: [ballot(id, 0, 'approve')] })).approvals).toBe(1);
  const dup = await handle
    .executeUpdate(castBallotUpdate, { args: [ballot(id, 0, 'approve')] })
    .catch((e: unknown) => e);
  expect(dup).toBeInstanceOf(WorkflowUpdateFailedError);
  await handle.executeUpdate(castBallotUpdate, { args: [ballot(id, 1, 'approve')] });
  const result = await handle.result();
  expect(result).toMatchObject({ state: 'accepted', approvals: 2, rejections: 0 });
  expect(result.ballots.map((b) => b.member_id)).toEqual([keys[0]!.id, keys[1]!.id]);
  const record = await wf.db.collection('ledger').findOne({ key: 'hub.slim.consensus.accepted' });
  expect(record!.seq).toBe(result.outcome_seq);
  await wf.saveHistory(`group-consensus/${id}`, 'group-consensus-accepted');
});

test('rejected as soon as quorum can no longer be reached', async () => {
  const id = 'gc_00000000000000b2';
  const handle = await start(id, 2, 600);
  await handle.executeUpdate(castBallotUpdate, { args: [ballot(id, 0, 'reject')] });
  await handle.executeUpdate(castBallotUpdate, { args: [ballot(id, 2, 'reject')] });
  expect(await handle.result()).toMatchObject({ state: 'rejected', approvals: 0, rejections: 2 });
  await wf.saveHistory(`group-consensus/${id}`, 'group-consensus-rejected');
});

test('expired at the deadline when quorum is missed', async () => {
  const id = 'gc_00000000000000c3';
  const handle = await start(id, 3, 1);
  await handle.executeUpdate(castBallotUpdate, { args: [ballot(id, 2, 'approve')] }).catch(() => undefined);
  const result = await handle.result();
  expect(result.state).toBe('expired');
  const record = await wf.db.collection('ledger').findOne({ key: 'hub.slim.consensus.expired' });
  expect(JSON.parse(record!.value_json as string)).toMatchObject({ consensus_id: id, outcome: 'expired', quorum: 3 });
  await wf.saveHistory(`group-consensus/${id}`, 'group-consensus-expired');
});

test('ballots by signal: a forged one and a second vote are listed as refused, the valid ones reach quorum', async () => {
  const id = 'gc_00000000000000d4';
  const handle = await start(id, 2, 600);
  await handle.signal(ballotSignal, ballot(id, 2, 'approve', 1));
  await handle.signal(ballotSignal, ballot(id, 0, 'approve'));
  await handle.signal(ballotSignal, ballot(id, 0, 'reject'));
  await handle.signal(ballotSignal, ballot(id, 1, 'approve'));
  const result = await handle.result();
  expect(result).toMatchObject({ state: 'accepted', approvals: 2 });
  expect(result.ballots.map((b) => b.member_id).sort()).toEqual([keys[0]!.id, keys[1]!.id].sort());
  const refused = Object.fromEntries(result.refused.map((r) => [r.member_id, r.reason]));
  expect(Object.keys(refused).sort()).toEqual([keys[0]!.id, keys[2]!.id].sort());
  expect(refused[keys[2]!.id]).toContain('does not verify');
  expect(refused[keys[0]!.id]).toContain('already voted');
  await wf.saveHistory(`group-consensus/${id}`, 'group-consensus-signals');
});
