/**
 * The hub on a real Temporal cluster across hosts (test/topology/hosts.ts: network namespaces on one machine, as
 * root): PostgreSQL and FerretDB on `db` (the launcher's own modules, test/topology/db-host.ts), two Temporal server
 * members on `temporal-1` and `temporal-2` (scripts/stack/temporal-cluster.ts: every service on each, ringpop
 * membership between them, persistence and visibility on the PostgreSQL of `db`), nginx balancing gRPC over both
 * frontends on `temporal-lb` (the one TEMPORAL_ADDRESS the hub takes), and the hub's API on `api-1` and its worker on
 * `worker-1` (all started by test/topology/cluster.ts, as test/topology/api-drills.test.ts starts them).
 * Through the API: truth writes with Idempotency-Keys (retried with the same key until acknowledged), held writes
 * (each starts a truth-approval workflow in Temporal) and a node's heartbeats, before, while and after each drill:
 * `temporal-1` killed (SIGKILL) and started again; `temporal-2` cut off from every host (its link down) and healed;
 * FerretDB paused (SIGSTOP) and resumed.
 * After each: every acknowledged write is in the ledger once, at the seq it was answered with; the ledger's seqs are
 * contiguous and /api/verify is consistent; every acknowledged held write has its one workflow, pending; the node is
 * listed; both members serve. Prints the requests refused per phase and when the last one was (figures in
 * docs/operations.md#test-hosts-network-namespaces).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { MongoClient } from 'mongodb';
import { SEARCH_ATTRIBUTES } from '../../core/search-attributes';
import { waitForFrontend } from '../../scripts/stack/temporal-cluster';
import { registerDid } from '../support/credentials';
import { heartbeat, RegisteredNode, registerNode } from '../support/federation';
import { http } from '../support/service';
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
import { createTopology, Topology } from './hosts';

const { nginxBin, describeOnHosts } = onTestHosts('the real Temporal cluster test');

/** How long temporal-1 stays dead while the writers go on. */
const KILLED_S = 30;
/** How long temporal-2 stays cut off from every host. */
const CUT_S = 20;
/** How long FerretDB stays stopped. */
const PAUSED_S = 20;

interface Attempt {
  at: number;
  what: 'write' | 'held' | 'heartbeat';
  ok: boolean;
}

describeOnHosts('a real Temporal cluster on two hosts, the hub on hosts of its own', () => {
  let topology: Topology;
  let root: string;
  let cli: string;
  let cluster: DbAndTemporal;
  let api: string;
  let adminToken: string;
  let mongo: MongoClient;
  let connection: Connection;
  // Logs are removed only when every drill passed.
  let succeeded = false;
  const dbName = `zh49_${randomBytes(4).toString('hex')}`;
  const taskQueue = `zh49-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    const started = Date.now();
    const found = await temporalTools();
    cli = found.cli;
    root = makeRoot('temporal-cluster-');
    topology = await createTopology(['db', 'temporal-1', 'temporal-2', 'temporal-lb', 'api-1', 'worker-1']);
    cluster = await startDbAndTemporal({ topology, root, tools: found.tools, cli, nginxBin });

    adminToken = `adm_test_${randomBytes(16).toString('hex')}`;
    const env = hubEnv({ ...cluster, dbName, taskQueue, adminToken });
    const apiProcess = startHubProcess('api', topology.hosts['api-1']!, root, env);
    api = apiProcess.url;
    const workerProcess = startHubProcess('worker', topology.hosts['worker-1']!, root, env);
    mongo = await MongoClient.connect(cluster.mongoUri);
    connection = await Connection.connect({ address: cluster.temporalAddress });
    await Promise.all([waitHealthy(`${api}/health`, apiProcess), waitForPoller(connection, taskQueue, workerProcess)]);
    console.log(`hosts, cluster and hub up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }, 420_000);

  afterAll(async () => {
    await connection?.close().catch(() => undefined);
    await mongo?.close().catch(() => undefined);
    await topology?.teardown();
    if (succeeded && root) fs.rmSync(root, { recursive: true, force: true });
    else if (root) {
      console.log(`logs kept in ${root}`);
    }
  }, 60_000);

  // The load every drill runs under, through the API: truth writes with Idempotency-Keys (retried with the same key
  // until acknowledged), a held write every third (each starts a truth-approval workflow) and one node's heartbeats.
  let did: string;
  let node: RegisteredNode;
  const acknowledged = new Map<string, number>(); // key -> seq
  const held = new Map<string, string>(); // idempotency key -> approval status url
  const attempts: Attempt[] = [];
  let counter = 0;

  /** One write, retried with its Idempotency-Key until it is acknowledged. */
  const write = async (kind: 'write' | 'held'): Promise<void> => {
    const n = counter++;
    const key = kind === 'write' ? `cluster.write.${n}` : `cluster.held.${n}`;
    const idempotencyKey = `idem-${kind}-${n}`;
    for (;;) {
      const res = await http('POST', `${api}/api/report/truth`, {
        headers: { 'x-did': did, 'idempotency-key': idempotencyKey },
        body: kind === 'write' ? { key, value: { n } } : { key, value: { n }, truth_type: 'risk' }
      }).catch(() => ({ status: 0, body: undefined }) as const);
      const ok = kind === 'write' ? res.status === 200 : res.status === 202;
      attempts.push({ at: Date.now(), what: kind, ok });
      if (ok && kind === 'write') {
        acknowledged.set(key, res.body.seq);
        return;
      }
      if (ok) {
        held.set(idempotencyKey, res.body.status_url);
        return;
      }
      if (res.status !== 503 && res.status !== 0)
        throw new Error(`${kind} ${key}: ${res.status} ${JSON.stringify(res.body)}`);
      await sleep(250);
    }
  };

  /**
   * Runs the load for 10 s, then `disrupt` (which answers its phases: a label and a time span each), then 15 s more;
   * prints per phase the requests refused (503 or no answer) and when the last one was, from the phase's start.
   */
  const drive = async (title: string, disrupt: () => Promise<[string, number, number][]>): Promise<void> => {
    let stop = false;
    const writers = (async () => {
      for (let i = 0; !stop; i++) {
        await write('write');
        if (i % 3 === 0) await write('held');
        await sleep(100);
      }
    })();
    const beats = (async () => {
      while (!stop) {
        const res = await heartbeat(api, node).catch(() => ({ status: 0 }));
        attempts.push({ at: Date.now(), what: 'heartbeat', ok: res.status === 200 });
        await sleep(1000);
      }
    })();
    let phases: [string, number, number][] = [];
    try {
      await sleep(10_000);
      phases = await disrupt();
      await sleep(15_000);
    } finally {
      stop = true;
      await Promise.all([writers, beats]);
    }
    const phase = (from: number, to: number) => {
      const tried = attempts.filter((a) => a.at >= from && a.at < to);
      const failed = tried.filter((a) => !a.ok);
      const label = { write: 'writes', held: 'held writes', heartbeat: 'heartbeats' };
      const count = (k: Attempt['what']) =>
        `${label[k]} ${failed.filter((a) => a.what === k).length}/${tried.filter((a) => a.what === k).length}`;
      const last = failed.length ? ((failed[failed.length - 1]!.at - from) / 1000).toFixed(1) : '0';
      return `refused ${count('write')}, ${count('held')}, ${count('heartbeat')}; the last ${last} s in`;
    };
    console.log(
      [
        title,
        `acknowledged so far: ${acknowledged.size} writes, ${held.size} held writes`,
        ...phases.map(([label, from, to]) => `${label}: ${phase(from, to)}`)
      ].join('\n')
    );
  };

  /** What must hold after every drill. */
  const expectNothingLost = async (): Promise<void> => {
    // Every acknowledged write once, at its seq; the ledger contiguous and consistent.
    const ledger = mongo.db(dbName).collection('ledger');
    const entries = await ledger.find({ key: { $regex: '^cluster\\.write\\.' } }).toArray();
    expect(entries.length).toBe(acknowledged.size);
    expect(new Set(entries.map((e) => e.key)).size).toBe(entries.length);
    for (const e of entries) expect(Number(e._id)).toBe(acknowledged.get(e.key as string));
    const seqs = (await ledger.find({}, { projection: { _id: 1 } }).toArray())
      .map((e) => Number(e._id))
      .sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => seqs[0]! + i));
    expect((await http('GET', `${api}/api/verify`)).body).toMatchObject({ consistent: true });

    // Every acknowledged held write is decidable: its workflow runs, pending.
    expect(held.size).toBeGreaterThan(0);
    for (const statusUrl of held.values()) {
      const res = await http('GET', statusUrl, { headers: { 'x-did': did } });
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body)).toContain('pending');
    }
    // One approval workflow per acknowledged held write: a refused attempt that had started one was answered, at its
    // retry with the same Idempotency-Key, with that same approval. (Visibility is written asynchronously: polled.)
    const temporal = new Client({ connection });
    const query = `TaskQueue = '${taskQueue}' AND WorkflowType = 'truthApprovalWorkflow'`;
    let approvals = -1;
    for (const end = Date.now() + 20_000; Date.now() < end; await sleep(500)) {
      approvals = (await temporal.workflow.count(query)).count;
      if (approvals === held.size) break;
    }
    expect(approvals).toBe(held.size);

    // The node beat throughout: listed.
    const nodes = await http('GET', `${api}/a2a/nodes`);
    expect(JSON.stringify(nodes.body)).toContain(node.node_id);
    // Both members serve again.
    for (const m of cluster.members) await waitForFrontend(cli, m.address, 60_000, m);
  };

  it("has the hub's search attributes registered on the cluster by the worker", async () => {
    // As on a real cluster: the worker registers them at its start (PostgreSQL visibility here).
    const attributes = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    expect(Object.keys(attributes.customAttributes ?? {}).sort()).toEqual(Object.keys(SEARCH_ATTRIBUTES).sort());
    did = await registerDid(api, adminToken, 'did:example:cluster');
    node = await registerNode(api, 'cluster-node');
    expect((await heartbeat(api, node)).status).toBe(200);
  });

  it('loses and duplicates no acknowledged write when a Temporal member is killed and comes back', async () => {
    await drive(`temporal-1 SIGKILLed for ${KILLED_S} s, then started again`, async () => {
      const killedAt = Date.now();
      cluster.members[0]!.kill();
      await cluster.members[0]!.closed;
      await sleep(KILLED_S * 1000);
      const restartAt = Date.now();
      const restarted = cluster.startMember(1);
      await waitForFrontend(cli, restarted.address, 120_000, restarted);
      console.log(`temporal-1 serving ${((Date.now() - restartAt) / 1000).toFixed(1)} s after its restart`);
      return [
        ['while dead', killedAt, restartAt],
        ['after the restart', restartAt, Date.now() + 15_000]
      ];
    });
    await expectNothingLost();
  }, 300_000);

  it('loses and duplicates no acknowledged write when a Temporal member is cut off from every host and healed', async () => {
    await drive(`temporal-2 cut off from every host for ${CUT_S} s, then healed`, async () => {
      const cutAt = Date.now();
      topology.isolate('temporal-2');
      await sleep(CUT_S * 1000);
      const healedAt = Date.now();
      topology.heal('temporal-2');
      // A member that ended itself meanwhile is started again, as its supervisor (compose: restart) would.
      const reason = cluster.members[1]!.exitReason();
      if (reason) {
        console.log(`temporal-2 ended while cut off (${reason}); started again`);
        cluster.startMember(2);
      }
      await waitForFrontend(cli, cluster.members[1]!.address, 120_000, cluster.members[1]);
      console.log(`temporal-2 serving ${((Date.now() - healedAt) / 1000).toFixed(1)} s after the heal`);
      return [
        ['while cut off', cutAt, healedAt],
        ['after the heal', healedAt, Date.now() + 15_000]
      ];
    });
    await expectNothingLost();
  }, 300_000);

  it('loses and duplicates no acknowledged write when FerretDB is paused (SIGSTOP) and resumed', async () => {
    const [ferretdb] = topology.hosts.db!.pids('ferretdb');
    expect(ferretdb).toBeDefined();
    await drive(`FerretDB on db paused (SIGSTOP) for ${PAUSED_S} s, then resumed`, async () => {
      const pausedAt = Date.now();
      process.kill(ferretdb!, 'SIGSTOP');
      try {
        await sleep(PAUSED_S * 1000);
      } finally {
        process.kill(ferretdb!, 'SIGCONT');
      }
      const resumedAt = Date.now();
      return [
        ['while paused', pausedAt, resumedAt],
        ['after it resumed', resumedAt, Date.now() + 15_000]
      ];
    });
    await expectNothingLost();
    succeeded = true;
  }, 300_000);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
