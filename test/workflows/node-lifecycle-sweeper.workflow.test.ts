/**
 * The presence sweeper (node-sweeper/<group>) with node/<id> workflows, on @temporalio/testing with the real
 * activities on FerretDB: a silent node is reported and goes offline, a beating one is never reported, a stale
 * report (the node beat after the sweeper's read) changes nothing, and a reported node that beats again is woken.
 * With RECORD_HISTORIES=1 it saves the sweeper's history and the node's for the replay test.
 */
import { Db } from 'mongodb';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { PresenceStore } from '../../store/federation/presence';
import { nodeLifecycleWorkflow } from '../../workflows/federation/node-lifecycle';
import { heartbeatSignal, NodeLifecycleInput, nodeStatusQuery, presenceLapsedSignal } from '../../workflows/federation/node-lifecycle.contract';
import { nodeSweeperWorkflow } from '../../workflows/federation/node-lifecycle-sweeper';
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
const input = (id: string): NodeLifecycleInput => ({
  version: 1,
  node_id: id,
  brand: 'custom',
  registered_at: new Date().toISOString(),
  offline_after_s: OFFLINE_AFTER_S,
  review_required: false,
  offline_recheck_ms: 60_000,
  history_limit: 2000,
  hub_did: 'did:zhongshu:hub'
});

const beat = (presence: PresenceStore, ids: string[], at = Date.now()) =>
  presence.write(`test-api-${at}`, ids.map((node_id) => ({ node_id, seen_at: at, sample: { at: new Date(at).toISOString(), resources: {}, performance: {} } })), []);

it('reports silent nodes once, never beating ones; the node workflow decides from its own read; a reported node that beats again is woken', async () => {
  const presence = new PresenceStore(db);
  const ids = ['ext-custom-800001', 'ext-custom-800002', 'ext-custom-800003'];
  const nodes = await Promise.all(ids.map((id) => env.client.workflow.start(nodeLifecycleWorkflow, { workflowId: `node/${id}`, taskQueue: wf.taskQueue, args: [input(id)] })));
  const lastBeat = Date.now();
  await beat(presence, ids, lastBeat);
  for (const [i, n] of nodes.entries()) await n.signal(heartbeatSignal, { seen_at_ms: Date.now() - i });
  for (const n of nodes) await waitFor(async () => (await n.query(nodeStatusQuery)).state === 'online');

  const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
    workflowId: 'node-sweeper/0',
    taskQueue: wf.taskQueue,
    args: [{ version: 1, group: 0, groups: 1, offline_after_s: OFFLINE_AFTER_S, tick_ms: 200, run_ms: 60_000 }]
  });

  // Node 0 keeps beating, node 1 and 2 fall silent. A stale report for node 0 (a read before its last beat) is
  // refused by its workflow: it re-reads presence itself.
  const silentFrom = Date.now();
  const keepBeating = (async () => {
    while (Date.now() - silentFrom < 7000) {
      await beat(presence, [ids[0]!]);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  await nodes[0]!.signal(presenceLapsedSignal, { seen_at_ms: silentFrom - 10_000, swept_at_ms: silentFrom - 9_000 });
  for (const n of nodes.slice(1)) await waitFor(async () => (await n.query(nodeStatusQuery)).state === 'offline');
  await keepBeating;
  expect((await nodes[0]!.query(nodeStatusQuery)).state).toBe('online');
  expect((await nodes[0]!.query(nodeStatusQuery)).transitions).toBe(2);

  // Node 1 beats again; no API process signals it (as when its cache still said online): the sweeper wakes it.
  await beat(presence, [ids[1]!]);
  await waitFor(async () => (await nodes[1]!.query(nodeStatusQuery)).state === 'online');

  const changes = (await db.collection('ledger').find({ key: 'hub.node.state_changed' }).sort({ _id: 1 }).toArray()).map((e) => JSON.parse(e.value_json as string));
  const of = (id: string) => changes.filter((c) => c.node_id === id).map((c) => `${c.from}->${c.to}`);
  expect(of(ids[0]!)).toEqual(['null->offline', 'offline->online']);
  expect(of(ids[1]!)).toEqual(['null->offline', 'offline->online', 'online->offline', 'offline->online']);
  expect(of(ids[2]!)).toEqual(['null->offline', 'offline->online', 'online->offline']);
  // Each silent node went offline no sooner than its window after its last heartbeat.
  for (const c of changes.filter((c) => c.to === 'offline' && c.from === 'online')) expect(Date.parse(c.at) - lastBeat).toBeGreaterThanOrEqual(OFFLINE_AFTER_S * 1000);

  await sweeper.terminate('test done');
  await wf.saveHistory(sweeper.workflowId, 'node-sweeper');
  await wf.saveHistory(nodes[1]!.workflowId, 'node-lifecycle-swept');
}, 60_000);
