/**
 * The hub's production topology across hosts (test/topology/hosts.ts: network namespaces on one machine, as root),
 * drilled: PostgreSQL and FerretDB on `db`, a real Temporal cluster on `temporal-1` and `temporal-2` behind its gRPC
 * balancer on `temporal-lb` (test/topology/cluster.ts, as temporal-cluster.test.ts starts them), two API replicas
 * on `api-1` and `api-2` sharing the ledger writer lease (LEDGER_FORWARD_SECRET: one holds it, the other forwards
 * its appends to it), workers on `worker-1` and `worker-2`, and docker/nginx-lb.conf under Debian's nginx on `lb` in
 * front of the two APIs (test/topology/api-lb.ts). Clients reach the hub only through `lb` (test/topology/load.ts):
 * writers with Idempotency-Keys, a held writer, and 200 nodes beating every 20 s.
 * Drills, in order:
 *   - the writer-lease holder (found from each API's /health) cut off from `db` for 30 s, then healed;
 *   - the API holding the lease cut off from the balancer and from the other API (its forwarder) for 30 s;
 *   - the worker running a daemon DAG's model call (dispatched on `api-1`'s loopback daemon; the model is the test's
 *     upstream on the bridge, each call taking 8 s) cut off from both Temporal members and their balancer for 30 s:
 *     the DAG finishes, every task DONE once, one `hub.daemon.dag_finished` record;
 *   - a rolling restart: both APIs, both workers and both Temporal members restarted one after the other (SIGTERM,
 *     started again, waited for).
 * After each: every acknowledged write is in the ledger once, at the seq it was answered with; the seqs are
 * contiguous and /api/verify (through the balancer) is consistent; every held write has its one approval workflow,
 * pending, and one acknowledged during the drill is approved and appended once; every node stayed online (it never
 * changed state during the drill); both Temporal members serve; and every request started more than
 * RECOVERY_BOUND_S after the heal (the last restart) was answered. Prints the requests refused per phase, and when
 * the last refusal after the heal ended (figures in docs/operations.md#test-hosts-network-namespaces).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { MongoClient } from 'mongodb';
import { ServerHandle, sleep } from '../../scripts/stack/process';
import { waitForFrontend } from '../../scripts/stack/temporal-cluster';
import { issueHomologousToken, registerDid } from '../support/credentials';
import { FakeOpenAi, startFakeOpenAi } from '../support/fake-openai';
import { nodeHeaders, RegisteredNode, registerNode } from '../support/federation';
import { startApiLb } from './api-lb';
import {
  DbAndTemporal,
  hubEnv,
  makeRoot,
  onTestHosts,
  startDbAndTemporal,
  startHubProcess,
  temporalTools,
  waitForPoller,
  waitHealthy
} from './cluster';
import { BRIDGE_IP, createTopology, Topology } from './hosts';
import { createLoad, HEARTBEAT_BODY, HeldWrite, Load, refusals, request } from './load';

const { nginxBin, describeOnHosts } = onTestHosts('the API host drills');

const API_HOSTS = ['api-1', 'api-2'] as const;
type ApiHost = (typeof API_HOSTS)[number];
/** How long a cut lasts. */
const CUT_S = 30;
/** The load runs this long before each disruption, and this long after its heal (the last restart). */
const BEFORE_S = 5;
const AFTER_S = 18;
/** Every request started this long after the heal is answered: the bound the drills assert. */
const RECOVERY_BOUND_S = 12;
/** nginx's fail_timeout (the file keeps the default): a replica that refused a connection is skipped this long. */
const LB_FAIL_TIMEOUT_S = 10;
/** After a Temporal member or the worker is back, before the next is restarted (its shards and pollers settle). */
const SETTLE_S = 3;
/** Nodes beating through the balancer, each every BEAT_EVERY_MS (well inside the 90 s offline window, cut included). */
const NODES = 200;
const BEAT_EVERY_MS = 20_000;
const WORKER_HOSTS = ['worker-1', 'worker-2'] as const;
type WorkerHost = (typeof WORKER_HOSTS)[number];

/** How long the model (the test's upstream, outside the hosts) takes over each call of the daemon's DAG. */
const MODEL_CALL_MS = 8_000;
const DAEMON_PORT = 9123;
const DRILLS = 4;

type Phase = [label: string, from: number, to: number];

const TITLE = 'two API hosts behind docker/nginx-lb.conf on a real Temporal cluster: partitions, rolling restart';

describeOnHosts(TITLE, () => {
  let topology: Topology;
  let root: string;
  let cli: string;
  let cluster: DbAndTemporal;
  let env: NodeJS.ProcessEnv;
  let lbUrl: string;
  let mongo: MongoClient;
  let connection: Connection;
  const apis = {} as Record<ApiHost, ServerHandle & { url: string }>;
  const workers = {} as Record<WorkerHost, ServerHandle>;
  let did: string;
  let approver: string;
  const nodes: RegisteredNode[] = [];
  /** Node id -> when it came online (state_changed_at), before the first drill. */
  const onlineSince = new Map<string, string>();
  let load: Load;
  const decided = new Set<string>();
  const figures: string[] = [];
  // Logs are removed only when every drill passed.
  let drillsPassed = 0;
  let upstream: FakeOpenAi;
  let adminToken: string;
  const dbName = `zhdrills_${randomBytes(4).toString('hex')}`;
  const taskQueue = `zhdrills-${randomBytes(4).toString('hex')}`;

  const startApi = (name: ApiHost) =>
    (apis[name] = startHubProcess('api', topology.hosts[name]!, root, env, { PUBLIC_URL: lbUrl }));
  const startWorker = (name: WorkerHost) =>
    (workers[name] = startHubProcess('worker', topology.hosts[name]!, root, env));

  beforeAll(async () => {
    const started = Date.now();
    const found = await temporalTools();
    cli = found.cli;
    root = makeRoot('topology-drills-');
    topology = await createTopology([
      'db',
      'temporal-1',
      'temporal-2',
      'temporal-lb',
      ...API_HOSTS,
      ...WORKER_HOSTS,
      'lb'
    ]);
    cluster = await startDbAndTemporal({ topology, root, tools: found.tools, cli, nginxBin });
    adminToken = `adm_test_${randomBytes(16).toString('hex')}`;
    // The model the daemon's DAG calls: outside the hosts, on the bridge (a provider on the internet, as it were).
    upstream = await startFakeOpenAi('drills', BRIDGE_IP);
    const providers = path.join(root, 'providers.yaml');
    fs.writeFileSync(
      providers,
      [
        'providers:',
        '  - name: local',
        `    base_url: ${upstream.baseUrl}`,
        '    api_key_env: DRILLS_PROVIDER_KEY',
        '    timeout_ms: 60000',
        '    models:',
        '      - { id: free-model, free_tier: true }'
      ].join('\n')
    );
    const lbHost = topology.hosts.lb!;
    lbUrl = `http://${lbHost.ip}:8080`;
    env = hubEnv(
      { ...cluster, dbName, taskQueue, adminToken },
      {
        LEDGER_FORWARD_SECRET: `lfs_${randomBytes(24).toString('hex')}`,
        TRUSTED_PROXIES: lbHost.ip,
        TRUTH_DAILY_QUOTA: '1000000',
        CHAT_PROVIDERS_FILE: providers,
        DRILLS_PROVIDER_KEY: `sk-drills-${randomBytes(8).toString('hex')}`
      }
    );
    API_HOSTS.forEach(startApi);
    WORKER_HOSTS.forEach(startWorker);
    await startApiLb(
      nginxBin,
      lbHost,
      root,
      API_HOSTS.map((h) => topology.hosts[h]!.ip)
    );
    mongo = await MongoClient.connect(cluster.mongoUri);
    connection = await Connection.connect({ address: cluster.temporalAddress });
    await Promise.all([
      ...API_HOSTS.map((h) => waitHealthy(`${apis[h].url}/health`, apis[h])),
      ...WORKER_HOSTS.map((w) => waitForPoller(connection, taskQueue, workers[w]))
    ]);

    // Through the balancer, as clients: a DID that writes, an approver, the nodes, each beating once.
    did = await registerDid(lbUrl, adminToken, 'did:example:drills');
    approver = await issueHomologousToken(lbUrl, adminToken);
    for (let i = 0; i < NODES; i += 10)
      nodes.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(10, NODES - i) }, (_, j) => registerNode(lbUrl, `drill-node-${i + j}`))
        ))
      );
    // (Each API learns the other's registrations from the node change log within about a second.)
    await sleep(2_000);
    for (let i = 0; i < NODES; i += 10) {
      const answers = await Promise.all(
        nodes
          .slice(i, i + 10)
          .map((node) =>
            request('POST', `${lbUrl}/a2a/heartbeat`, { headers: nodeHeaders(node), body: HEARTBEAT_BODY })
          )
      );
      expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    }
    // Every node listed online (presence is written in batches: polled); when each became so is the baseline.
    for (const end = Date.now() + 30_000; onlineSince.size < NODES; await sleep(500)) {
      if (Date.now() > end) throw new Error(`${onlineSince.size} of ${NODES} nodes online after their first heartbeat`);
      for (const [id, at] of await listedOnline()) if (nodes.some((n) => n.node_id === id)) onlineSince.set(id, at);
    }
    load = createLoad({
      url: lbUrl,
      did,
      nodes,
      writers: 2,
      writePauseMs: 100,
      heldPauseMs: 1_500,
      beatEveryMs: BEAT_EVERY_MS
    });
    console.log(
      `hosts, cluster, two APIs, two workers and the balancer up in ${((Date.now() - started) / 1000).toFixed(1)} s`
    );
  }, 420_000);

  afterAll(async () => {
    if (figures.length) console.log(figures.join('\n'));
    await load?.close().catch(() => undefined);
    await connection?.close().catch(() => undefined);
    await mongo?.close().catch(() => undefined);
    await topology?.teardown();
    await upstream?.close().catch(() => undefined);
    if (drillsPassed === DRILLS && root) fs.rmSync(root, { recursive: true, force: true });
    else if (root) console.log(`logs kept in ${root}`);
  }, 60_000);

  /** The nodes listed online through the balancer, with when each became so (state_changed_at). */
  const listedOnline = async (): Promise<Map<string, string>> => {
    const online = new Map<string, string>();
    for (let offset = 0; ; offset += 200) {
      const res = await request('GET', `${lbUrl}/a2a/nodes?state=online&limit=200&offset=${offset}`);
      expect(res.status).toBe(200);
      const page = res.body.nodes as { node_id: string; state_changed_at: string }[];
      for (const n of page) online.set(n.node_id, n.state_changed_at);
      if (page.length < 200) return online;
    }
  };

  /** The API holding the writer lease, as both APIs' /health say (waits out a moment where both or none claim it). */
  const leaseHolder = async (): Promise<ApiHost> => {
    for (const end = Date.now() + 30_000; ; await sleep(500)) {
      const holds = await Promise.all(
        API_HOSTS.map(
          async (h) =>
            (await request('GET', `${apis[h].url}/health`, { timeoutMs: 5_000 })).body?.ledger_writer?.holds_lease ===
            true
        )
      );
      const holders = API_HOSTS.filter((_, i) => holds[i]);
      if (holders.length === 1) return holders[0]!;
      if (Date.now() > end) throw new Error(`the writer lease is held by ${holders.length} APIs, not one`);
    }
  };

  /**
   * Runs the load for BEFORE_S, then `disrupt` (which answers its phases and when it healed), then AFTER_S more;
   * prints the refusals per phase and asserts every request started RECOVERY_BOUND_S after the heal was answered.
   */
  const drill = async (title: string, disrupt: () => Promise<{ phases: Phase[]; healedAt: number }>) => {
    const began = Date.now();
    load.start();
    let done: { phases: Phase[]; healedAt: number };
    try {
      await sleep(BEFORE_S * 1000);
      done = await disrupt();
      await sleep(AFTER_S * 1000);
    } finally {
      await load.stop();
    }
    const ended = Date.now();
    const after = refusals(load.attempts, done.healedAt, ended);
    const late = refusals(load.attempts, done.healedAt + RECOVERY_BOUND_S * 1000, ended);
    const lines = [
      title,
      `  before (${BEFORE_S} s): ${refusals(load.attempts, began, done.phases[0]![1]).text}`,
      ...done.phases.map(
        ([label, from, to]) =>
          `  ${label} (${((to - from) / 1000).toFixed(1)} s): ${refusals(load.attempts, from, to).text}`
      ),
      `  after (${((ended - done.healedAt) / 1000).toFixed(1)} s): ${after.text}`,
      `  answering on the balancer again ${after.lastRefusalS.toFixed(1)} s after the heal (bound ${RECOVERY_BOUND_S} s); ` +
        `acknowledged so far ${load.acknowledged.size} writes, ${load.held.size} held writes`
    ];
    console.log(lines.join('\n'));
    figures.push(...lines);
    expect(late.refused).toBe(0);
    await expectNothingLost(began);
    drillsPassed++;
  };

  /** Approves one held write acknowledged since `since`, through the balancer, and finds it appended once. */
  const decideOne = async (since: number): Promise<void> => {
    const found = [...load.held.entries()].find(([idem, h]) => h.at >= since && !decided.has(idem));
    expect(found).toBeDefined();
    const [idem, h] = found! as [string, HeldWrite];
    let res = { status: 0, body: undefined as any };
    for (const end = Date.now() + 60_000; res.status !== 200 && Date.now() < end;) {
      res = await request('POST', `${lbUrl}/api/truth/approvals/${h.approvalId}/approve`, {
        headers: { 'x-zr-token': approver },
        body: { reason: 'drill' },
        timeoutMs: 30_000
      });
      if (res.status !== 200) await sleep(1_000);
    }
    expect(res.status).toBe(200);
    decided.add(idem);
    let approval = res.body.final ? res.body.approval : undefined;
    for (const end = Date.now() + 60_000; !(approval?.state === 'approved' && approval.seq != null); await sleep(500)) {
      if (Date.now() > end)
        throw new Error(`${h.approvalId} was not appended within 60 s: ${JSON.stringify(approval)}`);
      approval = (
        await request('GET', `${lbUrl}/api/truth/approvals/${h.approvalId}`, {
          headers: { 'x-zr-token': approver }
        })
      ).body?.approval;
    }
    const entries = await mongo.db(dbName).collection('ledger').find({ key: h.key }).toArray();
    expect(entries.map((e) => Number(e._id))).toEqual([approval.seq]);
  };

  /** What must hold after every drill (`began`: when its load started). */
  const expectNothingLost = async (began: number): Promise<void> => {
    // A held write of this drill is still decidable: approved, it is appended once.
    await decideOne(began);

    // Every acknowledged write once, at its seq; the ledger contiguous and consistent.
    const ledger = mongo.db(dbName).collection('ledger');
    const entries = await ledger.find({ key: { $regex: '^drills\\.write\\.' } }).toArray();
    expect(entries.length).toBe(load.acknowledged.size);
    expect(new Set(entries.map((e) => e.key)).size).toBe(entries.length);
    for (const e of entries) expect(Number(e._id)).toBe(load.acknowledged.get(e.key as string));
    const seqs = (await ledger.find({}, { projection: { _id: 1 } }).toArray())
      .map((e) => Number(e._id))
      .sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => seqs[0]! + i));
    const verify = await request('GET', `${lbUrl}/api/verify`, { timeoutMs: 60_000 });
    expect(verify.body).toMatchObject({ consistent: true });

    // Every other held write pending, each with its one approval workflow (visibility is asynchronous: polled).
    const pending = [...load.held.entries()].filter(([idem]) => !decided.has(idem)).map(([, h]) => h);
    for (let i = 0; i < pending.length; i += 8) {
      const states = await Promise.all(
        pending.slice(i, i + 8).map(async (h) => {
          const res = await request('GET', h.statusUrl, { headers: { 'x-did': did }, timeoutMs: 30_000 });
          return `${h.key}: ${res.status} ${res.body?.approval?.state ?? JSON.stringify(res.body)}`;
        })
      );
      for (const state of states) expect(state).toMatch(/: 200 pending$/);
    }
    const temporal = new Client({ connection });
    const query = `TaskQueue = '${taskQueue}' AND WorkflowType = 'truthApprovalWorkflow'`;
    let approvals = -1;
    for (const end = Date.now() + 20_000; Date.now() < end; await sleep(500)) {
      approvals = (await temporal.workflow.count(query)).count;
      if (approvals === load.held.size) break;
    }
    expect(approvals).toBe(load.held.size);

    // Every node online, none having changed state since it first came online (none went offline and came back).
    const online = await listedOnline();
    for (const node of nodes) expect(online.get(node.node_id)).toBe(onlineSince.get(node.node_id));
    // Both Temporal members serve.
    for (const m of cluster.members) await waitForFrontend(cli, m.address, 60_000, m);
  };

  /** Cuts `host` off from each of `from` for CUT_S seconds, then heals it: the drill's one phase. */
  const cutFor = async (host: string, from: string[]) => {
    const cutAt = Date.now();
    for (const other of from) topology.cut(host, other);
    await sleep(CUT_S * 1000);
    const healedAt = Date.now();
    topology.heal(host);
    return { phases: [['cut off', cutAt, healedAt]] as Phase[], healedAt };
  };

  it('has one API holding the writer lease, both answering behind the balancer', async () => {
    const holder = await leaseHolder();
    console.log(`${holder} holds the writer lease`);
    const answered = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const res = await request('GET', `${lbUrl}/health`);
      expect(res.status).toBe(200);
      answered.add(String(res.body.ledger_writer.holds_lease));
    }
    expect([...answered].sort()).toEqual(['false', 'true']);
  });

  it('loses and duplicates no acknowledged write when the writer-lease holder is cut off from the database', async () => {
    const holder = await leaseHolder();
    await drill(`${holder}, holding the writer lease, cut off from db for ${CUT_S} s, then healed`, () =>
      cutFor(holder, ['db'])
    );
    console.log(`the writer lease is held by ${await leaseHolder()} after the drill`);
  }, 300_000);

  it('loses and duplicates no acknowledged write when the lease holder is cut off from the balancer and its forwarder', async () => {
    const holder = await leaseHolder();
    const other = API_HOSTS.find((h) => h !== holder)!;
    await drill(`${holder}, holding the writer lease, cut off from lb and ${other} for ${CUT_S} s, then healed`, () =>
      cutFor(holder, ['lb', other])
    );
    console.log(`the writer lease is held by ${await leaseHolder()} after the drill`);
  }, 300_000);

  /** An HTTP exchange with the daemon of `host`, from inside the host (it listens on 127.0.0.1 only), by curl. */
  const daemon = async (
    host: ApiHost,
    method: string,
    route: string,
    headers: Record<string, string>,
    body?: unknown
  ) => {
    const args = ['netns', 'exec', topology.hosts[host]!.ns, 'curl', '-s', '-m', '20', '-X', method];
    for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
    if (body !== undefined) args.push('-H', 'content-type: application/json', '--data-binary', JSON.stringify(body));
    args.push('-w', '\n%{http_code}', `http://127.0.0.1:${DAEMON_PORT}${route}`);
    const { stdout } = await promisify(execFile)('ip', args, { encoding: 'utf8' });
    const at = stdout.lastIndexOf('\n');
    return { status: Number(stdout.slice(at + 1)), body: JSON.parse(stdout.slice(0, at) || 'null') };
  };

  it('finishes a daemon DAG whose worker is cut off from Temporal in the middle of a model call', async () => {
    // A DAG of three model calls in a row, each taking MODEL_CALL_MS at the model; the worker running the first
    // call (the model sees which host called) is cut off from both Temporal members and their balancer for CUT_S.
    // Its call's heartbeats stop reaching Temporal, which times the attempt out and hands it to the other worker.
    const asset = await request('POST', `${lbUrl}/admin/daemon-assets`, {
      headers: { authorization: `Bearer ${adminToken}` },
      body: { label: 'drills' }
    });
    expect(asset.status).toBe(201);
    const factors = { 'x-asset-id': asset.body.asset_id, 'x-order-root': asset.body.order_root };
    upstream.reset();
    upstream.behaviour.delayMs = MODEL_CALL_MS;
    const dagId = `drill-${randomBytes(4).toString('hex')}`;
    const step = (id: string, after?: string) => ({
      id,
      model: 'free-model',
      prompt: `drill ${id}`,
      ...(after ? { depends_on: [after] } : {})
    });
    let cutWorker = '';
    await drill(
      `the worker running a daemon DAG's model call cut off from Temporal for ${CUT_S} s, then healed`,
      async () => {
        const sent = await daemon('api-1', 'POST', '/dispatch', factors, {
          dag_id: dagId,
          wait: false,
          tasks: [step('first'), step('second', 'first'), step('third', 'second')]
        });
        expect(sent.status).toBe(202);
        for (const end = Date.now() + 60_000; upstream.callers.length === 0; await sleep(200))
          if (Date.now() > end) throw new Error('no worker called the model within 60 s of the dispatch');
        const caller = upstream.callers[0]!.replace(/^::ffff:/, '');
        cutWorker = WORKER_HOSTS.find((w) => topology.hosts[w]!.ip === caller) ?? '';
        expect(cutWorker).not.toBe('');
        return cutFor(cutWorker, ['temporal-lb', 'temporal-1', 'temporal-2']);
      }
    );
    // The DAG finishes, every task once DONE with the model's answer, and one ledger record says so.
    let dag = { status: 0, body: undefined as any };
    for (const end = Date.now() + 240_000; dag.body?.status !== 'DONE'; await sleep(1_000)) {
      if (Date.now() > end) throw new Error(`the DAG did not finish within 240 s: ${JSON.stringify(dag.body)}`);
      dag = await daemon('api-1', 'GET', `/dags/${dagId}`, factors);
    }
    expect(dag.body.tasks.map((t: { status: string; output: string }) => [t.status, t.output])).toEqual(
      ['first', 'second', 'third'].map((id) => ['DONE', `echo: drill ${id}`])
    );
    const finished = (
      await mongo.db(dbName).collection('ledger').find({ key: 'hub.daemon.dag_finished' }).toArray()
    ).filter((e) => JSON.stringify(e).includes(dagId));
    expect(finished.length).toBe(1);
    const byHost = WORKER_HOSTS.map(
      (w) => `${w} ${upstream.callers.filter((c) => c.endsWith(topology.hosts[w]!.ip)).length}`
    ).join(', ');
    const line = `  the DAG: ${upstream.calls} model calls for 3 tasks (${byHost}; ${cutWorker} cut off), DONE`;
    console.log(line);
    figures.push(line);
  }, 600_000);

  it('loses and duplicates no acknowledged write through a rolling restart of every process', async () => {
    // Each process is stopped (SIGTERM), started again and waited for, then the next: an API until it is healthy and
    // the balancer's fail_timeout has passed (it may have skipped the replica while it was down: stopping the next one
    // sooner would leave it none), the worker until it polls, a Temporal member until its frontend serves.
    const steps: [string, () => Promise<number>][] = [
      ...API_HOSTS.map((h): [string, () => Promise<number>] => [
        h,
        async () => {
          await apis[h].stop();
          const handle = startApi(h);
          await waitHealthy(`${handle.url}/health`, handle);
          return LB_FAIL_TIMEOUT_S + 1;
        }
      ]),
      ...WORKER_HOSTS.map((w): [string, () => Promise<number>] => [
        w,
        async () => {
          await workers[w].stop();
          await waitForPoller(connection, taskQueue, startWorker(w));
          return SETTLE_S;
        }
      ]),
      ...[1, 2].map((i): [string, () => Promise<number>] => [
        `temporal-${i}`,
        async () => {
          await cluster.members[i - 1]!.stop();
          const member = cluster.startMember(i);
          await waitForFrontend(cli, member.address, 120_000, member);
          return SETTLE_S;
        }
      ])
    ];
    await drill('every process restarted one after the other (APIs, workers, Temporal members)', async () => {
      const phases: Phase[] = [];
      for (const [name, restart] of steps) {
        const from = Date.now();
        const settleS = await restart();
        const back = ((Date.now() - from) / 1000).toFixed(1);
        await sleep(settleS * 1000);
        phases.push([`${name} restarted (back in ${back} s, then ${settleS} s)`, from, Date.now()]);
      }
      return { phases, healedAt: Date.now() };
    });
  }, 400_000);
});
