/**
 * taskLeasesWorkflow on its own, with @temporalio/testing on the dev server binary and the real sweep activity on
 * FerretDB: with nobody reading the queue, a lapsed lease goes back to the queue, a lease lapsing on the last
 * attempt fails its task, an extended lease is left alone, a claim made while the sweeper is idle is swept when it
 * lapses (no signal needed), and the sweeper continues as new with its totals. With RECORD_HISTORIES=1 it saves the
 * histories the replay test replays.
 */
import { Collection } from 'mongodb';
import type { TaskDocument } from '../../store/federation/tasks';
import { taskLeasesWorkflow } from '../../workflows/federation/task-lease';
import {
  configureSignal,
  TaskLeasesInput,
  taskLeasesStatusQuery
} from '../../contracts/federation/task-lease.contract';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

jest.setTimeout(120_000);
let wf: WorkflowTestEnv;
let tasks: Collection<TaskDocument>;

beforeAll(async () => {
  wf = await startWorkflowTestEnv('task-lease-wf-test');
  tasks = wf.db.collection<TaskDocument>('tasks');
});
afterAll(async () => {
  await wf?.close();
});

const input = (over: Partial<TaskLeasesInput> = {}): TaskLeasesInput => ({
  version: 1,
  lease_s: 2,
  max_attempts: 2,
  min_interval_ms: 200,
  history_limit: 2000,
  ...over
});

async function waitFor<T>(check: () => Promise<T | undefined | null | false>, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A task claimed by `node` on attempt `attempts`, its lease ending `inMs` from now. */
async function claimed(id: string, attempts: number, inMs: number): Promise<void> {
  const at = new Date().toISOString();
  await tasks.insertOne({
    _id: id,
    type: 'wf.test',
    payload_json: '{}',
    required_capabilities: [],
    priority: 5,
    state: 'claimed',
    submitted_by: 'tester',
    created_at: at,
    updated_at: at,
    claimed_by: 'ext-custom-000001',
    claim_id: `claim-${id}`,
    claimed_at: at,
    lease_expires_at: new Date(Date.now() + inMs).toISOString(),
    attempts,
    result_json: null,
    error: null
  });
}
const state = async (id: string) => (await tasks.findOne({ _id: id }))?.state;

test('requeues a lapsed lease, fails one on its last attempt, leaves an extended one, and sweeps a claim made while idle', async () => {
  await claimed('t-requeue', 1, 1500);
  await claimed('t-exhausted', 2, 1500);
  // t-extended's holder extends it well before it would lapse (its first lease leaves slack for a loaded machine);
  // the sweeper must go by the lease as stored when it looks, never by what it read earlier.
  await claimed('t-extended', 1, 8000);
  const handle = await wf.env.client.workflow.start(taskLeasesWorkflow, {
    workflowId: 'task-leases/wf-a',
    taskQueue: wf.taskQueue,
    args: [input()]
  });
  await waitFor(async () => (await handle.query(taskLeasesStatusQuery)).sweeps >= 1);
  const extendedTo = new Date(Date.now() + 14_000).toISOString();
  const firstEnd = Date.now() + 8000;
  await tasks.updateOne({ _id: 't-extended' }, { $set: { lease_expires_at: extendedTo } });

  await waitFor(async () => (await state('t-requeue')) === 'queued' && (await state('t-exhausted')) === 'failed');
  expect(await tasks.findOne({ _id: 't-requeue' })).toMatchObject({
    state: 'queued',
    claimed_by: null,
    claim_id: null,
    lease_expires_at: null,
    attempts: 1
  });
  expect(await tasks.findOne({ _id: 't-exhausted' })).toMatchObject({
    state: 'failed',
    error: 'lease lapsed on attempt 2 of 2'
  });
  // Past the end of its first lease, the extended one is still held.
  await new Promise((r) => setTimeout(r, Math.max(0, firstEnd + 1000 - Date.now())));
  expect(await tasks.findOne({ _id: 't-extended' })).toMatchObject({ state: 'claimed', lease_expires_at: extendedTo });

  // The extended lease lapses later, and is swept then.
  await waitFor(async () => (await state('t-extended')) === 'queued', 40_000);
  // Nothing is claimed now: the sweeper sleeps its idle interval (lease_s). A claim made meanwhile ends after it wakes.
  await waitFor(async () => (await handle.query(taskLeasesStatusQuery)).next_wake_at !== null);
  await claimed('t-idle', 1, 2000);
  await waitFor(async () => (await state('t-idle')) === 'queued');

  // configure: new settings, and a sweep now.
  const before = (await handle.query(taskLeasesStatusQuery)).sweeps;
  await handle.signal(configureSignal, { lease_s: 5, max_attempts: 3 });
  const after = await waitFor(async () => {
    const s = await handle.query(taskLeasesStatusQuery);
    return s.sweeps > before ? s : undefined;
  });
  expect(after).toMatchObject({ lease_s: 5, max_attempts: 3, requeued: 3, failed: 1 });
  await handle.terminate('test done');
  await wf.saveHistory(handle.workflowId, 'task-leases-swept');
});

test('continues as new once the history limit is reached, carrying its totals', async () => {
  await claimed('t-can-1', 1, 300);
  const handle = await wf.env.client.workflow.start(taskLeasesWorkflow, {
    workflowId: 'task-leases/wf-b',
    taskQueue: wf.taskQueue,
    args: [input({ lease_s: 1, history_limit: 20 })]
  });
  const status = await waitFor(async () => {
    const s = await handle.query(taskLeasesStatusQuery);
    return s.runs >= 1 ? s : undefined;
  });
  expect(status).toMatchObject({ requeued: 1, lease_s: 1, max_attempts: 2 });
  expect(await state('t-can-1')).toBe('queued');
  await handle.terminate('test done');
  await wf.saveHistory(handle.workflowId, 'task-leases-continued-as-new', handle.firstExecutionRunId);
});
