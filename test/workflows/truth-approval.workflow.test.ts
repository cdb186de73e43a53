/**
 * truthApprovalWorkflow on its own, with @temporalio/testing driving the same Temporal dev server binary
 * (existing-path executable) and the real activities writing to the embedded FerretDB.
 * With RECORD_HISTORIES=1 it saves the histories the replay test replays (test/replay/histories/).
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import { MongoClient, Db } from 'mongodb';
import { createActivities } from '../../activities';
import { Ledger } from '../../activities/store/ledger';
import { ensureIndexes } from '../../activities/store/mongo';
import { canonicalJson } from '../../core/canonical-json';
import { SEARCH_ATTRIBUTES } from '../../core/search-attributes';
import { approvalStatusQuery, approveSignal, rejectSignal, TruthApprovalInput } from '../../workflows/truth-approval.contract';
import { truthApprovalWorkflow } from '../../workflows/truth-approval';

let env: TestWorkflowEnvironment;
let mongo: MongoClient;
let db: Db;
let worker: Worker;
let running: Promise<void>;
const TASK_QUEUE = 'truth-approval-wf-test';

beforeAll(async () => {
  Runtime.install({ telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } }, logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} } });
  env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: process.env.ZH_TEST_TEMPORAL_BIN! },
      extraArgs: ['--headless', '--log-level', 'error', ...Object.entries(SEARCH_ATTRIBUTES).flatMap(([name, type]) => ['--search-attribute', `${name}=${type}`])]
    }
  });
  mongo = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!);
  db = mongo.db(`wf_test_${Date.now()}`);
  await ensureIndexes(db);
  worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: TASK_QUEUE,
    workflowBundle: { codePath: process.env.ZH_TEST_WORKFLOW_BUNDLE! },
    activities: createActivities({ db, ledger: new Ledger(db) })
  });
  running = worker.run();
});

afterAll(async () => {
  worker?.shutdown();
  await running;
  await db?.dropDatabase();
  await mongo?.close();
  await env?.teardown();
});

const input = (id: string, timeout = 3600): TruthApprovalInput => ({
  version: 1,
  approval_id: id,
  truth: { key: `wf.test.${id}`, value_json: canonicalJson({ id }), truth_type: 'risk', did: 'did:example:wf', idempotency_key: null },
  held_because: 'truth_type risk is high-risk',
  requested_at: new Date().toISOString(),
  timeout_seconds: timeout,
  hub_did: 'did:zhongshu:hub'
});

/** Exports a history with the Temporal CLI (the same JSON the Web UI downloads). */
async function saveHistory(workflowId: string, name: string): Promise<void> {
  if (process.env.RECORD_HISTORIES !== '1') return;
  const json = execFileSync(process.env.ZH_TEST_TEMPORAL_BIN!, ['workflow', 'show', '--workflow-id', workflowId, '--address', env.address, '--namespace', 'default', '--output', 'json'], { encoding: 'utf8' });
  const dir = path.join(__dirname, '..', 'replay', 'histories');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${name}.json`), json);
}

describe('truthApprovalWorkflow', () => {
  it('appends the held truth and records the decision when approved', async () => {
    const id = 'apr_000000000000000000000001';
    const handle = await env.client.workflow.start(truthApprovalWorkflow, { workflowId: `truth-approval/${id}`, taskQueue: TASK_QUEUE, args: [input(id)] });
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
    const handle = await env.client.workflow.start(truthApprovalWorkflow, { workflowId: `truth-approval/${id}`, taskQueue: TASK_QUEUE, args: [input(id)] });
    await handle.signal(rejectSignal, { approver: 'bob', reason: 'no' });
    await handle.signal(approveSignal, { approver: 'carol', reason: 'yes' });
    const result = await handle.result();
    expect(result).toMatchObject({ state: 'rejected', approver: 'bob', seq: null });
    expect(await db.collection('ledger').countDocuments({ key: `wf.test.${id}` })).toBe(0);
    await saveHistory(handle.workflowId, 'truth-approval-rejected');
  });

  it('expires when nobody decides in time', async () => {
    const id = 'apr_000000000000000000000003';
    const handle = await env.client.workflow.start(truthApprovalWorkflow, { workflowId: `truth-approval/${id}`, taskQueue: TASK_QUEUE, args: [input(id, 1)] });
    const result = await handle.result();
    expect(result).toMatchObject({ state: 'expired', seq: null });
    await saveHistory(handle.workflowId, 'truth-approval-expired');
  });
});
