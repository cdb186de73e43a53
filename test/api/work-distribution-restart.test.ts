/**
 * Leased tasks across a restart of the worker and of the Temporal server (a dev server of its own, state in a SQLite
 * file, so the shared one keeps serving the other suites). Claims, progress and results never wait for Temporal;
 * lease expiry is the task-leases/<queue> workflow's durable timer: a lease that ends while the worker and the server
 * are down is swept once they are back, with nobody reading the queue (the database is watched directly here), and
 * a lease ending while only the worker is down fails its task on its last attempt once the worker is back.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startTemporal } from '../../scripts/stack/temporal';
import { freePort, ServerHandle } from '../../scripts/stack/process';
import { issueHomologousToken } from '../support/credentials';
import { heartbeat, nodeHeaders, registerNode, RegisteredNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';
import { taskLeasesStatusQuery, taskLeasesWorkflowId } from '../../contracts/federation/task-lease.contract';

let svc: TestService;
let temporal: ServerHandle & { address: string };
let dataDir: string;
let port: number;
let token: string;
let node: RegisteredNode;
const LEASE_S = 3;

const startServer = async () =>
  (temporal = await startTemporal({ dataDir, port, uiPort: 0, namespace: 'default', headless: true, echo: false }));
const stored = async (id: string) => svc.db.collection('tasks').findOne({ _id: id as never });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'own-temporal-'));
  port = await freePort();
  await startServer();
  svc = await startTestService({
    TEMPORAL_ADDRESS: temporal.address,
    TASK_LEASE_S: String(LEASE_S),
    TASK_MAX_ATTEMPTS: '2',
    NODE_REVIEW_REQUIRED: 'false',
    NODE_OFFLINE_AFTER_S: '300'
  });
  token = await issueHomologousToken(svc.urls.main, svc.adminToken, 'submitter');
  node = await registerNode(svc.urls.main, 'restart-worker', 'custom', { capabilities: { declared: ['batch'] } });
  await eventually(
    async () => {
      await heartbeat(svc.urls.main, node);
      return (await svc.db.collection('nodes').findOne({ _id: node.node_id as never }))?.state === 'online'
        ? true
        : undefined;
    },
    30_000,
    'the node online'
  );
}, 180_000);
afterAll(async () => {
  await svc?.close();
  await temporal?.stop();
});

it('sweeps leases that ended while the worker and the Temporal server were down, once they are back', async () => {
  const submit = async (n: number) => {
    const res = await http('POST', `${svc.urls.hub}/a2a/task`, {
      headers: { 'x-zr-token': token },
      body: { type: 'batch.job', payload: { n }, required_capabilities: ['batch'], priority: 5 }
    });
    expect(res.status).toBe(200);
    return res.body.task_id as string;
  };
  const ids = [await submit(1), await submit(2), await submit(3)];
  const claim = await http('POST', `${svc.urls.main}/api/task/assign`, {
    headers: nodeHeaders(node),
    body: { max_tasks: 3 }
  });
  expect(claim.status).toBe(200);
  expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id).sort()).toEqual([...ids].sort());
  const [done, finishedInOutage, lapsed] = ids as [string, string, string];
  // The claim started the sweeper; it now sleeps until the earliest lease ends.
  const sweeper = svc.temporal.workflow.getHandle(taskLeasesWorkflowId(svc.env.TEMPORAL_TASK_QUEUE!));
  await eventually(
    async () => ((await sweeper.query(taskLeasesStatusQuery)).next_wake_at ? true : undefined),
    30_000,
    'the sweeper asleep'
  );
  expect(
    (
      await http('POST', `${svc.urls.main}/api/task/${done}/complete`, {
        headers: nodeHeaders(node),
        body: { result: { text: 'before' } }
      })
    ).body.task.state
  ).toBe('done');

  await svc.stopWorker();
  await temporal.stop();
  try {
    // Work goes on without Temporal: progress extends a lease, a result is taken.
    const progress = await http('POST', `${svc.urls.main}/api/task/${finishedInOutage}/progress`, {
      headers: nodeHeaders(node),
      body: { note: 'still here' }
    });
    expect(progress.body).toMatchObject({ ok: true, canceled: false });
    await sleep((LEASE_S + 2) * 1000); // the third task's lease ends while everything is down
    const completed = await http('POST', `${svc.urls.main}/api/task/${finishedInOutage}/complete`, {
      headers: nodeHeaders(node),
      body: { result: { text: 'during' } }
    });
    expect(completed.body.task.state).toBe('done');
    expect(await stored(lapsed)).toMatchObject({ state: 'claimed', attempts: 1 }); // nobody swept it
  } finally {
    await startServer();
    await svc.startWorker();
  }

  // Back up: the sweeper's timer fires and the lapsed task returns to the queue, with no call to the API.
  const requeued = await eventually(
    async () => {
      const t = await stored(lapsed);
      return t?.state === 'queued' ? t : undefined;
    },
    60_000,
    'the lapsed task back in the queue'
  );
  expect(requeued).toMatchObject({ claimed_by: null, lease_expires_at: null, attempts: 1 });
  expect(await stored(done)).toMatchObject({ state: 'done' });
  expect(await stored(finishedInOutage)).toMatchObject({ state: 'done' });

  // The retry (attempt 2 of 2), then only the worker restarts while its lease ends: the task fails once it is back.
  await heartbeat(svc.urls.main, node);
  const retry = await http('POST', `${svc.urls.main}/api/task/assign`, {
    headers: nodeHeaders(node),
    body: { max_tasks: 3 }
  });
  expect(retry.body.tasks).toEqual([expect.objectContaining({ task_id: lapsed, attempts: 2 })]);
  await svc.stopWorker();
  try {
    await sleep((LEASE_S + 2) * 1000);
    expect(await stored(lapsed)).toMatchObject({ state: 'claimed', attempts: 2 });
  } finally {
    await svc.startWorker();
  }
  const failed = await eventually(
    async () => {
      const t = await stored(lapsed);
      return t?.state === 'failed' ? t : undefined;
    },
    60_000,
    'the task failed on its last attempt'
  );
  expect(failed.error).toBe('lease lapsed on attempt 2 of 2');
  const status = await sweeper.query(taskLeasesStatusQuery);
  expect(status).toMatchObject({ requeued: 1, failed: 1, lease_s: LEASE_S, max_attempts: 2 });
  const stats = (await http('GET', `${svc.urls.main}/a2a/queue/stats`)).body;
  expect(stats).toMatchObject({ depth: 0, in_flight: 0, done: 2, failed: 1 });
}, 240_000);
