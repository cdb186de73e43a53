/**
 * The seed's "DID single header" on the node endpoints (§4.8, §5): a DID linked to a node by did_register
 * authenticates as that node with X-DID alone, beside the node's key; a DID linked to no node reads GET /api/nodes
 * and is refused a claim with a 403 naming the missing link; revoking the DID counts at once, rejecting the node as
 * soon as the node cache learns it (api/plugins/auth/external-node.ts).
 */
import { issueHomologousToken, registerDid } from '../support/credentials';
import { heartbeat, nodeHeaders, registerNode, RegisteredNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';

let svc: TestService;
let node: RegisteredNode;
const LINKED = 'did:example:node-did-linked';
const UNLINKED = 'did:example:node-did-unlinked';

const didRegister = (did: string, nodeId: string) =>
  http('POST', `${svc.urls.main}/dal/deploy`, {
    headers: { 'x-did': did, authorization: `Bearer ${svc.adminToken}` },
    body: { action: 'did_register', did, node_id: nodeId, autonomy_level: 0, channels: [] }
  });
const assign = (headers: Record<string, string>) =>
  http('POST', `${svc.urls.main}/api/task/assign`, { headers, body: { max_tasks: 1 } });
const beat = (headers: Record<string, string>) =>
  http('POST', `${svc.urls.main}/a2a/heartbeat`, {
    headers,
    body: { resources: { cpu_percent: 5 }, performance: { latency_ms: 10 } }
  });

beforeAll(async () => {
  svc = await startTestService({ NODE_REVIEW_REQUIRED: 'false' });
  node = await registerNode(svc.urls.main, 'did-node');
  await registerDid(svc.urls.main, svc.adminToken, LINKED);
  await registerDid(svc.urls.main, svc.adminToken, UNLINKED);
  expect((await didRegister(LINKED, node.node_id)).status).toBe(200);
}, 120_000);
afterAll(async () => {
  await svc?.close();
});

it('a linked DID is the node on every node endpoint, with X-DID alone', async () => {
  // Heartbeats by DID keep the node alive exactly as by key.
  const first = await beat({ 'x-did': LINKED });
  expect(first.status).toBe(200);
  expect(first.body).toMatchObject({ node_id: node.node_id });
  await eventually(
    async () =>
      (await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`)).body.node?.state === 'online'
        ? true
        : (await beat({ 'x-did': LINKED }), undefined),
    60_000,
    'the node online from heartbeats sent by DID'
  );
  // Claims: the same answer by DID as by key.
  const byDid = await assign({ 'x-did': LINKED });
  const byKey = await assign(nodeHeaders(node));
  expect(byDid.status).toBe(200);
  expect(byKey.status).toBe(200);
  expect(Object.keys(byDid.body).sort()).toEqual(Object.keys(byKey.body).sort());
  // The online list, by the linked DID (it follows the node's state within about a second: the node index).
  const list = await eventually(
    async () => {
      const res = await http('GET', `${svc.urls.main}/api/nodes`, { headers: { 'x-did': LINKED } });
      return res.body.nodes?.some((n: { node_id: string }) => n.node_id === node.node_id) ? res : undefined;
    },
    5000,
    'the node in the online list'
  );
  expect(list.status).toBe(200);
});

it('a DID linked to no node reads the node list and is refused a claim naming the missing link', async () => {
  const list = await http('GET', `${svc.urls.main}/api/nodes`, { headers: { 'x-did': UNLINKED } });
  expect(list.status).toBe(200);
  const claim = await assign({ 'x-did': UNLINKED });
  expect(claim.status).toBe(403);
  expect(claim.body).toMatchObject({ ok: false, error: 'forbidden' });
  expect(claim.body.message).toMatch(/linked to no node.*did_register/);
  const beatUnlinked = await beat({ 'x-did': UNLINKED });
  expect(beatUnlinked.status).toBe(403);
  // Linked to a node that does not exist: 403 naming it.
  const ghost = 'did:example:node-did-ghost';
  await registerDid(svc.urls.main, svc.adminToken, ghost);
  expect((await didRegister(ghost, 'ext-custom-999999')).status).toBe(200);
  const ghostClaim = await assign({ 'x-did': ghost });
  expect(ghostClaim.status).toBe(403);
  expect(ghostClaim.body.message).toMatch(/ext-custom-999999, which is not registered/);
});

it('refuses unknown DIDs, forged node keys and no credentials with 401', async () => {
  for (const headers of [
    { 'x-did': 'did:example:never-registered' },
    { ...nodeHeaders(node), 'x-external-key': 'nk_forged' },
    {} as Record<string, string>
  ]) {
    const claim = await assign(headers);
    expect(claim.status).toBe(401);
    expect(claim.body).toMatchObject({ ok: false, error: 'unauthorized' });
  }
  expect((await http('GET', `${svc.urls.main}/api/nodes`, { headers: { 'x-did': 'did:example:nobody' } })).status).toBe(
    401
  );
});

it('revoking the DID counts at once; the key keeps working; rejecting the node refuses both', async () => {
  const revoked = await http('POST', `${svc.urls.main}/admin/dids/${encodeURIComponent(LINKED)}/revoke`, {
    headers: { authorization: `Bearer ${svc.adminToken}` }
  });
  expect(revoked.status).toBe(200);
  const after = await assign({ 'x-did': LINKED });
  expect(after.status).toBe(401);
  expect((await beat({ 'x-did': LINKED })).status).toBe(401);
  expect((await heartbeat(svc.urls.main, node)).status).toBe(200);

  // The other side: a second node linked to a DID, then rejected by review.
  const other = await registerNode(svc.urls.main, 'did-node-rejected');
  const otherDid = 'did:example:node-did-rejected';
  await registerDid(svc.urls.main, svc.adminToken, otherDid);
  expect((await didRegister(otherDid, other.node_id)).status).toBe(200);
  expect((await beat({ 'x-did': otherDid })).status).toBe(200);
  const reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken);
  const rejected = await http('POST', `${svc.urls.main}/a2a/review/reject`, {
    headers: { 'x-zr-token': reviewer },
    body: { node_id: other.node_id, reason: 'test' }
  });
  expect(rejected.status).toBe(200);
  await eventually(
    async () => ((await beat({ 'x-did': otherDid })).status === 403 ? true : undefined),
    10_000,
    'the rejected node refused by DID'
  );
  expect((await beat(nodeHeaders(other))).status).toBe(403);
});
