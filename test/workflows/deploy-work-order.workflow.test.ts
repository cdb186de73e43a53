/**
 * workOrderWorkflow on its own, with @temporalio/testing on the dev server binary and the real core activities on
 * FerretDB: the order waits for its child truth-approval; approved, it is in the node's instruction queue and the
 * truth in the ledger; rejected, neither. With RECORD_HISTORIES=1 it saves the histories the replay test replays.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { workOrderWorkflow } from '../../workflows/deploy/work-order';
import { WorkOrderInput } from '../../contracts/deploy/work-order.contract';
import { truthApprovalWorkflowId } from '../../contracts/ledger/truth-approval.contract';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

jest.setTimeout(120_000);
let wf: WorkflowTestEnv;

beforeAll(async () => {
  wf = await startWorkflowTestEnv('work-order-wf-test');
});
afterAll(async () => {
  await wf?.close();
});

const input = (n: string, action: string): WorkOrderInput => ({
  version: 1,
  instruction_id: `wo_00000000000000000000000${n}`,
  node_id: 'node-w1',
  approval: {
    version: 1,
    approval_id: `apr_00000000000000000000000${n}`,
    truth: {
      key: 'KERNEL.EVOLUTION.DIRECTIVE.restart',
      value_json: JSON.stringify({ directive_action: action }),
      truth_type: null,
      did: 'did:example:deployer',
      idempotency_key: `work-order:wo_${n}`
    },
    held_because: 'key prefix KERNEL.EVOLUTION.DIRECTIVE.',
    requested_at: new Date().toISOString(),
    timeout_seconds: 3600,
    hub_did: 'did:zhongshu:hub'
  },
  hub_did: 'did:zhongshu:hub',
  actor: 'did:example:deployer'
});

async function decide(approvalId: string, verdict: 'approve' | 'reject'): Promise<void> {
  const handle = wf.env.client.workflow.getHandle(truthApprovalWorkflowId(approvalId));
  for (;;) {
    try {
      await handle.describe();
      break;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await handle.signal(verdict, { approver: 'tester', reason: verdict });
}

const orders = () => wf.db.collection('instructions').find({ node_id: 'node-w1' }).toArray();

test('approved: the order is queued for its node and the truth appended', async () => {
  const i = input('1', 'restart');
  const run = wf.env.client.workflow.execute(workOrderWorkflow, {
    workflowId: `work-order/${i.instruction_id}`,
    taskQueue: wf.taskQueue,
    args: [i]
  });
  expect(await orders()).toHaveLength(0);
  await decide(i.approval.approval_id, 'approve');
  const res = await run;
  expect(res).toMatchObject({ state: 'approved', instruction_id: i.instruction_id });
  expect(typeof res.truth_seq).toBe('number');
  const queued = await orders();
  expect(queued).toHaveLength(1);
  expect(queued[0]).toMatchObject({ _id: i.instruction_id, key: 'KERNEL.EVOLUTION.DIRECTIVE.restart', acked_at: null });
  await wf.saveHistory(`work-order/${i.instruction_id}`, 'work-order-approved');
});

test('rejected: nothing is queued', async () => {
  const i = input('2', 'wipe');
  const run = wf.env.client.workflow.execute(workOrderWorkflow, {
    workflowId: `work-order/${i.instruction_id}`,
    taskQueue: wf.taskQueue,
    args: [i]
  });
  await decide(i.approval.approval_id, 'reject');
  expect(await run).toMatchObject({ state: 'rejected', truth_seq: null });
  expect(await orders()).toHaveLength(1);
  await wf.saveHistory(`work-order/${i.instruction_id}`, 'work-order-rejected');
});
