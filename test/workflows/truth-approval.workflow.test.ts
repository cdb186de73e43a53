/**
 * truthApprovalWorkflow on its own, with @temporalio/testing driving the same Temporal dev server binary
 * (existing-path executable) and the real activities writing to the embedded FerretDB.
 * With RECORD_HISTORIES=1 it saves the histories the replay test replays (test/replay/histories/).
 */
import { Db } from 'mongodb';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { canonicalJson } from '../../core/ledger/canonical-json';
import {
  approvalStatusQuery,
  approveSignal,
  rejectSignal,
  TruthApprovalInput
} from '../../contracts/ledger/truth-approval.contract';
import { truthApprovalWorkflow } from '../../workflows/ledger/truth-approval';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

let wf: WorkflowTestEnv;
let env: TestWorkflowEnvironment;
let db: Db;
let TASK_QUEUE: string;
const saveHistory = (id: string, name: string) => wf.saveHistory(id, name);

beforeAll(async () => {
  wf = await startWorkflowTestEnv('truth-approval-wf-test');
  ({ env, db, taskQueue: TASK_QUEUE } = wf);
});

afterAll(async () => {
  await wf?.close();
});

const input = (id: string, timeout = 3600): TruthApprovalInput => ({
  version: 1,
  approval_id: id,
  truth: {
    key: `wf.test.${id}`,
    value_json: canonicalJson({ id }),
    truth_type: 'risk',
    did: 'did:example:wf',
    idempotency_key: null
  },
  held_because: 'truth_type risk is high-risk',
  requested_at: new Date().toISOString(),
  timeout_seconds: timeout,
  hub_did: 'did:zhongshu:hub'
});

describe('truthApprovalWorkflow', () => {
  it('appends the held truth and records the decision when approved', async () => {
    const id = 'apr_000000000000000000000001';
    const handle = await env.client.workflow.start(truthApprovalWorkflow, {
      workflowId: `truth-approval/${id}`,
      taskQueue: TASK_QUEUE,
      args: [input(id)]
    });
    expect((await handle.query(approvalStatusQuery)).state).toBe('pending');
    await handle.signal(approveSignal, { approver: 'alice', reason: 'ok' });
    const result = await handle.result();
    expect(result).toMatchObject({ state: 'approved', approver: 'alice', reason: 'ok' });
    const entry = await db.collection('ledger').findOne({ key: `wf.test.${id}` });
    expect(entry).toMatchObject({ seq: result.seq, event_id: result.event_id, did: 'did:example:wf' });
    const decision = await db.collection('ledger').findOne({ _id: result.decision_seq! } as object);
    expect(decision).toMatchObject({ key: 'hub.truth_approval.approved', did: 'did:zhongshu:hub' });
    await saveHistory(handle.workflowId, 'truth-approval-approved');
  });

  it('ignores a second decision: the first one wins', async () => {
    const id = 'apr_000000000000000000000002';
    const handle = await env.client.workflow.start(truthApprovalWorkflow, {
      workflowId: `truth-approval/${id}`,
      taskQueue: TASK_QUEUE,
      args: [input(id)]
    });
    await handle.signal(rejectSignal, { approver: 'bob', reason: 'no' });
    await handle.signal(approveSignal, { approver: 'carol', reason: 'yes' });
    const result = await handle.result();
    expect(result).toMatchObject({ state: 'rejected', approver: 'bob', seq: null });
    expect(await db.collection('ledger').countDocuments({ key: `wf.test.${id}` })).toBe(0);
    await saveHistory(handle.workflowId, 'truth-approval-rejected');
  });

  it('applies decisions in arrival order when both arrive before the workflow first runs', async () => {
    // No worker polls this queue until both signals are in the history, so the first workflow task sees both.
    const id = 'apr_000000000000000000000005';
    const queue = `${TASK_QUEUE}-late`;
    const handle = await env.client.workflow.start(truthApprovalWorkflow, {
      workflowId: `truth-approval/${id}`,
      taskQueue: queue,
      args: [input(id)]
    });
    await handle.signal(rejectSignal, { approver: 'bob', reason: 'no' });
    await handle.signal(approveSignal, { approver: 'carol', reason: 'yes' });
    const result = await wf.runWorkerUntil(queue, () => handle.result());
    expect(result).toMatchObject({ state: 'rejected', approver: 'bob', seq: null });
    expect(await db.collection('ledger').countDocuments({ key: `wf.test.${id}` })).toBe(0);
    await saveHistory(handle.workflowId, 'truth-approval-decisions-before-first-task');
  });

  it('expires when nobody decides in time', async () => {
    const id = 'apr_000000000000000000000003';
    const handle = await env.client.workflow.start(truthApprovalWorkflow, {
      workflowId: `truth-approval/${id}`,
      taskQueue: TASK_QUEUE,
      args: [input(id, 1)]
    });
    const result = await handle.result();
    expect(result).toMatchObject({ state: 'expired', seq: null });
    await saveHistory(handle.workflowId, 'truth-approval-expired');
  });
});
