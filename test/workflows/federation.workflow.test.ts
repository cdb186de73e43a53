/**
 * nodeLifecycleWorkflow and treeProposalWorkflow on their own, with @temporalio/testing on the dev server binary
 * and the real activities on FerretDB. With RECORD_HISTORIES=1 they save the histories the replay test replays.
 */
import { Db } from 'mongodb';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { PresenceStore } from '../../store/federation/presence';
import { DirectoryTreeStore } from '../../store/federation/directory-tree';
import { canonicalJson } from '../../core/ledger/canonical-json';
import { nodeLifecycleWorkflow } from '../../workflows/federation/node-lifecycle';
import {
  livenessChangedSignal,
  NodeLifecycleInput,
  nodeStatusQuery,
  reviewUpdate
} from '../../contracts/federation/node-lifecycle.contract';
import { treeProposalWorkflow } from '../../workflows/federation/tree-proposal';
import { decideUpdate, TreeProposalInput } from '../../contracts/federation/tree-proposal.contract';
import { nodeDocument } from '../support/node-document';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';
import { nodeSweeperWorkflow } from '../../workflows/federation/node-lifecycle-sweeper';

let wf: WorkflowTestEnv;
let env: TestWorkflowEnvironment;
let db: Db;

beforeAll(async () => {
  wf = await startWorkflowTestEnv('federation-wf-test');
  ({ env, db } = wf);
});
afterAll(async () => {
  await wf?.close();
});

const waitFor = async (check: () => Promise<boolean>, ms = 15000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('timed out');
};

describe('nodeLifecycleWorkflow', () => {
  const input = (id: string): NodeLifecycleInput => ({
    version: 1,
    node_id: id,
    brand: 'custom',
    registered_at: new Date().toISOString(),
    offline_after_s: 2,
    review_required: true,
    offline_recheck_ms: 1000,
    history_limit: 2000,
    hub_did: 'did:zhongshu:hub'
  });

  it('approve without heartbeat → offline; heartbeat → online; silence → offline (the sweeper, mirrored); reject ends it', async () => {
    const id = 'ext-custom-900001';
    await db.collection('nodes').insertOne(nodeDocument(id, 900001, 'pending_review') as never);
    const handle = await env.client.workflow.start(nodeLifecycleWorkflow, {
      workflowId: `node/${id}`,
      taskQueue: wf.taskQueue,
      args: [input(id)]
    });
    expect((await handle.query(nodeStatusQuery)).state).toBe('pending_review');
    const approved = await handle.executeUpdate(reviewUpdate, {
      args: [{ decision: 'approve', reviewer: 'alice', reason: 'ok' }]
    });
    expect(approved).toMatchObject({ state: 'offline', review: { decision: 'approved', reviewer: 'alice' } });
    await expect(
      handle.executeUpdate(reviewUpdate, { args: [{ decision: 'approve', reviewer: 'bob', reason: 'again' }] })
    ).rejects.toBeInstanceOf(WorkflowUpdateFailedError);

    // The presence sweeper of every shard (one group here) decides and records online and offline; the workflow
    // mirrors them.
    const sweeper = await env.client.workflow.start(nodeSweeperWorkflow, {
      workflowId: 'node-sweeper/0',
      taskQueue: wf.taskQueue,
      args: [
        {
          version: 1,
          group: 0,
          groups: 1,
          offline_after_s: 2,
          tick_ms: 200,
          run_ms: 60_000,
          hub_did: 'did:zhongshu:hub'
        }
      ]
    });
    const seen = Date.now();
    await new PresenceStore(db).write(
      'test-api',
      [{ node_id: id, seen_at: seen, sample: { at: new Date(seen).toISOString(), resources: {}, performance: {} } }],
      []
    );
    await waitFor(async () => (await handle.query(nodeStatusQuery)).state === 'online');
    await waitFor(async () => (await handle.query(nodeStatusQuery)).state === 'offline', 10000);
    expect(Date.now() - seen).toBeGreaterThanOrEqual(2000);
    await sweeper.terminate('test done');

    const final = await handle.executeUpdate(reviewUpdate, {
      args: [{ decision: 'reject', reviewer: 'carol', reason: 'gone' }]
    });
    expect(final.state).toBe('rejected');
    // The workflow's own transitions (registration and the two reviews); liveness is the sweeper's.
    expect(await handle.result()).toMatchObject({ state: 'rejected', transitions: 3 });
    const changes = (
      await db.collection('ledger').find({ key: 'hub.node.state_changed' }).sort({ _id: 1 }).toArray()
    ).map((e) => JSON.parse(e.value_json as string));
    expect(changes.filter((c) => c.node_id === id).map((c) => `${c.from}->${c.to}`)).toEqual([
      'null->pending_review',
      'pending_review->offline',
      'offline->online',
      'online->offline',
      'offline->rejected'
    ]);
    await wf.saveHistory(handle.workflowId, 'node-lifecycle-full-liveness');
  });

  it('continues as new with its state once the history limit is reached', async () => {
    const id = 'ext-custom-900002';
    const handle = await env.client.workflow.start(nodeLifecycleWorkflow, {
      workflowId: `node/${id}`,
      taskQueue: wf.taskQueue,
      args: [{ ...input(id), history_limit: 20 }]
    });
    await handle.executeUpdate(reviewUpdate, { args: [{ decision: 'approve', reviewer: 'alice', reason: 'ok' }] });
    // Mirrored liveness transitions (as the sweeper sends them) grow the history past the limit.
    for (let i = 1; i <= 6; i++) {
      await handle.signal(livenessChangedSignal, {
        to: i % 2 ? 'online' : 'offline',
        at: new Date().toISOString(),
        seq: i,
        reason: 'test'
      });
      await new Promise((r) => setTimeout(r, 300));
    }
    await waitFor(async () => (await handle.query(nodeStatusQuery)).runs >= 1);
    const status = await handle.query(nodeStatusQuery);
    expect(status.review).toMatchObject({ decision: 'approved' });
    expect(status.state).toBe('offline');
    await handle.executeUpdate(reviewUpdate, { args: [{ decision: 'reject', reviewer: 'alice', reason: 'done' }] });
    await handle.result();
    await wf.saveHistory(handle.workflowId, 'node-lifecycle-continued-as-new-liveness', handle.firstExecutionRunId);
  });
});

describe('treeProposalWorkflow', () => {
  let tree: DirectoryTreeStore;
  beforeAll(async () => {
    tree = new DirectoryTreeStore(db);
    await tree.ensureInitialVersion();
  });

  const start = async (id: string, patch: unknown[]) => {
    const now = new Date().toISOString();
    await tree.insertProposal({
      _id: id,
      base_version: 1,
      title: id,
      rationale: 'r',
      patch_json: canonicalJson(patch as never),
      author: 'alice',
      author_model: 'homologous',
      state: 'open',
      created_at: now,
      decided_at: null,
      decided_by: null,
      reason: null,
      merged_version: null,
      superseded_by: null,
      supersedes: null
    });
    const input: TreeProposalInput = {
      version: 1,
      proposal_id: id,
      base_version: 1,
      title: id,
      author: 'alice',
      created_at: now,
      hub_did: 'did:zhongshu:hub',
      history_limit: 2000
    };
    return env.client.workflow.start(treeProposalWorkflow, {
      workflowId: `tree-proposal/${id}`,
      taskQueue: wf.taskQueue,
      args: [input]
    });
  };

  it('merges, refuses a conflicting merge (stays open), then is rejected', async () => {
    const a = await start('tp_000000000000000a', [{ op: 'add', path: '/federation/nodes/x', value: 1 }]);
    const b = await start('tp_000000000000000b', [{ op: 'add', path: '/federation/nodes/x', value: 2 }]);
    expect(
      await a.executeUpdate(decideUpdate, { args: [{ decision: 'merge', reviewer: 'bob', reason: 'ok' }] })
    ).toMatchObject({ state: 'merged', merged_version: 2 });
    await expect(
      b.executeUpdate(decideUpdate, { args: [{ decision: 'merge', reviewer: 'bob', reason: 'ok' }] })
    ).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
    expect(
      await b.executeUpdate(decideUpdate, { args: [{ decision: 'reject', reviewer: 'bob', reason: 'conflicts' }] })
    ).toMatchObject({ state: 'rejected', merge_attempts: 1 });
    expect(await a.result()).toMatchObject({ state: 'merged' });
    expect(await b.result()).toMatchObject({ state: 'rejected' });
    await wf.saveHistory(a.workflowId, 'tree-proposal-merged');
    await wf.saveHistory(b.workflowId, 'tree-proposal-conflict-rejected');
  });
});
