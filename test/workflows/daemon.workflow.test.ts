/**
 * The daemon's workflows on their own (@temporalio/testing on the dev server binary): daemonDagWorkflow with the real
 * daemon activities (identity re-check on FerretDB, the audit chain in a scratch DATA_DIR, model calls through the
 * openai SDK to the local test upstream) and daemonBreakerWorkflow. With RECORD_HISTORIES=1 it saves the histories
 * the replay test replays.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { WorkflowHandle } from '@temporalio/client';
import { createActivities } from '../../activities';
import { createDaemonCoreActivities, createDaemonModelActivities, DaemonActivityDeps } from '../../activities/daemon';
import { ProviderCatalog } from '../../core/chat/providers';
import { verifyAuditFile } from '../../core/daemon/audit.node';
import { validateDag } from '../../core/daemon/dag';
import type { DispatchBody } from '../../core/daemon/dispatch';
import { hashSecret } from '../../core/credentials.node';
import { CredentialStore } from '../../store/credentials';
import { Ledger } from '../../store/ledger/ledger';
import { taskQueueFor } from '../../contracts/task-queues';
import { daemonBreakerWorkflow } from '../../workflows/daemon/breaker';
import { breakerStateQuery, daemonBreakerWorkflowId } from '../../contracts/daemon/breaker.contract';
import { daemonDagWorkflow } from '../../workflows/daemon/dag';
import { DagInput, daemonDagWorkflowId, dagStateQuery } from '../../contracts/daemon/dag.contract';
import { FakeOpenAi, startFakeOpenAi } from '../support/fake-openai';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

jest.setTimeout(180_000);
const QUEUE = 'daemon-wf-test';
let wf: WorkflowTestEnv;
let upstream: FakeOpenAi;
let dataDir: string;
let deps: DaemonActivityDeps;
let asset: { id: string; orderRoot: string };
let breaker: WorkflowHandle<typeof daemonBreakerWorkflow>;
let stop: () => Promise<void>;

beforeAll(async () => {
  wf = await startWorkflowTestEnv('daemon-wf-env');
  upstream = await startFakeOpenAi('daemon');
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-daemon-wf-'));
  const catalog = new ProviderCatalog([
    {
      name: 'local',
      base_url: upstream.baseUrl,
      timeout_ms: 5000,
      models: [
        {
          id: 'free-model',
          free_tier: true,
          price: { prompt_per_1k: 1, completion_per_1k: 2 },
          kind: 'chat',
          fallbacks: []
        }
      ]
    }
  ]);
  deps = {
    dataDir,
    protocolVersion: 1,
    catalog,
    whitelist: undefined,
    cleartext: false,
    serviceDid: 'did:zhongshu:hub'
  };
  const issued = await new CredentialStore(wf.db).issueDaemonAsset('wf', 1);
  asset = { id: issued.doc._id, orderRoot: issued.orderRoot };
  const ledger = new Ledger(wf.db);
  const core = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue: QUEUE,
    workflowBundle: { codePath: process.env.ZH_TEST_WORKFLOW_BUNDLE! },
    activities: {
      ...createActivities({ db: wf.db, ledger }),
      ...createDaemonCoreActivities({ db: wf.db, ledger, daemon: deps })
    }
  });
  const models = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue: taskQueueFor(QUEUE, 'models'),
    activities: createDaemonModelActivities(deps)
  });
  const running = Promise.all([core.run(), models.run()]);
  stop = async () => {
    core.shutdown();
    models.shutdown();
    await running;
  };
  breaker = await wf.env.client.workflow.start(daemonBreakerWorkflow, {
    workflowId: daemonBreakerWorkflowId(QUEUE),
    taskQueue: QUEUE,
    args: [{ version: 1, threshold: 2, cooldown_ms: 1500 }]
  });
});
afterAll(async () => {
  await breaker?.terminate().catch(() => undefined);
  await stop?.();
  await wf?.close();
  await upstream?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});
beforeEach(() => upstream.reset());

function input(dagId: string, body: DispatchBody, orderRoot = asset.orderRoot, maxParallel = 4): DagInput {
  const v = validateDag(body);
  if ('problems' in v) throw new Error(JSON.stringify(v.problems));
  return {
    version: 1,
    dag_id: dagId,
    asset_id: asset.id,
    order_root_sha256: hashSecret(orderRoot),
    order_root_version: 1,
    tasks: v.tasks,
    order: v.order,
    max_parallel: maxParallel,
    call_timeout_s: 10,
    breaker_workflow_id: daemonBreakerWorkflowId(QUEUE),
    hub_did: 'did:zhongshu:hub',
    submitted_at: new Date().toISOString()
  };
}

const run = (i: DagInput) =>
  wf.env.client.workflow.execute(daemonDagWorkflow, {
    workflowId: daemonDagWorkflowId(i.dag_id),
    taskQueue: QUEUE,
    args: [i]
  });

test('a DAG runs in topological order, a child quotes its parent, every result is hashed and chained', async () => {
  const res = await run(
    input('wf-done', {
      wait: true,
      tasks: [
        { id: 'a', model: 'free-model', prompt: 'alpha', depends_on: [] },
        { id: 'b', model: 'free-model', prompt: 'after {{a.output}}', depends_on: ['a'] },
        { id: 'c', model: 'free-model', messages: [{ role: 'user', content: 'gamma' }], depends_on: ['a'] }
      ]
    })
  );
  expect(res.status).toBe('DONE');
  expect(res.tasks.map((t) => [t.id, t.status])).toEqual([
    ['a', 'DONE'],
    ['b', 'DONE'],
    ['c', 'DONE']
  ]);
  expect(upstream.calls).toBe(3);
  const a = res.tasks[0]!;
  expect(a.output).toBe('echo: alpha');
  expect(a.output_sha256).toBe(require('node:crypto').createHash('sha256').update('echo: alpha').digest('hex'));
  expect(a.usage).toEqual({
    prompt_tokens: expect.any(Number),
    completion_tokens: expect.any(Number),
    total_tokens: expect.any(Number)
  });
  expect(typeof a.cost).toBe('number');
  expect(JSON.stringify(upstream.bodies[0])).toContain('alpha');
  expect(upstream.bodies.map((b) => JSON.stringify(b)).some((b) => b.includes('after echo: alpha'))).toBe(true);
  for (const child of res.tasks.slice(1)) expect(child.started_at! >= a.finished_at!).toBe(true);
  const chain = verifyAuditFile(dataDir);
  expect(chain.ok).toBe(true);
  expect(res.audit_root).toBe(chain.root);
  expect(res.ledger_seq).toEqual(expect.any(Number));
  await wf.saveHistory(daemonDagWorkflowId('wf-done'), 'daemon-dag-done');
});

test('an order root that no longer matches stops every task before its call; dependents are skipped', async () => {
  const res = await run(
    input(
      'wf-rejected',
      {
        wait: true,
        tasks: [
          { id: 'a', model: 'free-model', prompt: 'one', depends_on: [] },
          { id: 'b', model: 'free-model', prompt: 'two', depends_on: ['a'] }
        ]
      },
      'or1_forged'
    )
  );
  expect(upstream.calls).toBe(0);
  expect(res.status).toBe('rejected');
  expect(res.tasks.map((t) => t.status)).toEqual(['rejected', 'skipped']);
  const doc = await new CredentialStore(wf.db).daemonAssets.findOne({ _id: asset.id });
  expect((doc as { isolated_at?: string }).isolated_at).toEqual(expect.any(String));
  await new CredentialStore(wf.db).daemonAssets.updateOne({ _id: asset.id }, { $set: { isolated_at: null } } as never);
  await wf.saveHistory(daemonDagWorkflowId('wf-rejected'), 'daemon-dag-rejected');
});

test('the breaker opens after the threshold, no call is made while open, the half-open probe closes it', async () => {
  upstream.behaviour.failNext = { count: 2, status: 500 };
  const failed = await run(
    input(
      'wf-failing',
      {
        wait: true,
        tasks: [
          { id: 'x', model: 'free-model', prompt: 'x', depends_on: [] },
          { id: 'y', model: 'free-model', prompt: 'y', depends_on: [] },
          { id: 'z', model: 'free-model', prompt: 'z', depends_on: ['x'] }
        ]
      },
      asset.orderRoot,
      1
    )
  );
  expect(failed.tasks.map((t) => t.status)).toEqual(['failed', 'failed', 'skipped']);
  expect(upstream.calls).toBe(2);
  expect((await breaker.query(breakerStateQuery)).state).toBe('open');

  const handle = await wf.env.client.workflow.start(daemonDagWorkflow, {
    workflowId: daemonDagWorkflowId('wf-probe'),
    taskQueue: QUEUE,
    args: [
      input(
        'wf-probe',
        {
          wait: true,
          tasks: [
            { id: 'p', model: 'free-model', prompt: 'probe', depends_on: [] },
            { id: 'q', model: 'free-model', prompt: 'after', depends_on: [] }
          ]
        },
        asset.orderRoot,
        2
      )
    ]
  });
  // While open the tasks wait as paused and the upstream sees nothing.
  for (;;) {
    const view = await handle.query(dagStateQuery);
    const b = await breaker.query(breakerStateQuery);
    if (b.state !== 'open') break;
    if (view.tasks.every((t) => t.status === 'paused')) expect(upstream.calls).toBe(2);
    await new Promise((r) => setTimeout(r, 100));
  }
  const done = await handle.result();
  expect(done.tasks.map((t) => t.status)).toEqual(['DONE', 'DONE']);
  expect(upstream.calls).toBe(4);
  const b = await breaker.query(breakerStateQuery);
  expect(b.state).toBe('closed');
  expect(b.changes).toBeGreaterThanOrEqual(3);
  const lines = fs
    .readFileSync(path.join(dataDir, 'daemon_audit.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(lines.filter((l) => l.event === 'breaker').map((l) => l.to)).toEqual(['open', 'half_open', 'closed']);
  expect(verifyAuditFile(dataDir).ok).toBe(true);
  await wf.saveHistory(daemonDagWorkflowId('wf-probe'), 'daemon-dag-paused-by-breaker');
  await wf.saveHistory(daemonBreakerWorkflowId(QUEUE), 'daemon-breaker-open-probe-closed');
});

test('a reset signal closes an open breaker', async () => {
  upstream.behaviour.failNext = { count: 2, status: 503 };
  await run(
    input(
      'wf-fail-2',
      {
        wait: true,
        tasks: [
          { id: 'x', model: 'free-model', prompt: 'x', depends_on: [] },
          { id: 'y', model: 'free-model', prompt: 'y', depends_on: [] }
        ]
      },
      asset.orderRoot,
      1
    )
  );
  expect((await breaker.query(breakerStateQuery)).state).toBe('open');
  await breaker.signal('daemonBreakerReset', { actor: 'test' });
  for (let i = 0; i < 100 && (await breaker.query(breakerStateQuery)).state !== 'closed'; i++)
    await new Promise((r) => setTimeout(r, 50));
  expect((await breaker.query(breakerStateQuery)).state).toBe('closed');
});

test('the breaker continues as new when its history grows, keeping its state and the paused tasks', async () => {
  const id = `${daemonBreakerWorkflowId(QUEUE)}-can`;
  const handle = await wf.env.client.workflow.start(daemonBreakerWorkflow, {
    workflowId: id,
    taskQueue: QUEUE,
    args: [{ version: 1, threshold: 1, cooldown_ms: 3_600_000, history_limit: 40 }]
  });
  const firstRun = handle.firstExecutionRunId;
  await handle.signal('daemonBreakerReport', { workflow_id: 'daemon-dag/none', task_id: 'f', ok: false });
  // Admissions while open wait; their answers go to DAGs that do not exist (ignored).
  for (let i = 0; i < 12; i++)
    await handle.signal('daemonBreakerAdmit', { workflow_id: 'daemon-dag/none', task_id: `w${i}` });
  let described = await handle.describe();
  for (let i = 0; i < 200 && described.runId === firstRun; i++) {
    await new Promise((r) => setTimeout(r, 100));
    described = await handle.describe();
  }
  expect(described.runId).not.toBe(firstRun);
  const view = await wf.env.client.workflow.getHandle(id).query(breakerStateQuery);
  expect(view.state).toBe('open');
  expect(view.waiting.map((w) => w.task_id)).toEqual(Array.from({ length: 12 }, (_, i) => `w${i}`));
  await wf.saveHistory(id, 'daemon-breaker-continued-as-new', firstRun);
  await wf.env.client.workflow.getHandle(id).terminate();
});

test('independent tasks run at most max_parallel at a time', async () => {
  upstream.behaviour.delayMs = 300;
  const res = await run(
    input(
      'wf-parallel',
      {
        wait: true,
        tasks: ['p1', 'p2', 'p3', 'p4'].map((id) => ({ id, model: 'free-model', prompt: id, depends_on: [] }))
      },
      asset.orderRoot,
      2
    )
  );
  expect(res.status).toBe('DONE');
  // At every task's start, fewer than two others are running.
  for (const t of res.tasks) {
    const overlapping = res.tasks.filter(
      (o) => o.id !== t.id && o.started_at! <= t.started_at! && o.finished_at! > t.started_at!
    );
    expect([t.id, overlapping.length <= 1]).toEqual([t.id, true]);
  }
  // And two did run at once.
  expect(
    res.tasks.some((t) =>
      res.tasks.some((o) => o.id !== t.id && o.started_at! <= t.started_at! && o.finished_at! > t.started_at!)
    )
  ).toBe(true);
});
