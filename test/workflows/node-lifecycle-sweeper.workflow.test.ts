/**
 * The presence sweeper (node-sweeper/<group>) with node/<id> workflows, on @temporalio/testing with the real
 * activities on FerretDB: the sweeper decides and records every online ⇄ offline transition of approved nodes
 * (node document, node_changes record, ledger event) from its read of presence, and the node workflows only
 * mirror them (query state). A beating node is never made offline, silent ones are, a silent node that beats again
 * comes back, and a rejection written by the workflow wins over the sweeper (no transition of a rejected node).
 * With RECORD_HISTORIES=1 it saves the sweeper's history and a mirrored node's for the replay test.
 */
import { Db } from 'mongodb';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { NODE_CHANGES_KEEP_MS } from '../../store/federation/node-changes-ring';
import { NodeStore } from '../../store/federation/nodes';
import { PresenceStore, presenceShardOf } from '../../store/federation/presence';
import { nodeLifecycleWorkflow } from '../../workflows/federation/node-lifecycle';
import { NodeLifecycleInput, nodeStatusQuery, reviewUpdate } from '../../contracts/federation/node-lifecycle.contract';
import { nodeSweeperWorkflow } from '../../workflows/federation/node-lifecycle-sweeper';
import { nodeDocument } from '../support/node-document';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

let wf: WorkflowTestEnv;
let env: TestWorkflowEnvironment;
let db: Db;

beforeAll(async () => {
  wf = await startWorkflowTestEnv('node-sweeper-wf-test');
  ({ env, db } = wf);
});
afterAll(async () => {
  await wf?.close();
});

const waitFor = async (check: () => Promise<boolean>, ms = 20000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('timed out');
};

const OFFLINE_AFTER_S = 2;
const input = (id: string, offlineAfterS = OFFLINE_AFTER_S): NodeLifecycleInput => ({
  version: 1,
  node_id: id,
  brand: 'custom',
  registered_at: new Date().toISOString(),
  offline_after_s: offlineAfterS,
  review_required: false,
  offline_recheck_ms: 60_000,
  history_limit: 2000,
  hub_did: 'did:zhongshu:hub'
});

const beat = (presence: PresenceStore, ids: string[], at = Date.now()) =>
  presence.write(
    `test-api-${at}`,
    ids.map((node_id) => ({
      node_id,
      seen_at: at,
      sample: { at: new Date(at).toISOString(), resources: {}, performance: {} }
    })),
    []
  );

it('the sweeper records online and offline from presence, the workflows mirror it; beating nodes stay online; a rejection wins', async () => {
  // A window of 6 s, not 2: the beating node's heartbeats (every 300 ms) must not fall 2 s behind on a machine that
  // runs other stacks beside this one, where one presence write has taken longer than that.
  const WINDOW_S = 6;
  const presence = new PresenceStore(db);
  const ids = ['ext-custom-800001', 'ext-custom-800002', 'ext-custom-800003'];
  await db.collection('nodes').insertMany(ids.map((id, i) => nodeDocument(id, 800001 + i, 'offline')) as never[]);
  const nodes = await Promise.all(
    ids.map((id) =>
      env.client.workflow.start(nodeLifecycleWorkflow, {
        workflowId: `node/${id}`,
        taskQueue: wf.taskQueue,
        args: [input(id, WINDOW_S)]
      })
    )
  );
  const docState = async (id: string) => (await db.collection('nodes').findOne({ _id: id as never }))?.state;
  // Each workflow's registration transition is in the ledger before the nodes beat (the order the test expects).
  await waitFor(
    async () => (await db.collection('ledger').countDocuments({ key: 'hub.node.state_changed' })) >= ids.length
  );

  const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
    workflowId: 'node-sweeper/0',
    taskQueue: wf.taskQueue,
    args: [
      {
        version: 1,
        group: 0,
        groups: 1,
        offline_after_s: WINDOW_S,
        tick_ms: 200,
        run_ms: 60_000,
        hub_did: 'did:zhongshu:hub'
      }
    ]
  });
  await beat(presence, ids);
  for (const [i, n] of nodes.entries()) {
    await waitFor(async () => (await docState(ids[i]!)) === 'online');
    await waitFor(async () => (await n.query(nodeStatusQuery)).state === 'online');
  }

  // Node 0 keeps beating, nodes 1 and 2 fall silent.
  const lastBeat = Date.now();
  await beat(presence, ids.slice(1), lastBeat);
  const silentFrom = Date.now();
  let beating = true;
  const beatingIds = [ids[0]!];
  const keepBeating = (async () => {
    while (beating) {
      await beat(presence, beatingIds);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  for (const [i, n] of nodes.entries()) {
    if (i === 0) continue;
    await waitFor(async () => (await docState(ids[i]!)) === 'offline');
    await waitFor(async () => (await n.query(nodeStatusQuery)).state === 'offline');
  }
  expect(Date.now() - silentFrom).toBeGreaterThan(WINDOW_S * 1000);
  expect(await docState(ids[0]!)).toBe('online');
  expect((await nodes[0]!.query(nodeStatusQuery)).state).toBe('online');

  // Node 1 beats again (and keeps beating): the sweeper brings it back (no API process signals anything).
  beatingIds.push(ids[1]!);
  await waitFor(async () => (await docState(ids[1]!)) === 'online');
  await waitFor(async () => (await nodes[1]!.query(nodeStatusQuery)).state === 'online');

  // Node 2 is rejected while offline; its heartbeats then change nothing.
  await nodes[2]!.executeUpdate(reviewUpdate, { args: [{ decision: 'reject', reviewer: 'carol', reason: 'gone' }] });
  await beat(presence, [ids[2]!]);
  await new Promise((r) => setTimeout(r, 1500));
  expect(await docState(ids[2]!)).toBe('rejected');

  beating = false;
  await keepBeating;
  const changes = (
    await db.collection('ledger').find({ key: 'hub.node.state_changed' }).sort({ _id: 1 }).toArray()
  ).map((e) => JSON.parse(e.value_json as string));
  const of = (id: string) => changes.filter((c) => c.node_id === id).map((c) => `${c.from}->${c.to}`);
  expect(of(ids[0]!)).toEqual(['null->offline', 'offline->online']);
  expect(of(ids[1]!)).toEqual(['null->offline', 'offline->online', 'online->offline', 'offline->online']);
  expect(of(ids[2]!)).toEqual(['null->offline', 'offline->online', 'online->offline', 'offline->rejected']);
  // Liveness events carry the node's liveness_seq (1, 2, 3: the idempotency of a retried sweep).
  expect(changes.filter((c) => c.node_id === ids[1]).map((c) => c.liveness_seq ?? null)).toEqual([null, 1, 2, 3]);
  // Each silent node went offline no sooner than its window after its last heartbeat.
  for (const c of changes.filter((c) => c.to === 'offline' && c.from === 'online'))
    expect(Date.parse(c.at) - lastBeat).toBeGreaterThanOrEqual(WINDOW_S * 1000);
  // Node documents and the node_changes log (the API caches follow it) agree.
  const doc1 = await db.collection('nodes').findOne({ _id: ids[1] as never });
  expect(doc1).toMatchObject({ state: 'online', liveness_seq: 3 });
  const log = await new NodeStore(db).changesSince(new Date(Date.now() - NODE_CHANGES_KEEP_MS));
  expect(log.filter((r) => r.node_id === ids[1] && r.liveness_seq !== undefined)).toHaveLength(3);

  await sweeper.terminate('test done');
  await wf.saveHistory(sweeper.workflowId, 'node-sweeper-liveness');
  await wf.saveHistory(nodes[1]!.workflowId, 'node-lifecycle-liveness-mirrored');
}, 90_000);

it('adopts a beating node whose change record it never read (a registration record lost under overload)', async () => {
  const presence = new PresenceStore(db);
  const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
    workflowId: 'node-sweeper/adopt',
    taskQueue: wf.taskQueue,
    args: [
      {
        version: 1,
        group: 0,
        groups: 1,
        offline_after_s: OFFLINE_AFTER_S,
        tick_ms: 200,
        run_ms: 60_000,
        hub_did: 'did:zhongshu:hub'
      }
    ]
  });
  // Registered after the sweeper read every node, with no change record: only presence tells the sweeper about it.
  // A node with no document (removed) beating beside it changes nothing.
  await new Promise((r) => setTimeout(r, 1000));
  const id = 'ext-custom-800010';
  await db.collection('nodes').insertOne(nodeDocument(id, 800010, 'offline') as never);
  const keep = { on: true };
  const beating = (async () => {
    while (keep.on) {
      await beat(presence, [id, 'ext-custom-800011']);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  try {
    await waitFor(async () => (await db.collection('nodes').findOne({ _id: id as never }))?.state === 'online');
    expect(await db.collection('nodes').findOne({ _id: 'ext-custom-800011' as never })).toBeNull();
  } finally {
    keep.on = false;
    await beating;
    await sweeper.terminate('test done');
  }
}, 60_000);

it('adopts a beating node in a group whose view holds no approved node (it still reads presence now and then)', async () => {
  const presence = new PresenceStore(db);
  // The previous test's sweeper (every shard) was terminated; its activity stops at its next heartbeat (within
  // about 5 s), and until then it would adopt this node itself.
  await new Promise((r) => setTimeout(r, 7000));
  // A group of one shard (16 groups) that none of the nodes already in the database falls in.
  const taken = new Set((await db.collection('nodes').find({}).toArray()).map((d) => presenceShardOf(String(d._id))));
  const id = Array.from({ length: 200 }, (_, i) => `ext-custom-${800100 + i}`).find(
    (c) => !taken.has(presenceShardOf(c))
  )!;
  const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
    workflowId: 'node-sweeper/adopt-empty',
    taskQueue: wf.taskQueue,
    args: [
      {
        version: 1,
        group: presenceShardOf(id),
        groups: 16,
        offline_after_s: OFFLINE_AFTER_S,
        tick_ms: 200,
        run_ms: 60_000,
        hub_did: 'did:zhongshu:hub'
      }
    ]
  });
  await new Promise((r) => setTimeout(r, 1000));
  await db.collection('nodes').insertOne(nodeDocument(id, Number(id.slice(-6)), 'offline') as never);
  const keep = { on: true };
  const beating = (async () => {
    while (keep.on) {
      await beat(presence, [id]);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  try {
    await waitFor(async () => (await db.collection('nodes').findOne({ _id: id as never }))?.state === 'online', 30_000);
  } finally {
    keep.on = false;
    await beating;
    await sweeper.terminate('test done');
  }
}, 60_000);

it('judges no node silent on presence an API process has not stored yet (its presence clock lags)', async () => {
  const presence = new PresenceStore(db);
  const id = 'ext-custom-800020';
  await db.collection('nodes').insertOne(nodeDocument(id, 800020, 'offline') as never);
  const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
    workflowId: 'node-sweeper/clock',
    taskQueue: wf.taskQueue,
    args: [
      {
        version: 1,
        group: 0,
        groups: 1,
        offline_after_s: OFFLINE_AFTER_S,
        tick_ms: 200,
        run_ms: 60_000,
        hub_did: 'did:zhongshu:hub'
      }
    ]
  });
  const docState = async () => (await db.collection('nodes').findOne({ _id: id as never }))?.state;
  const clocks = db.collection('node_presence_clocks');
  try {
    await beat(presence, [id]);
    await waitFor(async () => (await docState()) === 'online');
    // The node stops beating; an API process (alive: its clock is rewritten) has stored its heartbeats only up to
    // now, e.g. its database writes fell behind: the node must not go offline on what may be missing.
    const through = Date.now();
    const writing = { on: true };
    const clockWriter = (async () => {
      while (writing.on) {
        await clocks.replaceOne(
          { _id: 'api-lagging' as never },
          { complete_through: through, written_at: Date.now() },
          { upsert: true }
        );
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    await new Promise((r) => setTimeout(r, OFFLINE_AFTER_S * 1000 + 2000));
    expect(await docState()).toBe('online');
    // The process catches up (or stops and removes its clock): the silence is judged.
    writing.on = false;
    await clockWriter;
    await clocks.deleteOne({ _id: 'api-lagging' as never });
    const caughtUp = Date.now();
    await waitFor(async () => (await docState()) === 'offline');
    expect(Date.now() - caughtUp).toBeLessThan(3000);
  } finally {
    await clocks.deleteMany({});
    await sweeper.terminate('test done');
  }
}, 60_000);

it('never judges a node without reading presence: a beating node the change log brings into a group with no approved node stays online', async () => {
  const presence = new PresenceStore(db);
  // The previous test's sweeper (every shard) stops within about 5 s of its termination.
  await new Promise((r) => setTimeout(r, 7000));
  const taken = new Set((await db.collection('nodes').find({}).toArray()).map((d) => presenceShardOf(String(d._id))));
  const id = Array.from({ length: 200 }, (_, i) => `ext-custom-${800300 + i}`).find(
    (c) => !taken.has(presenceShardOf(c))
  )!;
  // Registered two minutes ago, waiting for review since.
  const registeredAt = new Date(Date.now() - 120_000).toISOString();
  await db.collection('nodes').insertOne({
    ...nodeDocument(id, Number(id.slice(-6)), 'pending_review'),
    created_at: registeredAt,
    state_changed_at: registeredAt
  } as never);
  const keep = { on: true };
  const beating = (async () => {
    while (keep.on) {
      await beat(presence, [id]);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  // The group's sweep reads presence at its first tick, then (no approved node) only every 10 s.
  const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
    workflowId: 'node-sweeper/approved-late',
    taskQueue: wf.taskQueue,
    args: [
      {
        version: 1,
        group: presenceShardOf(id),
        groups: 16,
        offline_after_s: OFFLINE_AFTER_S,
        tick_ms: 200,
        run_ms: 60_000,
        hub_did: 'did:zhongshu:hub'
      }
    ]
  });
  try {
    await new Promise((r) => setTimeout(r, 1500));
    // An approval recorded late (a retried activity: its time is the workflow's, a minute ago) reaches the sweep
    // through the change log between two presence reads; the node has been beating all along.
    const approvedAt = new Date(Date.now() - 60_000).toISOString();
    await new NodeStore(db).setState(id, 'online', approvedAt, {
      decision: 'approved',
      reviewer: 'admin',
      reason: 'test',
      at: approvedAt
    });
    await new Promise((r) => setTimeout(r, 3000));
    const doc = await db.collection('nodes').findOne({ _id: id as never });
    expect(doc).toMatchObject({ state: 'online' });
    // No transition was ever written (liveness_seq counts them).
    expect(doc!.liveness_seq ?? 0).toBe(0);
  } finally {
    keep.on = false;
    await beating;
    await sweeper.terminate('test done');
  }
}, 60_000);

it('judges each shard by what that shard holds: a process whose clock waits for another shard holds back only the shards its documents do not vouch for', async () => {
  const presence = new PresenceStore(db);
  // Two nodes in different shards.
  const first = 'ext-custom-800400';
  const second = Array.from({ length: 100 }, (_, i) => `ext-custom-${800401 + i}`).find(
    (c) => presenceShardOf(c) !== presenceShardOf(first)
  )!;
  await db
    .collection('nodes')
    .insertMany([first, second].map((id) => nodeDocument(id, Number(id.slice(-6)), 'offline')) as never[]);
  const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
    workflowId: 'node-sweeper/shard-clock',
    taskQueue: wf.taskQueue,
    args: [
      {
        version: 1,
        group: 0,
        groups: 1,
        offline_after_s: OFFLINE_AFTER_S,
        tick_ms: 200,
        run_ms: 60_000,
        hub_did: 'did:zhongshu:hub'
      }
    ]
  });
  const docState = async (id: string) => (await db.collection('nodes').findOne({ _id: id as never }))?.state;
  const clocks = db.collection('node_presence_clocks');
  const shardDoc = db.collection(`node_presence_${String(presenceShardOf(first)).padStart(2, '0')}`);
  const writing = { on: true };
  let clockWriter: Promise<void> = Promise.resolve();
  try {
    await beat(presence, [first, second]);
    await waitFor(async () => (await docState(first)) === 'online' && (await docState(second)) === 'online');
    // Both fall silent. A live API process has stored every heartbeat it received only up to now by its clock (a
    // slow write of some shard), but its document of the first node's shard keeps saying that shard is complete.
    const lastBeat = Date.now();
    await beat(presence, [first, second], lastBeat);
    const through = Date.now();
    clockWriter = (async () => {
      while (writing.on) {
        const now = Date.now();
        await clocks.replaceOne(
          { _id: 'api-partial' as never },
          { complete_through: through, written_at: now },
          { upsert: true }
        );
        await shardDoc.replaceOne(
          { _id: 'api-partial' as never },
          { updated_at: new Date(now), seen_json: '{}', per_second_json: '[]', complete_through: now },
          { upsert: true }
        );
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await waitFor(async () => (await docState(first)) === 'offline', 15_000);
    expect(Date.now() - lastBeat).toBeLessThan(OFFLINE_AFTER_S * 1000 + 3000);
    // The second node's shard has no such document: the lagging clock holds its judgement back.
    await new Promise((r) => setTimeout(r, 1500));
    expect(await docState(second)).toBe('online');
    writing.on = false;
    await clockWriter;
    await clocks.deleteOne({ _id: 'api-partial' as never });
    await waitFor(async () => (await docState(second)) === 'offline');
  } finally {
    writing.on = false;
    await clockWriter;
    await clocks.deleteMany({});
    await shardDoc.deleteOne({ _id: 'api-partial' as never });
    await sweeper.terminate('test done');
  }
}, 60_000);
