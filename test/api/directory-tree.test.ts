/**
 * Directory-tree collaboration over real HTTP with the real worker: propose (validation before storage, who may
 * propose), the review queue with diffs, merge into a new version, old versions readable, a conflicting merge
 * (409 with the conflicts, proposal stays open), reject and supersede, each a tree-proposal/<id> workflow.
 */
import { issueHomologousToken } from '../support/credentials';
import { heartbeat, nodeHeaders, registerNode } from '../support/federation';
import { http, startTestService, TestService } from '../support/service';

let svc: TestService;
let maintainer: string;
const asMaintainer = () => ({ 'x-zr-token': maintainer });
const propose = (body: unknown, headers: Record<string, string> = asMaintainer()) =>
  http('POST', `${svc.urls.main}/a2a/directory-tree/propose`, { headers, body });
const merge = (body: unknown) =>
  http('POST', `${svc.urls.main}/a2a/directory-tree/merge`, { headers: asMaintainer(), body });
const latest = async () => (await http('GET', `${svc.urls.main}/a2a/directory-tree/latest`)).body;
const openIds = async () =>
  (await http('GET', `${svc.urls.main}/a2a/directory-tree/review`)).body.proposals.map(
    (p: { proposal_id: string }) => p.proposal_id
  );

beforeAll(async () => {
  svc = await startTestService();
  maintainer = await issueHomologousToken(svc.urls.main, svc.adminToken, 'maintainer');
});
afterAll(async () => {
  await svc?.close();
});

describe('directory tree', () => {
  it('serves version 1 publicly', async () => {
    const v1 = await latest();
    expect(v1).toMatchObject({ ok: true, version: 1, latest_version: 1, tree: { federation: { nodes: {} } } });
  });

  it('rejects malformed proposals with 400 and patches that do not fit the tree with 409, storing nothing, and checks who proposes', async () => {
    const malformed = [
      { base_version: 1, title: 't', rationale: 'r', patch: [{ op: 'explode', path: '/x' }] },
      { base_version: 1, title: 't', rationale: 'r', patch: [{ op: 'add', path: 'no-slash', value: 1 }] },
      { base_version: 1, title: 't', rationale: 'r', patch: [] },
      { base_version: 1, patch: [{ op: 'add', path: '/x', value: 1 }] }
    ];
    for (const body of malformed) {
      const res = await propose(body);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_request');
    }
    // Well-formed, but at odds with the tree: the state conflicts, not the request.
    const unfit = [
      { base_version: 1, title: 't', rationale: 'r', patch: [{ op: 'test', path: '/federation/nodes', value: 5 }] },
      { base_version: 99, title: 't', rationale: 'r', patch: [{ op: 'add', path: '/x', value: 1 }] }
    ];
    for (const body of unfit) {
      const res = await propose(body);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({
        ok: false,
        error: 'conflict',
        base_version: body.base_version,
        latest_version: 1
      });
    }
    const missing = await propose({
      base_version: 1,
      title: 't',
      rationale: 'r',
      patch: [{ op: 'remove', path: '/federation/missing' }]
    });
    expect(missing.status).toBe(409);
    expect(missing.body).toMatchObject({
      error: 'conflict',
      base_version: 1,
      latest_version: 1,
      conflicts: [{ operation: 0, path: '/federation/missing' }]
    });
    expect(await svc.db.collection('tree_proposals').countDocuments()).toBe(0);

    const valid = {
      base_version: 1,
      title: 't',
      rationale: 'r',
      patch: [{ op: 'add', path: '/federation/x', value: 1 }]
    };
    expect((await propose(valid, {})).status).toBe(401);
    const pending = await registerNode(svc.urls.main, 'pending-proposer');
    const refused = await propose(valid, nodeHeaders(pending));
    expect(refused.status).toBe(403);
    expect(refused.body.message).toContain('pending_review');
    expect(await svc.db.collection('tree_proposals').countDocuments()).toBe(0);
  });

  it('proposes, shows the diff in the review queue, merges into version 2, keeps version 1 readable', async () => {
    const node = await registerNode(svc.urls.main, 'architect');
    await heartbeat(svc.urls.main, node);
    const approved = await http('POST', `${svc.urls.main}/a2a/review/approve`, {
      headers: asMaintainer(),
      body: { node_id: node.node_id, reason: 'ok' }
    });
    expect(approved.status).toBe(200);
    const created = await propose(
      {
        base_version: 1,
        title: 'Add the chat gateway',
        rationale: 'documents /v1',
        patch: [{ op: 'add', path: '/federation/gateways/chat', value: { base: '/v1', 'a.b': [[1, 2]] } }]
      },
      nodeHeaders(node)
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      ok: true,
      state: 'open',
      base_version: 1,
      workflow_id: `tree-proposal/${created.body.proposal_id}`
    });

    const queue = await http('GET', `${svc.urls.main}/a2a/directory-tree/review`);
    const item = queue.body.proposals.find((p: { proposal_id: string }) => p.proposal_id === created.body.proposal_id);
    expect(item).toMatchObject({
      title: 'Add the chat gateway',
      author: node.node_id,
      applies_to_latest: true,
      diff: { paths: ['/federation/gateways/chat'] }
    });
    expect(item.diff.operations[0].value).toEqual({ base: '/v1', 'a.b': [[1, 2]] });

    expect(
      (
        await http('POST', `${svc.urls.main}/a2a/directory-tree/merge`, {
          headers: nodeHeaders(node),
          body: { proposal_id: created.body.proposal_id }
        })
      ).status
    ).toBe(401);
    const merged = await merge({ proposal_id: created.body.proposal_id, reason: 'good' });
    expect(merged.status).toBe(200);
    expect(merged.body).toMatchObject({ ok: true, version: 2, proposal: { state: 'merged', merged_version: 2 } });
    expect((await latest()).tree.federation.gateways.chat).toEqual({ base: '/v1', 'a.b': [[1, 2]] });
    const v1 = await http('GET', `${svc.urls.main}/a2a/directory-tree/latest?version=1`);
    expect(v1.body).toMatchObject({ version: 1, latest_version: 2, tree: { federation: { gateways: {} } } });
    expect((await http('GET', `${svc.urls.main}/a2a/directory-tree/latest?version=9`)).status).toBe(404);
    expect((await merge({ proposal_id: created.body.proposal_id })).status).toBe(409);
    const record = await svc.db.collection('ledger').findOne({ key: 'hub.directory_tree.merged' });
    expect(JSON.parse(record!.value_json as string)).toMatchObject({
      proposal_id: created.body.proposal_id,
      merged_version: 2
    });
    const described = await svc.temporal.workflow.getHandle(`tree-proposal/${created.body.proposal_id}`).describe();
    expect(described.searchAttributes).toMatchObject({ ProposalState: ['merged'] });
  });

  it('answers 409 with the conflicts when the tree moved on under a proposal, which stays open', async () => {
    const base = (await latest()).version;
    const a = await propose({
      base_version: base,
      title: 'rename',
      rationale: 'r',
      patch: [{ op: 'replace', path: '/federation/gateways/chat/base', value: '/v2' }]
    });
    const b = await propose({
      base_version: base,
      title: 'other rename',
      rationale: 'r',
      patch: [{ op: 'replace', path: '/federation/gateways/chat/base', value: '/v3' }]
    });
    const c = await propose({
      base_version: base,
      title: 'unrelated',
      rationale: 'r',
      patch: [{ op: 'add', path: '/federation/nodes/team', value: 'x' }]
    });
    expect((await merge({ proposal_id: a.body.proposal_id })).body.version).toBe(base + 1);
    const conflict = await merge({ proposal_id: b.body.proposal_id });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ ok: false, error: 'conflict', base_version: base, latest_version: base + 1 });
    expect(conflict.body.conflicts).toEqual([
      expect.objectContaining({ path: '/federation/gateways/chat/base', operation: 0 })
    ]);
    expect(await openIds()).toContain(b.body.proposal_id);
    // A change elsewhere still merges on top of the newer version.
    expect((await merge({ proposal_id: c.body.proposal_id })).body.version).toBe(base + 2);
    expect((await latest()).tree.federation).toMatchObject({
      gateways: { chat: { base: '/v2' } },
      nodes: { team: 'x' }
    });
  });

  it('rejects with a reason, and supersedes an open proposal by a newer one of the same author', async () => {
    const base = (await latest()).version;
    const p1 = await propose({
      base_version: base,
      title: 'draft',
      rationale: 'r',
      patch: [{ op: 'add', path: '/federation/draft', value: 1 }]
    });
    expect((await merge({ proposal_id: p1.body.proposal_id, decision: 'reject' })).status).toBe(400);
    const rejected = await merge({ proposal_id: p1.body.proposal_id, decision: 'reject', reason: 'not needed' });
    expect(rejected.body.proposal).toMatchObject({ state: 'rejected', reason: 'not needed' });

    const p2 = await propose({
      base_version: base,
      title: 'v1',
      rationale: 'r',
      patch: [{ op: 'add', path: '/federation/idea', value: 1 }]
    });
    const p3 = await propose({
      base_version: base,
      title: 'v2',
      rationale: 'r',
      patch: [{ op: 'add', path: '/federation/idea', value: 2 }],
      supersedes: p2.body.proposal_id
    });
    expect(p3.status).toBe(201);
    const closed = await svc.temporal.workflow.getHandle(`tree-proposal/${p2.body.proposal_id}`).result();
    expect(closed).toMatchObject({ state: 'superseded', superseded_by: p3.body.proposal_id });
    const superseded = await http('GET', `${svc.urls.main}/a2a/directory-tree/review?state=superseded`);
    expect(superseded.body.proposals.map((p: { proposal_id: string }) => p.proposal_id)).toEqual([p2.body.proposal_id]);
    expect((await merge({ proposal_id: p2.body.proposal_id })).status).toBe(409);
  });
});
