/**
 * Federated compute over real HTTP and a real WebSocket, against the embedded stack with a worker (the node
 * lifecycle workflow moves nodes online and offline): the GPU registry (register, update, list, a GPU of an
 * offline node listed unavailable, bad bodies, node auth) and the hub's WebSocket driven by a plain `ws` client
 * (a new ledger entry, a node state change, resume from a seq, the nodes stream refused without a token).
 */
import WebSocket from 'ws';
import { eventually, http, startTestService, TestService } from '../support/service';
import { issueHomologousToken } from '../support/credentials';
import { heartbeat, nodeHeaders, registerNode, RegisteredNode } from '../support/federation';

jest.setTimeout(120_000);

let svc: TestService;
let reviewer: string;
let accessToken: string;
const OFFLINE_AFTER_S = 3;
const admin = () => ({ authorization: `Bearer ${svc.adminToken}` });
const approve = (id: string) =>
  http('POST', `${svc.urls.main}/a2a/review/approve`, {
    headers: { 'x-zr-token': reviewer },
    body: { node_id: id, reason: 'gpu test' }
  });
const nodeState = async (id: string) => (await svc.db.collection('nodes').findOne({ _id: id as never }))?.state;

const gpuBody = (extra: Record<string, unknown> = {}) => ({
  name: 'rack-a',
  model: 'NVIDIA H100 80GB',
  memory_gb: 80,
  count: 8,
  price: { amount: 2.5, currency: 'USD' },
  endpoint: 'https://gpu.example.com/v1',
  ...extra
});

beforeAll(async () => {
  svc = await startTestService({ NODE_OFFLINE_AFTER_S: String(OFFLINE_AFTER_S), NODE_CACHE_TTL_MS: '300' });
  reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken, 'reviewer');
  const client = await http('POST', `${svc.urls.main}/admin/oauth-clients`, {
    headers: admin(),
    body: { label: 'ws', scopes: ['compute'] }
  });
  expect(client.status).toBe(201);
  const token = await http('POST', `${svc.urls.main}/v1/oauth/token`, {
    body: {
      grant_type: 'client_credentials',
      client_id: client.body.client_id,
      client_secret: client.body.client_secret
    }
  });
  expect(token.status).toBe(200);
  accessToken = token.body.access_token;
});
afterAll(async () => {
  await svc?.close();
});

it('lists the GPU and WebSocket routes in the directory under federated_compute', async () => {
  const entries = (await http('GET', `${svc.urls.main}/a2a/endpoints`)).body.endpoints as {
    path: string;
    group: string;
    auth: string;
  }[];
  const ours = Object.fromEntries(
    entries.filter((e) => ['/v1/gpu/register', '/v1/gpu/nodes', '/v1/ws/info'].includes(e.path)).map((e) => [e.path, e])
  );
  expect(ours['/v1/gpu/register']).toMatchObject({ group: 'federated_compute', auth: 'external_node' });
  expect(ours['/v1/gpu/nodes']).toMatchObject({ group: 'federated_compute', auth: 'none' });
  expect(ours['/v1/ws/info']).toMatchObject({ group: 'federated_compute', auth: 'none' });
  expect(entries.some((e) => e.path === '/v1/ws')).toBe(false);
});

describe('GPU registry', () => {
  let node: RegisteredNode;
  beforeAll(async () => {
    node = await registerNode(svc.urls.main, 'gpu-node');
  });

  it('refuses a registration without node credentials or with a wrong key', async () => {
    expect((await http('POST', `${svc.urls.main}/v1/gpu/register`, { body: gpuBody() })).status).toBe(401);
    expect(
      (
        await http('POST', `${svc.urls.main}/v1/gpu/register`, {
          headers: { ...nodeHeaders(node), 'x-external-key': 'wrong' },
          body: gpuBody()
        })
      ).status
    ).toBe(401);
  });

  it('refuses bad bodies with 400 naming each bad field', async () => {
    const res = await http('POST', `${svc.urls.main}/v1/gpu/register`, {
      headers: nodeHeaders(node),
      body: { model: '', memory_gb: -1, count: 0, price: { amount: 1, currency: 'usd' }, endpoint: 'ftp://x', extra: 1 }
    });
    expect(res.status).toBe(400);
    const fields = res.body.fields.map((f: { field: string }) => f.field).join(' ');
    for (const f of ['model', 'memory_gb', 'count', 'price.currency', 'endpoint']) expect(fields).toContain(f);
  });

  it('registers (201), updates the same name (200), and lists a pending node GPU as unavailable', async () => {
    const first = await http('POST', `${svc.urls.main}/v1/gpu/register`, {
      headers: nodeHeaders(node),
      body: gpuBody()
    });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      ok: true,
      gpu: {
        gpu_id: `${node.node_id}/rack-a`,
        node_id: node.node_id,
        model: 'NVIDIA H100 80GB',
        count: 8,
        price: { amount: 2.5, currency: 'USD', unit: 'gpu_hour' }
      },
      node_state: 'pending_review',
      available: false
    });
    const again = await http('POST', `${svc.urls.main}/v1/gpu/register`, {
      headers: nodeHeaders(node),
      body: gpuBody({ count: 4 })
    });
    expect(again.status).toBe(200);
    expect(again.body.gpu).toMatchObject({ count: 4, registered_at: first.body.gpu.registered_at });

    const list = await http('GET', `${svc.urls.main}/v1/gpu/nodes?node_id=${node.node_id}`);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({
      ok: true,
      total: 1,
      gpus: [{ gpu_id: `${node.node_id}/rack-a`, count: 4, node_state: 'pending_review', available: false }]
    });
  });

  it('lists a GPU available while its node is online and unavailable once the node is offline', async () => {
    expect((await heartbeat(svc.urls.main, node)).status).toBe(200);
    expect((await approve(node.node_id)).status).toBe(200);
    /** The node's GPU once the listing filtered by `available` shows it (states lag the node documents by ~1 s). */
    const listed = (available: boolean, ms: number) =>
      eventually(
        async () => {
          const res = await http('GET', `${svc.urls.main}/v1/gpu/nodes?available=${available}`);
          return res.body.gpus.find((g: { node_id: string }) => g.node_id === node.node_id);
        },
        ms,
        `gpu ${available ? 'available' : 'unavailable'}`
      );
    const online = await listed(true, 15000);
    expect(online).toMatchObject({ node_state: 'online', available: true });
    expect(online.last_seen_at).not.toBeNull();

    await eventually(
      async () => ((await nodeState(node.node_id)) === 'offline' ? true : undefined),
      20000,
      'node offline'
    );
    const offline = await listed(false, 5000);
    expect(offline).toMatchObject({ node_state: 'offline', available: false });
    const onlyAvailable = await http('GET', `${svc.urls.main}/v1/gpu/nodes?available=true`);
    expect(onlyAvailable.body.gpus.some((g: { node_id: string }) => g.node_id === node.node_id)).toBe(false);
  });
});

/** A plain `ws` client collecting every message it receives. */
function connect(url: string, headers: Record<string, string> = {}) {
  const socket = new WebSocket(url, { headers });
  const messages: any[] = [];
  let closeCode: number | null = null;
  socket.on('message', (data) => messages.push(JSON.parse(data.toString())));
  socket.on('close', (code) => (closeCode = code));
  const opened = new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return {
    socket,
    messages,
    closeCode: () => closeCode,
    opened,
    subscribe: async (message: Record<string, unknown>) => {
      await opened;
      socket.send(JSON.stringify({ type: 'subscribe', ...message }));
      await eventually(
        async () => messages.find((m) => m.type === 'subscribed' || m.type === 'error'),
        10000,
        'subscribe answer'
      );
    },
    close: () => socket.close()
  };
}

describe('WebSocket', () => {
  let wsUrl: string;
  const reportTruth = async (key: string) => {
    const did = 'did:example:ws-writer';
    await http('POST', `${svc.urls.main}/admin/dids`, { headers: admin(), body: { did } });
    const res = await http('POST', `${svc.urls.main}/api/report/truth`, {
      headers: { 'x-did': did },
      body: { key, value: { n: 1 }, truth_type: 'data' }
    });
    expect(res.status).toBe(200);
    return res.body.seq as number;
  };

  it('GET /v1/ws/info points to the socket and names its streams', async () => {
    const res = await http('GET', `${svc.urls.main}/v1/ws/info`);
    expect(res.status).toBe(200);
    expect(res.body.url).toBe(`${svc.env.PUBLIC_URL!.replace(/^http/, 'ws')}/v1/ws`);
    expect(res.body.streams).toEqual([
      expect.objectContaining({ name: 'ledger', public: true }),
      expect.objectContaining({ name: 'nodes', public: false })
    ]);
    wsUrl = res.body.url;
  });

  it('delivers a new ledger entry to a public subscriber, and resumes after a seq', async () => {
    const head = (await http('GET', `${svc.urls.main}/api/sub-l0?after=0&limit=500`)).body.next_cursor as number;
    const client = connect(wsUrl);
    await client.subscribe({ streams: ['ledger'], after: head });
    expect(client.messages[0]).toMatchObject({ type: 'subscribed', streams: ['ledger'], after: head });
    const seq = await reportTruth('ws.test.first');
    const got = await eventually(
      async () => client.messages.find((m) => m.type === 'entry' && m.seq === seq),
      10000,
      'entry'
    );
    expect(got.entry).toMatchObject({ seq, key: 'ws.test.first', value: { n: 1 } });
    client.close();

    // Two more entries while disconnected; a resume from the first seq receives exactly those, in order.
    const second = await reportTruth('ws.test.second');
    const third = await reportTruth('ws.test.third');
    const resumed = connect(wsUrl);
    await resumed.subscribe({ streams: ['ledger'], after: seq });
    await eventually(
      async () => (resumed.messages.some((m) => m.seq === third) ? true : undefined),
      10000,
      'resumed entries'
    );
    const seqs = resumed.messages.filter((m) => m.type === 'entry').map((m) => m.seq);
    expect(seqs[0]).toBe(seq + 1);
    expect(seqs).toContain(second);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(seqs.every((s: number) => s > seq)).toBe(true);
    resumed.close();
  });

  it('delivers every entry exactly once and in order to several sockets sharing the tail, joined at different seqs', async () => {
    const head = (await http('GET', `${svc.urls.main}/api/sub-l0?after=0&limit=500`)).body.next_cursor as number;
    const live = connect(wsUrl);
    await live.subscribe({ streams: ['ledger'], after: head });
    const fromStart = connect(wsUrl);
    await fromStart.subscribe({ streams: ['ledger'], after: 0 });
    const written: number[] = [];
    for (let i = 0; i < 4; i++) written.push(await reportTruth(`ws.test.shared.${i}`));
    const late = connect(wsUrl);
    await late.subscribe({ streams: ['ledger'], after: written[1]! });
    const last = written[written.length - 1]!;
    written.push(await reportTruth('ws.test.shared.after-late'));
    const newest = written[written.length - 1]!;
    for (const client of [live, fromStart, late]) {
      await eventually(
        async () => (client.messages.some((m) => m.seq === newest) ? true : undefined),
        10000,
        'newest entry'
      );
      const seqs = client.messages.filter((m) => m.type === 'entry').map((m) => m.seq as number);
      // Contiguous from where it joined: no gap, no repeat.
      const first = seqs[0]!;
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => first + i));
      expect(seqs).toContain(last);
      client.close();
    }
    expect(fromStart.messages.find((m) => m.type === 'entry')!.seq).toBe(1);
    expect(late.messages.find((m) => m.type === 'entry')!.seq).toBe(written[1]! + 1);
  });

  it('refuses the nodes stream without a token (or with a forged one) and closes with 4401', async () => {
    const anonymous = connect(wsUrl);
    await anonymous.subscribe({ streams: ['nodes'] });
    expect(anonymous.messages[0]).toMatchObject({ type: 'error', error: 'unauthorized' });
    await eventually(async () => anonymous.closeCode() ?? undefined, 5000, 'close');
    expect(anonymous.closeCode()).toBe(4401);

    const forged = connect(wsUrl, { authorization: `Bearer ${accessToken.slice(0, -4)}AAAA` });
    await forged.subscribe({ streams: ['ledger', 'nodes'] });
    expect(forged.messages[0]).toMatchObject({ type: 'error', error: 'unauthorized' });
  });

  it('refuses a malformed subscribe message with 4400', async () => {
    const client = connect(wsUrl);
    await client.subscribe({ streams: ['everything'] });
    expect(client.messages[0]).toMatchObject({ type: 'error', error: 'bad_message' });
    await eventually(async () => client.closeCode() ?? undefined, 5000, 'close');
    expect(client.closeCode()).toBe(4400);
  });

  it('delivers node state changes to an authenticated subscriber (header or message token), resumable from a seq', async () => {
    const head = (await http('GET', `${svc.urls.main}/api/sub-l0?after=0&limit=500`)).body.next_cursor as number;
    const viaHeader = connect(wsUrl, { authorization: `Bearer ${accessToken}` });
    await viaHeader.subscribe({ streams: ['nodes'], after: head });
    expect(viaHeader.messages[0]).toMatchObject({ type: 'subscribed', streams: ['nodes'] });

    const node = await registerNode(svc.urls.main, 'ws-node');
    expect((await heartbeat(svc.urls.main, node)).status).toBe(200);
    expect((await approve(node.node_id)).status).toBe(200);
    const online = await eventually(
      async () =>
        viaHeader.messages.find((m) => m.type === 'node_state' && m.node_id === node.node_id && m.to === 'online'),
      15000,
      'online change'
    );
    expect(online).toMatchObject({ from: 'pending_review', to: 'online' });
    const registered = viaHeader.messages.find(
      (m) => m.type === 'node_state' && m.node_id === node.node_id && m.to === 'pending_review'
    );
    expect(registered).toBeDefined();
    // Only node state changes on this stream.
    expect(viaHeader.messages.every((m) => m.type === 'subscribed' || m.type === 'node_state')).toBe(true);
    viaHeader.close();

    // Resume: after the registration's seq, the next change is the approval.
    const viaMessage = connect(wsUrl);
    await viaMessage.subscribe({ streams: ['nodes'], after: registered.seq, access_token: accessToken });
    const first = await eventually(
      async () => viaMessage.messages.find((m) => m.type === 'node_state' && m.node_id === node.node_id),
      10000,
      'resumed change'
    );
    expect(first).toMatchObject({ seq: online.seq, to: 'online' });
    viaMessage.close();
  });
});
