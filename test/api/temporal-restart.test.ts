/**
 * Restarting the Temporal server loses no pending approval and no node offline timer, and while it is down every
 * route that needs it answers 503 with Retry-After (never a 500 or a stack trace). Runs against a Temporal dev
 * server of its own (state in a SQLite file), so the shared one keeps serving the other suites.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startTemporal } from '../../scripts/stack/temporal';
import { freePort, ServerHandle } from '../../scripts/stack/process';
import { issueHomologousToken, registerDid } from '../support/credentials';
import { heartbeat, registerNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';

let svc: TestService;
let temporal: ServerHandle & { address: string };
let dataDir: string;
let port: number;
const DID = 'did:example:patient';
const OFFLINE_AFTER_S = 3;

const startServer = async () =>
  (temporal = await startTemporal({ dataDir, port, uiPort: 0, namespace: 'default', headless: true, echo: false }));

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'own-temporal-'));
  port = await freePort();
  await startServer();
  svc = await startTestService({
    TEMPORAL_ADDRESS: temporal.address,
    NODE_OFFLINE_AFTER_S: String(OFFLINE_AFTER_S),
    NODE_REVIEW_REQUIRED: 'false'
  });
  await registerDid(svc.urls.main, svc.adminToken, DID);
});
afterAll(async () => {
  await svc?.close();
  await temporal?.stop();
});

it('keeps a pending approval across a Temporal server restart and completes it afterwards', async () => {
  const token = await issueHomologousToken(svc.urls.main, svc.adminToken);
  const held = await http('POST', `${svc.urls.main}/api/report/truth`, {
    headers: { 'x-did': DID },
    body: { key: 'ops.risk.survivor', value: { s: 1 }, truth_type: 'risk' }
  });
  expect(held.status).toBe(202);

  await temporal.stop();
  await startServer();

  const decided = await eventually(
    async () => {
      const res = await http('POST', `${svc.urls.main}/api/truth/approvals/${held.body.approval_id}/approve`, {
        headers: { 'x-zr-token': token },
        body: { reason: 'after the restart' }
      });
      return res.status === 200 ? res.body : undefined;
    },
    60000,
    'the approval to be accepted after the restart'
  );
  const final = decided.final
    ? decided.approval
    : await eventually(
        async () => {
          const res = await http('GET', `${svc.urls.main}/api/truth/approvals/${held.body.approval_id}`, {
            headers: { 'x-zr-token': token }
          });
          return res.body.approval?.state === 'approved' ? res.body.approval : undefined;
        },
        60000,
        'the approval to complete'
      );
  expect(final).toMatchObject({ state: 'approved', reason: 'after the restart' });
  const found = await http('GET', `${svc.urls.main}/api/truth?key=ops.risk.survivor`);
  expect(found.body.results).toHaveLength(1);
  expect(found.body.results[0].seq).toBe(final.seq);
}, 180000);

it('fires a node offline timer that came due while the Temporal server was down, and the node comes back online', async () => {
  const node = await registerNode(svc.urls.main, 'restart-survivor');
  const nodeState = async () => (await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`)).body.node?.state;
  const beat = await heartbeat(svc.urls.main, node);
  expect(beat.status).toBe(200);
  // The offline deadline counts from this heartbeat, however long the node takes to show online below.
  const lastBeat = Date.parse(beat.body.received_at);
  await eventually(async () => ((await nodeState()) === 'online' ? true : undefined), 30000, 'online');

  await temporal.stop();
  await new Promise((r) => setTimeout(r, (OFFLINE_AFTER_S + 2) * 1000)); // the deadline passes while the server is down
  await startServer();

  await eventually(
    async () => ((await nodeState()) === 'offline' ? true : undefined),
    60000,
    'offline after the restart'
  );
  const changes = (await svc.db.collection('ledger').find({ key: 'hub.node.state_changed' }).sort({ _id: 1 }).toArray())
    .map((e) => JSON.parse(e.value_json as string))
    .filter((c) => c.node_id === node.node_id);
  // The registration's own event is appended by the node's workflow at its first task, the liveness transitions by
  // the presence sweeper; on a busy machine the sweeper may record the first heartbeat first (liveness never waits
  // for the workflow), so only the sweeper's transitions are in a fixed order.
  expect(changes.filter((c) => c.from === null).map((c) => c.to)).toEqual(['offline']);
  const liveness = changes.filter((c) => c.from !== null);
  expect(liveness.map((c) => `${c.from}->${c.to}`)).toEqual(['offline->online', 'online->offline']);
  expect(Date.parse(liveness[1].at) - lastBeat).toBeGreaterThanOrEqual(OFFLINE_AFTER_S * 1000);

  const back = await eventually(
    async () => {
      const res = await heartbeat(svc.urls.main, node);
      return res.body.state === 'online' ? res : undefined;
    },
    30000,
    'a heartbeat answered online'
  );
  expect(back.status).toBe(200);
  // The sweeper records the node online from presence once it runs again after the restart; a node keeps beating
  // meanwhile (a single heartbeat older than the window when the sweep reads presence would rightly not count).
  let lastBeatAt = Date.now();
  await eventually(
    async () => {
      if (Date.now() - lastBeatAt >= 1000) {
        lastBeatAt = Date.now();
        await heartbeat(svc.urls.main, node);
      }
      return (await nodeState()) === 'online' ? true : undefined;
    },
    60000,
    'online again'
  );
}, 240000);

it('answers 503 with Retry-After on every kind of Temporal call while the server is down, and normally once it is back', async () => {
  const token = await issueHomologousToken(svc.urls.main, svc.adminToken, 'outage');
  const homologous = { 'x-zr-token': token };
  const held = await http('POST', `${svc.urls.main}/api/report/truth`, {
    headers: { 'x-did': DID },
    body: { key: 'ops.risk.outage', value: { o: 1 }, truth_type: 'risk' }
  });
  expect(held.status).toBe(202);
  const reviewed = await registerNode(svc.urls.main, 'outage-reviewed');
  const sleeper = await registerNode(svc.urls.main, 'outage-sleeper'); // offline until its first heartbeat
  const latest = (await http('GET', `${svc.urls.main}/a2a/directory-tree/latest`)).body.version;
  const proposal = await http('POST', `${svc.urls.main}/a2a/directory-tree/propose`, {
    headers: homologous,
    body: {
      base_version: latest,
      title: 'outage',
      rationale: 'while Temporal is down',
      patch: [{ op: 'add', path: '/outage', value: true }]
    }
  });
  expect(proposal.status).toBe(201);

  const calls = {
    'review decision (update)': () =>
      http('POST', `${svc.urls.main}/a2a/review/reject`, {
        headers: homologous,
        body: { node_id: reviewed.node_id, reason: 'outage test' }
      }),
    'tree-proposal merge (update)': () =>
      http('POST', `${svc.urls.main}/a2a/directory-tree/merge`, {
        headers: homologous,
        body: { proposal_id: proposal.body.proposal_id }
      }),
    'approval read (describe, query)': () =>
      http('GET', `${svc.urls.main}/api/truth/approvals/${held.body.approval_id}`, { headers: homologous }),
    'approval list (visibility)': () => http('GET', `${svc.urls.main}/api/truth/approvals`, { headers: homologous }),
    'held truth write (start)': () =>
      http('POST', `${svc.urls.main}/api/report/truth`, {
        headers: { 'x-did': DID },
        body: { key: 'ops.risk.outage2', value: { o: 2 }, truth_type: 'risk' }
      })
  };

  await temporal.stop();
  try {
    // Liveness does not go through Temporal: a heartbeat (here of a node still offline) is recorded in presence and
    // answered as usual; the presence sweeper decides the node's state once it runs again.
    const beat = await heartbeat(svc.urls.main, sleeper);
    expect(beat.status).toBe(200);
    for (const [what, call] of Object.entries(calls)) {
      const res = await call();
      expect({ what, status: res.status, error: res.body?.error }).toEqual({ what, status: 503, error: 'unavailable' });
      expect(res.headers.get('retry-after')).toBeTruthy();
      expect(res.body.trace_id).toBe(res.headers.get('x-trace'));
      expect(res.text).not.toMatch(/node_modules|\.ts:\d+|at .*\(/);
    }
  } finally {
    await startServer();
  }

  for (const [what, call] of Object.entries(calls)) {
    const res = await eventually(
      async () => {
        const r = await call();
        return r.status === 503 ? undefined : r;
      },
      60000,
      `${what} to answer after the restart`
    );
    expect({ what, ok: res.status < 300 }).toEqual({ what, ok: true });
  }
}, 240000);
