/**
 * Work distribution over real HTTP: worker nodes claim queued tasks (POST /api/task/assign) by their declared
 * capabilities; a claim is exclusive across two API processes sharing the database; a lapsed lease returns the task
 * to the queue and the retry is claimed again, until TASK_MAX_ATTEMPTS fails it (swept by the task-leases workflow
 * with nobody reading); progress extends a lease and tells
 * the node of a cancel; only online nodes claim (pending_review and offline get 403); GET /api/nodes lists the
 * online nodes.
 */
import { TaskStore } from '../../store/federation/tasks';
import { issueHomologousToken } from '../support/credentials';
import { heartbeat, nodeHeaders, registerNode, RegisteredNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';

let svc: TestService;
let second: { url: string; stop(): Promise<void> };
let reviewer: string;
const LEASE_S = 2;
const asReviewer = () => ({ 'x-zr-token': reviewer });

async function onlineNode(name: string, capabilities: string[]): Promise<RegisteredNode> {
  const node = await registerNode(svc.urls.main, name, 'custom', { capabilities: { declared: capabilities } });
  const approved = await http('POST', `${svc.urls.main}/a2a/review/approve`, {
    headers: asReviewer(),
    body: { node_id: node.node_id, reason: 'worker' }
  });
  expect(approved.status).toBe(200);
  await eventually(
    async () => {
      await heartbeat(svc.urls.main, node);
      return (await svc.db.collection('nodes').findOne({ _id: node.node_id as never }))?.state === 'online'
        ? true
        : undefined;
    },
    30_000,
    `${name} online`
  );
  return node;
}

const submit = async (type: string, required: string[], priority = 5) => {
  const res = await http('POST', `${svc.urls.hub}/a2a/task`, {
    headers: asReviewer(),
    body: { type, payload: { n: 1 }, required_capabilities: required, priority }
  });
  expect(res.status).toBe(200);
  return res.body.task_id as string;
};
const assign = (url: string, node: RegisteredNode, max = 1) =>
  http('POST', `${url}/api/task/assign`, { headers: nodeHeaders(node), body: { max_tasks: max } });
const task = async (id: string) =>
  (await http('GET', `${svc.urls.hub}/a2a/task/${id}`, { headers: asReviewer() })).body.task;

let alpha: RegisteredNode;
let beta: RegisteredNode;

beforeAll(async () => {
  svc = await startTestService({ TASK_LEASE_S: String(LEASE_S), TASK_MAX_ATTEMPTS: '2' });
  second = await svc.startSecondApi();
  reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken, 'reviewer');
  [alpha, beta] = await Promise.all([onlineNode('alpha', ['gpu', 'chat']), onlineNode('beta', ['gpu', 'chat'])]);
}, 180_000);
afterAll(async () => {
  await second?.stop();
  await svc?.close();
});

test('a pending-review or offline node may not claim (403); a node claims only what its capabilities cover', async () => {
  const pending = await registerNode(svc.urls.main, 'newcomer', 'custom', { capabilities: { declared: ['gpu'] } });
  const refused = await assign(svc.urls.main, pending);
  expect([refused.status, refused.body.error]).toEqual([403, 'forbidden']);
  expect(refused.body.message).toContain('pending_review');
  expect((await http('POST', `${svc.urls.main}/api/task/assign`, { body: {} })).status).toBe(401);

  const offline = await onlineNode('sleepy', ['gpu']);
  await svc.db.collection('nodes').updateOne({ _id: offline.node_id as never }, { $set: { state: 'offline' } });
  expect((await assign(svc.urls.main, offline)).status).toBe(403);

  const special = await submit('render.video', ['gpu', 'video']);
  const claimed = await assign(svc.urls.main, alpha, 5);
  expect(claimed.status).toBe(200);
  expect(claimed.body.tasks.map((t: { task_id: string }) => t.task_id)).not.toContain(special);
  // Nobody declared video: it waits. Cancel it so later tests see an empty queue.
  // Through the store, which counts every change of state (a write around it would leave the queue stats off).
  expect((await new TaskStore(svc.db).cancel(special)).canceled).toBe(true);
});

test('two nodes racing through two API processes never get the same task', async () => {
  const ids = await Promise.all(Array.from({ length: 6 }, (_, i) => submit('race.job', ['gpu'], i % 3)));
  const rounds = await Promise.all(
    Array.from({ length: 8 }, (_, i) => assign(i % 2 ? second.url : svc.urls.main, i % 4 < 2 ? alpha : beta, 2))
  );
  const claims = rounds.flatMap((r) => {
    expect(r.status).toBe(200);
    return r.body.tasks.map((t: { task_id: string; claimed_by: string }) => `${t.task_id}:${t.claimed_by}`);
  });
  const taskIds = claims.map((c) => c.split(':')[0]);
  expect(new Set(taskIds).size).toBe(taskIds.length);
  expect(new Set(taskIds)).toEqual(new Set(ids));
  // The store agrees with what each node was told.
  for (const claim of claims) {
    const [id, node] = claim.split(':');
    expect(await task(id!)).toMatchObject({ state: 'claimed', claimed_by: node, attempts: 1 });
  }
  // Only the holder may finish it.
  const [id, holder] = claims[0]!.split(':');
  const other = holder === alpha.node_id ? beta : alpha;
  const me = holder === alpha.node_id ? alpha : beta;
  expect(
    (
      await http('POST', `${svc.urls.main}/api/task/${id}/complete`, {
        headers: nodeHeaders(other),
        body: { result: { x: 1 } }
      })
    ).status
  ).toBe(409);
  const completed = await http('POST', `${second.url}/api/task/${id}/complete`, {
    headers: nodeHeaders(me),
    body: { result: { x: 1 } }
  });
  expect(completed.body.task).toMatchObject({ state: 'done', result: { x: 1 } });
  expect(
    (await http('POST', `${svc.urls.main}/api/task/${id}/fail`, { headers: nodeHeaders(me), body: { reason: 'late' } }))
      .status
  ).toBe(409);
  // Finish the rest so the next test starts from an empty queue.
  for (const claim of claims.slice(1)) {
    const [tid, node] = claim.split(':');
    const res = await http('POST', `${svc.urls.main}/api/task/${tid}/fail`, {
      headers: nodeHeaders(node === alpha.node_id ? alpha : beta),
      body: { reason: 'test over' }
    });
    expect(res.body.task).toMatchObject({ state: 'failed', error: 'test over' });
  }
});

test('a lapsed lease returns the task to the queue; the retry is claimed again; TASK_MAX_ATTEMPTS fails it', async () => {
  const id = await submit('lease.job', ['chat'], 9);
  const first = await assign(svc.urls.main, alpha);
  expect(first.body.tasks).toEqual([expect.objectContaining({ task_id: id, attempts: 1, claimed_by: alpha.node_id })]);
  // Progress extends the lease.
  const before = first.body.tasks[0].lease_expires_at;
  await new Promise((r) => setTimeout(r, 1100));
  const progress = await http('POST', `${svc.urls.main}/api/task/${id}/progress`, {
    headers: nodeHeaders(alpha),
    body: { note: 'half way' }
  });
  expect(progress.body).toMatchObject({ ok: true, canceled: false, task: { progress: 'half way' } });
  expect(progress.body.task.lease_expires_at > before).toBe(true);
  // alpha goes quiet: after the lease, beta gets the retry.
  const retry = await eventually(
    async () => {
      await heartbeat(svc.urls.main, beta);
      const res = await assign(second.url, beta);
      return res.body.tasks.length ? res.body.tasks[0] : undefined;
    },
    20_000,
    'the lapsed task claimed again'
  );
  expect(retry).toMatchObject({ task_id: id, attempts: 2, claimed_by: beta.node_id });
  // alpha's late result is refused; its progress call says the task is not its own.
  expect(
    (
      await http('POST', `${svc.urls.main}/api/task/${id}/complete`, {
        headers: nodeHeaders(alpha),
        body: { result: {} }
      })
    ).status
  ).toBe(409);
  // beta lapses too: that was the last attempt. Nobody reads the queue meanwhile (the database is watched directly):
  // the task-leases workflow fails the task when the lease ends.
  const failed = await eventually(
    async () => {
      const t = await svc.db.collection('tasks').findOne({ _id: id as never });
      return t?.state === 'failed' ? t : undefined;
    },
    20_000,
    'the task failed after its attempts, swept by the workflow'
  );
  expect(failed.error).toContain('lease lapsed on attempt 2 of 2');
  expect(Date.parse(failed.finished_at) - Date.parse(retry.lease_expires_at)).toBeGreaterThanOrEqual(0);
  expect(await task(id)).toMatchObject({ state: 'failed' });
  // The queue's counters follow the task's change a moment after it (they count its change record).
  const stats = await eventually(
    async () => {
      const body = (await http('GET', `${svc.urls.main}/a2a/queue/stats`)).body;
      if (body.depth === 0 && body.in_flight === 0) return body;
      throw new Error(`stats ${JSON.stringify(body)}`);
    },
    15_000,
    'the queue stats to count the failed task out'
  );
  expect(stats.mean_wait_s).toEqual(expect.any(Number));
});

test('cancelling a claimed task tells the node at its next progress call', async () => {
  const id = await submit('cancel.job', ['gpu']);
  await heartbeat(svc.urls.main, alpha);
  const claimed = await assign(svc.urls.main, alpha);
  expect(claimed.body.tasks[0].task_id).toBe(id);
  expect((await new TaskStore(svc.db).cancel(id)).canceled).toBe(true);
  const progress = await http('POST', `${svc.urls.main}/api/task/${id}/progress`, {
    headers: nodeHeaders(alpha),
    body: {}
  });
  expect(progress.body).toMatchObject({ ok: true, canceled: true, task: { state: 'canceled' } });
  expect(
    (
      await http('POST', `${svc.urls.main}/api/task/${id}/complete`, {
        headers: nodeHeaders(alpha),
        body: { result: {} }
      })
    ).status
  ).toBe(409);
});

test('GET /api/nodes lists the online nodes for nodes and arbitrators', async () => {
  const beats = await Promise.all([heartbeat(svc.urls.main, alpha), heartbeat(svc.urls.main, beta)]);
  expect((await http('GET', `${svc.urls.main}/api/nodes`)).status).toBe(401);
  // An approved node's heartbeat may be answered before it is stored (PRESENCE_ACK_LAG_MS): the list shows it within
  // the write lag. Both reads below come after that, so they agree.
  await eventually(
    async () => {
      const res = await http('GET', `${svc.urls.main}/api/nodes`, { headers: asReviewer() });
      const seen = (id: string) =>
        Date.parse(res.body.nodes.find((n: { node_id: string }) => n.node_id === id)?.last_seen_at ?? '') || 0;
      return seen(alpha.node_id) >= Date.parse(beats[0].body.received_at) &&
        seen(beta.node_id) >= Date.parse(beats[1].body.received_at)
        ? true
        : undefined;
    },
    15_000,
    'both heartbeats in the list'
  );
  const asNode = await http('GET', `${svc.urls.main}/api/nodes`, { headers: nodeHeaders(alpha) });
  const asArbitrator = await http('GET', `${svc.urls.main}/api/nodes`, { headers: asReviewer() });
  expect(asNode.body).toEqual(asArbitrator.body);
  const ids = asNode.body.nodes.map((n: { node_id: string }) => n.node_id);
  expect(ids).toEqual(expect.arrayContaining([alpha.node_id, beta.node_id]));
  expect(asNode.body.nodes.every((n: { last_seen_at: string | null }) => n.last_seen_at !== undefined)).toBe(true);
  expect(asNode.body.nodes.find((n: { node_id: string }) => n.node_id === alpha.node_id)).toMatchObject({
    name: 'alpha',
    capabilities: ['gpu', 'chat'],
    brand: { code: 'custom' }
  });
  expect(JSON.stringify(asNode.body)).not.toContain('api_key');
});
