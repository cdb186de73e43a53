/**
 * Federation access over real HTTP against the embedded stack: registration (validation, unique ids under
 * concurrency from two API processes, hashed keys), the node directory (never a key), heartbeat authentication,
 * the node lifecycle workflow (review, offline after a short timeout, back online, the presence sweep across a
 * worker restart, no history per heartbeat), dashboard, peers, tasks on the hub listener and queue stats.
 */
import { createHash } from 'node:crypto';
import { issueHomologousToken } from '../support/credentials';
import { heartbeat, nodeHeaders, registerNode, RegisteredNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';
import { nodeStatusQuery } from '../../contracts/federation/node-lifecycle.contract';

let svc: TestService;
let reviewer: string;
const OFFLINE_AFTER_S = 3;
const asReviewer = () => ({ 'x-zr-token': reviewer });
const nodeState = async (id: string) => (await svc.db.collection('nodes').findOne({ _id: id as never }))?.state;
const approve = (id: string, reason = 'looks fine') =>
  http('POST', `${svc.urls.main}/a2a/review/approve`, { headers: asReviewer(), body: { node_id: id, reason } });
const stateChanges = async (id: string) =>
  (await svc.db.collection('ledger').find({ key: 'hub.node.state_changed' }).sort({ _id: 1 }).toArray())
    .map((e) => JSON.parse(e.value_json as string))
    .filter((v) => v.node_id === id)
    .map((v) => `${v.from}->${v.to}`);

beforeAll(async () => {
  svc = await startTestService({
    NODE_OFFLINE_AFTER_S: String(OFFLINE_AFTER_S),
    NODE_CACHE_TTL_MS: '300',
    NODE_WORKFLOW_HISTORY_LIMIT: '40',
    HEARTBEAT_HISTORY_INTERVAL_S: '1',
    HEARTBEAT_HISTORY_SIZE: '3'
  });
  reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken, 'reviewer');
});
afterAll(async () => {
  await svc?.close();
});

describe('registration', () => {
  it('rejects bad bodies with 400 naming each bad field, and stores nothing', async () => {
    const before = await svc.db.collection('nodes').countDocuments();
    const res = await http('POST', `${svc.urls.main}/a2a/register`, {
      body: { brand: { code: 'acme' }, instance: { memory_gb: -1 }, capabilities: { declared: 'chat' }, extra: 1 }
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    const fields = res.body.fields.map((f: { field: string }) => f.field).join(' ');
    for (const f of ['name', 'brand.code', 'instance.memory_gb', 'capabilities.declared']) expect(fields).toContain(f);
    expect(
      (await http('POST', `${svc.urls.main}/a2a/register`, { body: { name: 'x' } })).body.fields[0].field
    ).toContain('brand');
    expect(await svc.db.collection('nodes').countDocuments()).toBe(before);
  });

  it('gives unique ext-<system>-<seq> ids under concurrent registrations through two API processes, keys stored hashed', async () => {
    const second = await svc.startSecondApi();
    try {
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          http('POST', `${i % 2 ? second.url : svc.urls.main}/a2a/register`, {
            body: {
              name: `burst-${i}`,
              brand: { code: i % 3 ? 'openai' : 'qwen', model_base: 'm' },
              instance: { memory_gb: 16, gpu: 'A100' },
              capabilities: { declared: ['chat'] }
            }
          })
        )
      );
      expect(results.map((r) => r.status)).toEqual(results.map(() => 201));
      const ids = results.map((r) => r.body.node_id as string);
      expect(new Set(ids).size).toBe(40);
      for (const r of results) {
        expect(r.body.node_id).toMatch(/^ext-(openai|qwen)-\d{6}$/);
        expect(r.body).toMatchObject({ state: 'pending_review', workflow_id: `node/${r.body.node_id}` });
        expect(r.body.endpoints.entries.length).toBeGreaterThan(10);
      }
      expect(new Set(ids.map((id) => id.slice(-6))).size).toBe(40); // the sequence part alone is unique too
      const doc = await svc.db.collection('nodes').findOne({ _id: ids[0] as never });
      expect(doc!.api_key_hash).toBe(createHash('sha256').update(results[0]!.body.api_key).digest('hex'));
      const everything = JSON.stringify(await svc.db.collection('nodes').find({}).toArray());
      for (const r of results) expect(everything).not.toContain(r.body.api_key);
    } finally {
      await second.stop();
    }
  });
});

describe('node directory', () => {
  it('lists nodes without keys or key digests, filtered by state and brand, paginated', async () => {
    const node = await registerNode(svc.urls.main, 'directory-node', 'mistral');
    const all = await http('GET', `${svc.urls.main}/a2a/nodes?limit=200`);
    expect(all.status).toBe(200);
    expect(all.text).not.toContain('api_key');
    expect(all.text).not.toContain(node.api_key);
    expect(all.body.nodes.find((n: { node_id: string }) => n.node_id === node.node_id)).toMatchObject({
      name: 'directory-node',
      brand: { code: 'mistral' },
      state: 'pending_review'
    });
    const mistral = await http('GET', `${svc.urls.main}/a2a/nodes?brand=mistral`);
    expect(mistral.body.nodes.every((n: { brand: { code: string } }) => n.brand.code === 'mistral')).toBe(true);
    const page1 = await http('GET', `${svc.urls.main}/a2a/nodes?limit=5&offset=0`);
    const page2 = await http('GET', `${svc.urls.main}/a2a/nodes?limit=5&offset=5`);
    expect(page1.body.nodes).toHaveLength(5);
    expect(page1.body.next_offset).toBe(5);
    expect(page2.body.nodes[0].node_id).not.toBe(page1.body.nodes[0].node_id);
    expect((await http('GET', `${svc.urls.main}/a2a/nodes?state=sleeping`)).status).toBe(400);
    const one = await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`);
    expect(one.body.node).toMatchObject({ node_id: node.node_id, heartbeat_history: [] });
    expect(one.text).not.toContain('api_key');
  });
});

describe('heartbeat', () => {
  let node: RegisteredNode;
  beforeAll(async () => {
    node = await registerNode(svc.urls.main, 'hb-node');
  });

  it('answers 401 without either header, with a wrong key or an unknown node', async () => {
    const url = `${svc.urls.main}/a2a/heartbeat`;
    expect((await http('POST', url, { body: {} })).status).toBe(401);
    expect((await http('POST', url, { headers: { 'x-external-node': node.node_id }, body: {} })).status).toBe(401);
    expect((await http('POST', url, { headers: { 'x-external-key': node.api_key }, body: {} })).status).toBe(401);
    const wrong = await http('POST', url, {
      headers: { ...nodeHeaders(node), 'x-external-key': 'nk_forged' },
      body: {}
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toMatchObject({ ok: false, error: 'unauthorized' });
    expect(
      (
        await http('POST', url, {
          headers: { 'x-external-node': 'ext-custom-999999', 'x-external-key': node.api_key },
          body: {}
        })
      ).status
    ).toBe(401);
  });

  it('records the figures (pending nodes may heartbeat) and validates them', async () => {
    const ok = await heartbeat(svc.urls.main, node);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ ok: true, node_id: node.node_id, state: 'pending_review' });
    // Where the hub spent the time (a pending node's answer waits for its presence write).
    expect(ok.headers.get('server-timing')).toMatch(/^auth;dur=\d+\.\d, presence;dur=\d+\.\d$/);
    expect((await heartbeat(svc.urls.main, node, { resources: { cpu_percent: 140 } })).status).toBe(400);
    const listed = await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`);
    expect(listed.body.node.latest).toMatchObject({
      resources: { cpu_percent: 12, gpu_count: 1 },
      performance: { latency_ms: 40 }
    });
    expect(listed.body.node.last_seen_at).toBe(ok.body.received_at);
    const history = await eventually(
      async () => {
        const res = await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`);
        return res.body.node.heartbeat_history.length > 0 ? res.body.node.heartbeat_history : undefined;
      },
      10000,
      'a history sample'
    );
    expect(history[0]).toMatchObject({ resources: { cpu_percent: 12 } });

    // One sample per HEARTBEAT_HISTORY_INTERVAL_S (1 s here), the newest HEARTBEAT_HISTORY_SIZE (3) kept, oldest first.
    // (Beating on until the history has two samples: on a slow machine the samples are written later.)
    const from = Date.now();
    let cpu = 1;
    const bounded = await eventually(
      async () => {
        expect((await heartbeat(svc.urls.main, node, { resources: { cpu_percent: cpu++ } })).status).toBe(200);
        await new Promise((r) => setTimeout(r, 250));
        if (Date.now() - from < 4500) return undefined;
        const h = (await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`)).body.node.heartbeat_history as {
          at: string;
          resources: { cpu_percent: number };
        }[];
        return h.length >= 2 ? h : undefined;
      },
      30000,
      'two history samples'
    );
    expect(bounded.length).toBeLessThanOrEqual(3);
    const times = bounded.map((h) => Date.parse(h.at));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(bounded[0]!.resources.cpu_percent).toBeGreaterThan(1);
  });
});

describe('review and lifecycle', () => {
  it('lists pending nodes for reviewers only, approves (online), and refuses a second approval', async () => {
    const node = await registerNode(svc.urls.main, 'review-me');
    expect((await http('GET', `${svc.urls.main}/a2a/review/queue`)).status).toBe(401);
    expect(
      (await http('GET', `${svc.urls.main}/a2a/review/queue`, { headers: { 'x-zr-token': 'forged' } })).status
    ).toBe(401);
    const queue = await http('GET', `${svc.urls.main}/a2a/review/queue?limit=200`, { headers: asReviewer() });
    expect(queue.body.nodes.map((n: { node_id: string }) => n.node_id)).toContain(node.node_id);
    expect(queue.text).not.toContain('api_key');

    expect((await heartbeat(svc.urls.main, node)).status).toBe(200);
    const approved = await approve(node.node_id, 'verified operator');
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({
      ok: true,
      state: 'online',
      node: { review: { decision: 'approved', reason: 'verified operator' } }
    });
    expect(await nodeState(node.node_id)).toBe('online');
    expect(await stateChanges(node.node_id)).toEqual(['null->pending_review', 'pending_review->online']);
    const again = await approve(node.node_id);
    expect(again.status).toBe(409);
    expect((await approve('ext-custom-999999')).status).toBe(404);
    expect(
      (
        await http('POST', `${svc.urls.main}/a2a/review/approve`, {
          headers: asReviewer(),
          body: { node_id: node.node_id }
        })
      ).status
    ).toBe(400);

    // The window is 3 s here: on a slow machine the node may rightly have gone offline meanwhile; a heartbeat
    // brings it back, and the workflow's search attributes follow its state.
    await heartbeat(svc.urls.main, node);
    const described = await eventually(
      async () => {
        const d = await svc.temporal.workflow.getHandle(`node/${node.node_id}`).describe();
        return (d.searchAttributes.NodeState as string[] | undefined)?.[0] === 'online' ? d : undefined;
      },
      15000,
      'NodeState online'
    );
    expect(described.searchAttributes).toMatchObject({
      NodeId: [node.node_id],
      Brand: ['custom'],
      NodeState: ['online']
    });
  });

  it('rejects a node: its key stops working and the decision is recorded with reviewer and reason', async () => {
    const node = await registerNode(svc.urls.main, 'reject-me');
    const rejected = await http('POST', `${svc.urls.main}/a2a/review/reject`, {
      headers: asReviewer(),
      body: { node_id: node.node_id, reason: 'spam' }
    });
    expect(rejected.status).toBe(200);
    expect(rejected.body.state).toBe('rejected');
    const doc = await svc.db.collection('nodes').findOne({ _id: node.node_id as never });
    expect(doc!.review).toMatchObject({ decision: 'rejected', reason: 'spam' });
    expect(doc!.review.reviewer).toMatch(/./);
    await eventually(
      async () => ((await heartbeat(svc.urls.main, node)).status === 403 ? true : undefined),
      5000,
      'heartbeat refused'
    );
    expect((await approve(node.node_id)).status).toBe(409);
  });

  it('goes offline after NODE_OFFLINE_AFTER_S without heartbeat and back online on the next one', async () => {
    const node = await registerNode(svc.urls.main, 'flaky');
    await heartbeat(svc.urls.main, node);
    await approve(node.node_id);
    // (An approval slower than the window, on a loaded machine, rightly finds the node offline: it beats once more.)
    await heartbeat(svc.urls.main, node);
    const lastBeat = Date.now();
    await eventually(async () => ((await nodeState(node.node_id)) === 'online' ? true : undefined), 10000, 'online');
    await eventually(async () => ((await nodeState(node.node_id)) === 'offline' ? true : undefined), 15000, 'offline');
    const silentFor = Date.now() - lastBeat;
    expect(silentFor).toBeGreaterThanOrEqual(OFFLINE_AFTER_S * 1000);
    // The dashboard counts from the node index, which follows the node change log within about a second.
    await eventually(
      async () => ((await http('GET', `${svc.urls.main}/a2a/dashboard`)).body.by_state.offline >= 1 ? true : undefined),
      5000,
      'the dashboard counts it offline'
    );

    const back = await eventually(
      async () => {
        const res = await heartbeat(svc.urls.main, node);
        return res.body.state === 'online' ? res : undefined;
      },
      5000,
      'heartbeat answer online'
    );
    expect(back.status).toBe(200);
    await eventually(
      async () => ((await nodeState(node.node_id)) === 'online' ? true : undefined),
      10000,
      'online again'
    );
    // The sweeper records a transition in the node document first and its ledger event right after (group-committed).
    const changes = await eventually(
      async () => {
        const all = await stateChanges(node.node_id);
        return all.at(-1) === 'offline->online' ? all : undefined;
      },
      10000,
      'the ledger event of coming back online'
    );
    expect(changes[0]).toBe('null->pending_review');
    expect(changes.slice(-2)).toEqual(['online->offline', 'offline->online']);
  });

  it('stays online while heartbeating, with no workflow history per heartbeat', async () => {
    const node = await registerNode(svc.urls.main, 'steady');
    await heartbeat(svc.urls.main, node);
    await approve(node.node_id);
    const handle = svc.temporal.workflow.getHandle(`node/${node.node_id}`);
    const beatFor = async (ms: number) => {
      for (const until = Date.now() + ms; Date.now() < until;) {
        expect((await heartbeat(svc.urls.main, node)).status).toBe(200);
        await new Promise((r) => setTimeout(r, 700));
      }
    };
    // Once what the approval started has reached the workflow (on a loaded machine a mirror signal can come late):
    let before = (await handle.describe()).historyLength;
    await eventually(
      async () => {
        await beatFor(1500);
        const now = (await handle.describe()).historyLength;
        if (now === before) return true;
        before = now;
        return undefined;
      },
      30000,
      'the workflow history to settle after the approval'
    );
    // Three offline windows of steady heartbeats: the presence sweeper never reports the node, so its workflow
    // does nothing (no timer per deadline, no event per heartbeat). Continue-as-new is covered by the workflow test.
    await beatFor(3 * OFFLINE_AFTER_S * 1000);
    expect((await handle.describe()).historyLength).toBe(before);
    expect((await handle.query(nodeStatusQuery)).state).toBe('online');
    expect(await stateChanges(node.node_id)).toEqual(['null->pending_review', 'pending_review->online']);
    // The directory agrees with the workflow (heartbeat bookkeeping never overwrites a recorded state change).
    expect(await nodeState(node.node_id)).toBe('online');
  }, 60_000);

  it('goes offline across a worker restart (the presence sweep resumes on the restarted worker)', async () => {
    const node = await registerNode(svc.urls.main, 'timer-node');
    await heartbeat(svc.urls.main, node);
    await approve(node.node_id);
    // The node beats through the worker's stop and restart, then falls silent: only the restarted worker's sweep
    // can make it offline.
    let beating = true;
    const loop = (async () => {
      while (beating) {
        expect((await heartbeat(svc.urls.main, node)).status).toBe(200);
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    try {
      await svc.stopWorker();
      try {
        await new Promise((r) => setTimeout(r, (OFFLINE_AFTER_S + 2) * 1000));
      } finally {
        await svc.startWorker();
      }
      expect(await nodeState(node.node_id)).toBe('online');
    } finally {
      beating = false;
      await loop;
    }
    await eventually(
      async () => ((await nodeState(node.node_id)) === 'offline' ? true : undefined),
      30000,
      'offline after the worker came back'
    );
  });
});

describe('dashboard, peers, tasks', () => {
  it('dashboard shows online rate, states, brands, resources and recent heartbeats', async () => {
    const res = await http('GET', `${svc.urls.main}/a2a/dashboard`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true });
    expect(res.body.nodes_total).toBeGreaterThan(40);
    expect(res.body.by_brand.openai).toBeGreaterThan(0);
    expect(res.body.resources.declared_memory_gb_total).toBe(16 * 40); // declared by the burst's nodes (none rejected)
    expect(res.body.heartbeats_last_minute).toBeGreaterThan(0);
    expect(res.body.online_rate).toBeGreaterThanOrEqual(0);
    expect(res.body.online_rate).toBeLessThanOrEqual(1);
  });

  it('peers: an administrator adds peers; the hub probes their agent card', async () => {
    const admin = { authorization: `Bearer ${svc.adminToken}` };
    expect(
      (
        await http('POST', `${svc.urls.main}/admin/peers`, {
          body: { name: 'x', agent_card_url: 'http://127.0.0.1:1/' }
        })
      ).status
    ).toBe(401);
    const ok = await http('POST', `${svc.urls.main}/admin/peers`, {
      headers: admin,
      body: { name: 'Sister Hub', agent_card_url: `${svc.urls.main}/a2a/.well-known/agent.json` }
    });
    expect(ok.status).toBe(201);
    expect(ok.body.peer).toMatchObject({ peer_id: 'sister-hub', last_status: 'reachable' });
    const down = await http('POST', `${svc.urls.main}/admin/peers`, {
      headers: admin,
      body: { name: 'Gone Hub', agent_card_url: 'http://127.0.0.1:1/card.json' }
    });
    expect(down.body.peer).toMatchObject({ last_status: 'unreachable', last_contact_at: null });
    const list = await http('GET', `${svc.urls.main}/a2a/peers`);
    expect(list.body.peers.map((p: { peer_id: string }) => p.peer_id)).toEqual(['gone-hub', 'sister-hub']);
    expect(list.body.peers[1].last_contact_at).toEqual(expect.any(String));
  });

  it('tasks: submitted on the hub listener, queued durably, counted in queue stats; idempotent retries', async () => {
    const body = { type: 'inference.chat', payload: { prompt: 'hi', 'a.b': [[1]] }, required_capabilities: ['chat'] };
    expect((await http('POST', `${svc.urls.hub}/a2a/task`, { body })).status).toBe(401);
    expect((await http('POST', `${svc.urls.main}/a2a/task`, { headers: asReviewer(), body })).status).toBe(404);
    expect(
      (await http('POST', `${svc.urls.hub}/a2a/task`, { headers: asReviewer(), body: { type: 'Bad Type' } })).status
    ).toBe(400);
    const before = (await http('GET', `${svc.urls.main}/a2a/queue/stats`)).body;
    const first = await http('POST', `${svc.urls.hub}/a2a/task`, {
      headers: { ...asReviewer(), 'idempotency-key': 'job-1' },
      body
    });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      ok: true,
      state: 'queued',
      duplicate: false,
      task: { type: 'inference.chat', payload: body.payload, required_capabilities: ['chat'], claimed_by: null }
    });
    const retry = await http('POST', `${svc.urls.hub}/a2a/task`, {
      headers: { ...asReviewer(), 'idempotency-key': 'job-1' },
      body
    });
    expect(retry.body).toMatchObject({ task_id: first.body.task_id, duplicate: true });
    const after = (await http('GET', `${svc.urls.main}/a2a/queue/stats`)).body;
    expect(after.depth).toBe(before.depth + 1);
    expect(after).toMatchObject({ in_flight: 0, done: 0, failed: 0 });
    const fetched = await http('GET', `${svc.urls.hub}/a2a/task/${first.body.task_id}`, { headers: asReviewer() });
    expect(fetched.body.task.payload).toEqual(body.payload);
  });

  it('counts the federation routes in the endpoint summary and lists them as agent-card skills', async () => {
    const summary = await http('GET', `${svc.urls.main}/a2a/endpoints/summary`);
    expect(summary.body.endpoint_groups.a2a_standard.count).toBe(8);
    expect(summary.body.endpoint_groups.directory_tree_collab.count).toBe(4);
    expect(summary.body.endpoint_groups.review_admin.count).toBe(3);
    const card = await http('GET', `${svc.urls.main}/a2a/.well-known/agent.json`);
    expect(card.body.skills.map((s: { id: string }) => s.id)).toEqual(
      expect.arrayContaining(['a2a_standard', 'directory_tree_collab', 'review_admin'])
    );
  });
});
