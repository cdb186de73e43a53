/**
 * How a DID gets linked to a node, and what ends the link (spec §4.8 and §5, "DID single header" on the node
 * endpoints): a registration naming a free DID links it (400 unknown or revoked, 409 linked elsewhere, nothing stored
 * then); did_register with the node's key beside X-DID links the calling DID and nothing more; did_register by an
 * arbitrator naming another node moves the link at once, on every API process; removing the node refuses
 * its DID within the node cache's change-log poll; and every node endpoint refuses missing, forged and revoked
 * credentials with 401 in the hub's one error shape (the A2A binding's in its own). test/api/node-did.test.ts covers
 * did_register links, the unlinked DID and rejection.
 */
import { NodeStore } from '../../store/federation/nodes';
import { registerDid } from '../support/credentials';
import { nodeHeaders, registerNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';

let svc: TestService;
let second: Awaited<ReturnType<TestService['startSecondApi']>>;

const register = (body: Record<string, unknown>) =>
  http('POST', `${svc.urls.main}/a2a/register`, { body: { brand: { code: 'custom' }, ...body } });
const beat = (url: string, headers: Record<string, string>) =>
  http('POST', `${url}/a2a/heartbeat`, { headers, body: { resources: { cpu_percent: 5 } } });
const didRegister = (did: string, nodeId: string) =>
  http('POST', `${svc.urls.main}/dal/deploy`, {
    headers: { 'x-did': did, authorization: `Bearer ${svc.adminToken}` },
    body: { action: 'did_register', did, node_id: nodeId, autonomy_level: 0, channels: [] }
  });
const revokeDid = (did: string) =>
  http('POST', `${svc.urls.main}/admin/dids/${encodeURIComponent(did)}/revoke`, {
    headers: { authorization: `Bearer ${svc.adminToken}` }
  });
const nodeCount = () => svc.db.collection('nodes').countDocuments({});
/** The hub's one error shape (core/errors.ts). */
const expectHubError = (body: Record<string, unknown>, error: string) => {
  expect(body).toMatchObject({ ok: false, error });
  expect(typeof body.message).toBe('string');
  expect(typeof body.trace_id).toBe('string');
};

beforeAll(async () => {
  svc = await startTestService({ NODE_REVIEW_REQUIRED: 'false' });
  second = await svc.startSecondApi();
}, 180_000);
afterAll(async () => {
  await second?.stop();
  await svc?.close();
});

describe('registration with a DID', () => {
  it('links a free DID: X-DID alone is the node from the answer on, and the ledger says so', async () => {
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-at-registration');
    const res = await register({ name: 'linked-at-registration', did });
    expect(res.status).toBe(201);
    expect(res.body.did).toBe(did);
    const nodeId = res.body.node_id as string;
    for (const url of [svc.urls.main, second.url]) {
      const hb = await beat(url, { 'x-did': did });
      expect({ url, status: hb.status, node: hb.body.node_id }).toEqual({ url, status: 200, node: nodeId });
    }
    // The key works beside it.
    expect((await beat(svc.urls.main, nodeHeaders({ node_id: nodeId, api_key: res.body.api_key }))).status).toBe(200);
    const registered = await eventually(
      async () =>
        (await svc.db.collection('ledger').find({ key: 'hub.node.state_changed' }).toArray())
          .map((e) => JSON.parse(e.value_json as string))
          .find((v) => v.node_id === nodeId && v.from === null),
      30_000,
      "the node's registration event"
    );
    expect(registered).toMatchObject({ reason: 'registered', did });
  });

  it('refuses an unknown or revoked DID (400 naming body.did) and one linked elsewhere (409), storing nothing', async () => {
    const taken = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-taken');
    const owner = await register({ name: 'owner', did: taken });
    expect(owner.status).toBe(201);
    const revoked = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-revoked');
    expect((await revokeDid(revoked)).status).toBe(200);
    const before = await nodeCount();
    for (const [did, status, error] of [
      ['did:example:link-never-registered', 400, 'invalid_request'],
      [revoked, 400, 'invalid_request'],
      [taken, 409, 'conflict'],
      ['not-a-did', 400, 'invalid_request']
    ] as const) {
      const res = await register({ name: 'refused', did });
      expect({ did, status: res.status }).toEqual({ did, status });
      expectHubError(res.body, error);
      if (status === 400) expect(res.body.fields.map((f: { field: string }) => f.field)).toEqual(['body.did']);
    }
    expect(await nodeCount()).toBe(before);
    // The taken DID still authenticates as its first node.
    expect((await beat(svc.urls.main, { 'x-did': taken })).body.node_id).toBe(owner.body.node_id);
  });
});

describe('did_register with the node key', () => {
  const linkWithKey = (node: { node_id: string; api_key: string }, did: string, body: Record<string, unknown> = {}) =>
    http('POST', `${svc.urls.main}/dal/deploy`, {
      headers: { 'x-did': did, ...nodeHeaders(node) },
      body: { action: 'did_register', did, node_id: node.node_id, autonomy_level: 0, channels: [], ...body }
    });

  it("links the calling DID to the key's node, without an arbitrator, idempotently", async () => {
    const node = await registerNode(svc.urls.main, 'links-with-key');
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-with-key');
    expect((await beat(svc.urls.main, { 'x-did': did })).status).toBe(403);
    const linked = await linkWithKey(node, did);
    expect(linked.status).toBe(200);
    expect(linked.body).toMatchObject({ node_id: node.node_id, previous_node_id: null, created: false });
    expect((await beat(second.url, { 'x-did': did })).body.node_id).toBe(node.node_id);
    const again = await linkWithKey(node, did);
    expect(again.body).toMatchObject({ node_id: node.node_id, previous_node_id: node.node_id });
    const event = (await svc.db.collection('ledger').find({ key: 'hub.deploy.did_registered' }).toArray())
      .map((e) => JSON.parse(e.value_json as string))
      .find((v) => v.did === did);
    expect(event).toMatchObject({ node_id: node.node_id, by: `${did} with the key of ${node.node_id}` });
  });

  it('refuses more than that link: another DID or node, levels, channels, a taken DID, a forged key', async () => {
    const node = await registerNode(svc.urls.main, 'asks-too-much');
    const other = await registerNode(svc.urls.main, 'other-node');
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-asks-too-much');
    const stranger = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-stranger');
    const cases: [string, Promise<Awaited<ReturnType<typeof http>>>, number, string][] = [
      ['another DID', linkWithKey(node, did, { did: stranger }), 403, 'forbidden'],
      ['another node', linkWithKey(node, did, { node_id: other.node_id }), 403, 'forbidden'],
      ['a level', linkWithKey(node, did, { autonomy_level: 1 }), 403, 'forbidden'],
      ['a channel', linkWithKey(node, did, { channels: ['deploy'] }), 403, 'forbidden'],
      ['a forged key', linkWithKey({ ...node, api_key: 'nk_forged' }, did), 401, 'unauthorized']
    ];
    for (const [what, pending, status, error] of cases) {
      const res = await pending;
      expect({ what, status: res.status }).toEqual({ what, status });
      expectHubError(res.body, error);
    }
    expect((await beat(svc.urls.main, { 'x-did': did })).status).toBe(403);
    // Linked to another node: only an arbitrator moves it.
    expect((await linkWithKey(other, did)).status).toBe(200);
    const taken = await linkWithKey(node, did);
    expect(taken.status).toBe(409);
    expectHubError(taken.body, 'conflict');
    expect((await beat(svc.urls.main, { 'x-did': did })).body.node_id).toBe(other.node_id);
  });
});

it('did_register by an arbitrator naming another node moves the link, at once on every API process', async () => {
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-moved');
  const first = await register({ name: 'first-owner', did });
  const next = await registerNode(svc.urls.main, 'next-owner');
  for (const url of [svc.urls.main, second.url])
    expect((await beat(url, { 'x-did': did })).body.node_id).toBe(first.body.node_id);
  const moved = await didRegister(did, next.node_id);
  expect(moved.status).toBe(200);
  expect(moved.body).toMatchObject({ node_id: next.node_id, previous_node_id: first.body.node_id, created: false });
  // The very next request, on either process, is the new node's.
  for (const url of [second.url, svc.urls.main])
    expect((await beat(url, { 'x-did': did })).body.node_id).toBe(next.node_id);
  // The first node keeps its key; its link is gone, so a registration may not take the DID back.
  expect(
    (await beat(svc.urls.main, nodeHeaders({ node_id: first.body.node_id, api_key: first.body.api_key }))).status
  ).toBe(200);
  expect((await register({ name: 'squatter', did })).status).toBe(409);
  const event = (await svc.db.collection('ledger').find({ key: 'hub.deploy.did_registered' }).toArray())
    .map((e) => JSON.parse(e.value_json as string))
    .find((v) => v.did === did);
  expect(event).toMatchObject({ node_id: next.node_id, previous_node_id: first.body.node_id });
});

it('did_revoke ends a link made at registration at once, on every API process; the key keeps working', async () => {
  // A DID POST /admin/dids wrote (no registry fields yet), as a registration links it.
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-did-revoked');
  const res = await register({ name: 'did-revoked', did });
  expect((await beat(second.url, { 'x-did': did })).status).toBe(200);
  const revoked = await http('POST', `${svc.urls.main}/dal/deploy`, {
    headers: { 'x-did': did, authorization: `Bearer ${svc.adminToken}` },
    body: { action: 'did_revoke', did }
  });
  expect(revoked.body).toMatchObject({ ok: true, revoked: true, node_id: res.body.node_id });
  for (const url of [second.url, svc.urls.main]) {
    const refused = await beat(url, { 'x-did': did });
    expect({ url, status: refused.status }).toEqual({ url, status: 401 });
    expectHubError(refused.body, 'unauthorized');
  }
  expect((await beat(svc.urls.main, nodeHeaders(res.body))).status).toBe(200);
});

it('removing the node refuses its DID on every API process within the change-log poll', async () => {
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-removed');
  const res = await register({ name: 'removed', did });
  for (const url of [svc.urls.main, second.url]) expect((await beat(url, { 'x-did': did })).status).toBe(200);
  const removedAt = Date.now();
  await new NodeStore(svc.db).delete(res.body.node_id);
  for (const url of [svc.urls.main, second.url]) {
    const refused = await eventually(
      async () => {
        const hb = await beat(url, { 'x-did': did });
        return hb.status === 403 ? hb : undefined;
      },
      10_000,
      `the removed node's DID refused on ${url}`
    );
    expectHubError(refused.body, 'forbidden');
    expect(refused.body.message).toMatch(/which is not registered/);
  }
  // About a second (NODE_CHANGES_POLL_MS, then a read); 5 s leaves room for a loaded machine.
  expect(Date.now() - removedAt).toBeLessThan(5000);
});

it('every node endpoint refuses missing, forged and revoked credentials with 401 in one error shape', async () => {
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:link-then-revoked');
  const node = (await register({ name: 'revoked-did', did })).body as { node_id: string; api_key: string };
  expect((await beat(svc.urls.main, { 'x-did': did })).status).toBe(200);
  expect((await revokeDid(did)).status).toBe(200);

  // The node endpoints, from the OpenAPI document: every operation a node's key may call.
  const doc = (await http('GET', `${svc.urls.main}/openapi.json`)).body as {
    paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>>;
  };
  const endpoints = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([, op]) => op.security?.some((r) => 'node_key' in r))
      .map(([method]) => ({ method: method.toUpperCase(), path: path.replace(/\{[^}]+\}/g, 'x') }))
  );
  const paths = endpoints.map((e) => `${e.method} ${e.path}`);
  expect(paths).toEqual(
    expect.arrayContaining([
      'POST /a2a/heartbeat',
      'POST /api/task/assign',
      'POST /api/task/x/progress',
      'POST /api/task/x/complete',
      'POST /api/task/x/fail',
      'GET /api/nodes',
      'POST /v1/gpu/register'
    ])
  );
  const credentials: Record<string, Record<string, string>> = {
    missing: {},
    'unknown DID': { 'x-did': 'did:example:never-registered-here' },
    'forged key': { ...nodeHeaders(node), 'x-external-key': 'nk_forged' },
    'unknown node': { 'x-external-node': 'ext-custom-999998', 'x-external-key': 'nk_forged' },
    'revoked DID': { 'x-did': did }
  };
  for (const { method, path } of endpoints) {
    for (const [what, headers] of Object.entries(credentials)) {
      const res = await http(method, `${svc.urls.main}${path}`, method === 'GET' ? { headers } : { headers, body: {} });
      const where = `${method} ${path} (${what})`;
      expect({ where, status: res.status }).toEqual({ where, status: 401 });
      // The A2A binding answers in its protocol's shape (docs/a2a.md); every other route in the hub's.
      if (/^\/a2a\/(message:|tasks|extendedAgentCard|jsonrpc)/.test(path)) expect(res.body.error).toBeDefined();
      else expectHubError(res.body, 'unauthorized');
    }
  }
});
