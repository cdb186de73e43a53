/**
 * npm run bench:hosts — bench:ledger's write lines and bench:heartbeat's fleet across test hosts (network namespaces
 * on this machine, as root: test/topology/hosts.ts), on a real Temporal cluster of two members (test/topology/
 * cluster.ts), through docker/nginx-lb.conf under Debian's nginx on `lb`, in one run and on one database:
 *
 *   1. one host: the API on `api-1` and the worker on `worker-1`, the balancer in front of `api-1` only;
 *   2. two hosts: `api-2` (sharing the ledger writer lease) and `worker-2` added, the balancer reloaded in front of
 *      both (nginx -s reload: no connection refused), the same fleet beating on.
 *
 * Before phase 1, BENCH_HOSTS_NODES (10,000) nodes register through the balancer (BENCH_HOSTS_REGISTER_CONCURRENCY,
 * 16, at once). Each phase, with the whole fleet beating every BENCH_HOSTS_BEAT_S (15) s (NODE_OFFLINE_AFTER_S is
 * BENCH_HOSTS_OFFLINE_AFTER_S, 30):
 *   - the fleet online: in phase 1 a mass online (every node's first beats), in phase 2 the nodes silenced in phase 1
 *     beating again; when `/a2a/dashboard` counts them all online, and when the Temporal mirror does (the count of
 *     running node workflows whose `NodeState` is `online`, the query an operator runs in the Web UI), at most
 *     BENCH_HOSTS_MIRROR_WAIT_S (900) s;
 *   - BENCH_HOSTS_SECONDS (60) s of beats: heartbeats/s, p50/p99, refusals, the fewest nodes online meanwhile;
 *   - bench:ledger's write lines (POST /api/report/truth with Idempotency-Keys, from 1 DID and from 16, at
 *     concurrency 1, 16 and 64, BENCH_HOSTS_OPS (600) writes each, after 200 unmeasured), with the fleet beating;
 *   - a mass silence: BENCH_HOSTS_STOP (10 % of the nodes) stop beating at once; when the dashboard counts them
 *     offline, and when the mirror does.
 * Then each figure of phase 2 over phase 1. The hosts share this machine's cores (two here): the ratio says what a
 * second API and worker cost or give on the same cores, not the speedup of separate machines.
 * Prints figures; asserts nothing; tears every host down at its end, on failure and on Ctrl-C.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { ServerHandle, sleep } from '../../scripts/stack/process';
import { findNginx } from '../../scripts/stack/nginx';
import { registerDid } from '../support/credentials';
import { RegisteredNode, registerNode } from '../support/federation';
import { renderApiLb, startApiLb } from './api-lb';
import { Fleet, percentile } from './bench-fleet';
import {
  hubEnv,
  makeRoot,
  startDbAndTemporal,
  startHubProcess,
  temporalTools,
  waitForPoller,
  waitHealthy
} from './cluster';
import { cannotMakeHosts, createTopology, Topology } from './hosts';
import { request } from './load';

const num = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name}: expected a number, got ${process.env[name]}`);
  return value;
};
const NODES = Math.max(10, num('BENCH_HOSTS_NODES', 10_000));
const BEAT_S = num('BENCH_HOSTS_BEAT_S', 15);
const OFFLINE_AFTER_S = num('BENCH_HOSTS_OFFLINE_AFTER_S', 30);
const SECONDS = num('BENCH_HOSTS_SECONDS', 60);
const OPS = Math.max(1, num('BENCH_HOSTS_OPS', 600));
const WARMUP_OPS = num('BENCH_HOSTS_WARMUP_OPS', 200);
const CONCURRENCY = (process.env.BENCH_HOSTS_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const DIDS = [1, 16];
const STOP = Math.max(1, num('BENCH_HOSTS_STOP', Math.min(1_000, Math.floor(NODES / 10))));
const MIRROR_WAIT_S = num('BENCH_HOSTS_MIRROR_WAIT_S', 900);
const REGISTER_CONCURRENCY = Math.max(1, num('BENCH_HOSTS_REGISTER_CONCURRENCY', 16));
/** Answers a client retries with the same Idempotency-Key. */
const RETRYABLE = new Set([0, 429, 502, 503, 504]);

const HOSTS = ['db', 'temporal-1', 'temporal-2', 'temporal-lb', 'api-1', 'api-2', 'worker-1', 'worker-2', 'lb'];

interface WriteLine {
  name: string;
  perSecond: number;
  p50: number;
  p99: number;
  retried: number;
}

interface PhaseFigures {
  online: string;
  beats: ReturnType<Fleet['figures']> & { fewestOnline: number };
  lines: WriteLine[];
  silence: string;
}

async function main(): Promise<void> {
  const refused = cannotMakeHosts();
  const nginxBin = findNginx(process.env.NGINX_BIN ?? '/usr/sbin/nginx');
  if (refused || !nginxBin) throw new Error(`bench:hosts cannot run here: ${refused ?? 'nginx is not installed'}`);
  console.log(
    `bench:hosts — ${NODES} nodes beating every ${BEAT_S} s (offline after ${OFFLINE_AFTER_S} s) and bench:ledger's ` +
      `write lines (${OPS} writes each) through the balancer, one API host and worker, then two; a real Temporal ` +
      `cluster of two members; every host a network namespace on this machine's ${os.cpus().length} cores`
  );
  const started = Date.now();
  const tools = await temporalTools();
  const root = makeRoot('bench-hosts-');
  let topology: Topology | null = null;
  let fleet: Fleet | null = null;
  let connection: Connection | null = null;
  const stopAll = async () => {
    await fleet?.close().catch(() => undefined);
    await connection?.close().catch(() => undefined);
    await topology?.teardown();
  };
  process.once('SIGINT', () => {
    console.log('\ninterrupted: tearing the hosts down');
    void stopAll().finally(() => {
      fs.rmSync(root, { recursive: true, force: true });
      process.exit(130);
    });
  });
  try {
    topology = await createTopology(HOSTS);
    const cluster = await startDbAndTemporal({ topology, root, tools: tools.tools, cli: tools.cli, nginxBin });
    const lbHost = topology.hosts.lb!;
    const lbUrl = `http://${lbHost.ip}:8080`;
    const adminToken = `adm_bench_${randomBytes(16).toString('hex')}`;
    const taskQueue = `zhbench-${randomBytes(4).toString('hex')}`;
    const env = hubEnv(
      { ...cluster, dbName: `zhbench_${randomBytes(4).toString('hex')}`, taskQueue, adminToken },
      {
        LEDGER_FORWARD_SECRET: `lfs_${randomBytes(24).toString('hex')}`,
        TRUSTED_PROXIES: lbHost.ip,
        TRUTH_DAILY_QUOTA: '100000000',
        NODE_OFFLINE_AFTER_S: String(OFFLINE_AFTER_S)
      }
    );
    connection = await Connection.connect({ address: cluster.temporalAddress });
    const temporal = new Client({ connection });
    const startPair = async (api: string, worker: string) => {
      const a = startHubProcess('api', topology!.hosts[api]!, root, env, { PUBLIC_URL: lbUrl });
      const w: ServerHandle = startHubProcess('worker', topology!.hosts[worker]!, root, env);
      await Promise.all([waitHealthy(`${a.url}/health`, a), waitForPoller(connection!, taskQueue, w)]);
    };
    await startPair('api-1', 'worker-1');
    const lb = await startApiLb(nginxBin, lbHost, root, [topology.hosts['api-1']!.ip]);
    console.log(`hosts, cluster, one API, one worker and the balancer up in ${seconds(started)} s`);

    const dids = await Promise.all(
      Array.from({ length: Math.max(...DIDS) }, (_, i) => registerDid(lbUrl, adminToken, `did:example:hosts${i}`))
    );
    const nodes = await registerFleet(lbUrl);
    fleet = new Fleet(lbUrl, nodes, BEAT_S * 1000);
    const mirror = (state: string) =>
      temporal.workflow
        .count(`WorkflowType = 'nodeLifecycleWorkflow' AND ExecutionStatus = 'Running' AND NodeState = '${state}'`)
        .then((c) => c.count);
    const dashboard = async (): Promise<{ online: number; offline: number }> => {
      const res = await request('GET', `${lbUrl}/a2a/dashboard`);
      if (res.status !== 200) return { online: -1, offline: -1 };
      return { online: res.body.by_state.online ?? 0, offline: res.body.by_state.offline ?? 0 };
    };
    const phase = async (
      label: string,
      tag: string,
      firstOnline: () => void,
      silenced: string[]
    ): Promise<PhaseFigures> => {
      console.log(`\n== ${label}`);
      const t0 = Date.now();
      firstOnline();
      const online = await untilBoth(
        t0,
        async () => (await dashboard()).online >= NODES,
        async () => (await mirror('online')) >= NODES
      );
      console.log(`  online: ${online}; at most ${fleet!.maxInFlight} beats in flight at once`);
      const w0 = Date.now();
      let fewestOnline = NODES;
      while (Date.now() < w0 + SECONDS * 1000) {
        fewestOnline = Math.min(fewestOnline, (await dashboard()).online);
        await sleep(2_000);
      }
      const beats = { ...fleet!.figures(w0, Date.now()), fewestOnline };
      console.log(
        `  beats: ${beats.perSecond.toFixed(0)}/s, p50 ${beats.p50} ms, p99 ${beats.p99} ms, ${beats.refused} refused [${beats.statuses}]; fewest online ${fewestOnline}`
      );
      const lines: WriteLine[] = [];
      await writeLine(lbUrl, dids, 16, WARMUP_OPS, `${tag}.warmup`);
      for (const d of DIDS)
        for (const c of CONCURRENCY) {
          const line = await writeLine(lbUrl, dids.slice(0, d), c, OPS, `${tag}.d${d}.c${c}`);
          lines.push(line);
          console.log(
            `  writes ${line.name}: ${line.perSecond.toFixed(0)}/s, p50 ${line.p50.toFixed(1)} ms, p99 ${line.p99.toFixed(1)} ms, ${line.retried} retried`
          );
        }
      const before = await dashboard();
      const offlineBefore = await mirror('offline');
      const s0 = Date.now();
      fleet!.silence(silenced);
      const silence = await untilBoth(
        s0,
        async () => (await dashboard()).offline >= before.offline + silenced.length,
        async () => (await mirror('offline')) >= offlineBefore + silenced.length
      );
      console.log(`  ${silenced.length} nodes silent: ${silence}`);
      return { online, beats, lines, silence };
    };

    const groupA = nodes.slice(0, STOP).map((n) => n.node_id);
    const groupB = nodes.slice(STOP, 2 * STOP).map((n) => n.node_id);
    const one = await phase('one API host, one worker', 'one', () => fleet!.start(), groupA);

    await startPair('api-2', 'worker-2');
    const { conf } = renderApiLb(
      path.join(root, 'lb'),
      lbHost.ip,
      ['api-1', 'api-2'].map((h) => topology!.hosts[h]!.ip)
    );
    fs.writeFileSync(path.join(root, 'lb', 'nginx.conf'), conf);
    lb.child.kill('SIGHUP');
    await sleep(2_000);
    const two = await phase('two API hosts, two workers', 'two', () => fleet!.resume(groupA), groupB);

    console.log(`\n== two hosts ÷ one (the same two cores: not a speedup)`);
    console.log(`| figure | one host | two hosts | two ÷ one |\n|---|---|---|---|`);
    const row = (name: string, a: number, b: number, unit = '') =>
      console.log(`| ${name} | ${a.toFixed(1)}${unit} | ${b.toFixed(1)}${unit} | ${(b / a).toFixed(2)}x |`);
    row('heartbeats/s', one.beats.perSecond, two.beats.perSecond);
    row('heartbeat p50', one.beats.p50, two.beats.p50, ' ms');
    row('heartbeat p99', one.beats.p99, two.beats.p99, ' ms');
    one.lines.forEach((line, i) => {
      const other = two.lines[i]!;
      row(`writes/s, ${line.name}`, line.perSecond, other.perSecond);
      row(`write p99, ${line.name}`, line.p99, other.p99, ' ms');
    });
    console.log(`\nonline: one host ${one.online}; two hosts ${two.online}`);
    console.log(`silence: one host ${one.silence}; two hosts ${two.silence}`);
    console.log(`\nbench:hosts done in ${seconds(started)} s`);
  } finally {
    await stopAll();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

/** Registers the fleet through the balancer, REGISTER_CONCURRENCY at once (429s waited out). */
async function registerFleet(lbUrl: string): Promise<RegisteredNode[]> {
  const t0 = Date.now();
  const nodes: RegisteredNode[] = new Array(NODES);
  let next = 0;
  await Promise.all(
    Array.from({ length: REGISTER_CONCURRENCY }, async () => {
      for (let i = next++; i < NODES; i = next++) {
        for (let attempt = 0; ; attempt++) {
          try {
            nodes[i] = await registerNode(lbUrl, `hosts-node-${i}`);
            break;
          } catch (err) {
            if (attempt >= 20) throw err;
            await sleep(1_000);
          }
        }
        if ((i + 1) % 1000 === 0) console.log(`  registered ${i + 1}/${NODES} in ${seconds(t0)} s`);
      }
    })
  );
  console.log(`registered ${NODES} nodes in ${seconds(t0)} s (${(NODES / ((Date.now() - t0) / 1000)).toFixed(0)}/s)`);
  return nodes;
}

/** `ops` truth writes at `concurrency`, the DIDs in turn, each retried with its Idempotency-Key until acknowledged. */
async function writeLine(
  url: string,
  dids: string[],
  concurrency: number,
  ops: number,
  name: string
): Promise<WriteLine> {
  const latencies: number[] = [];
  let retried = 0;
  let next = 0;
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let n = next++; n < ops; n = next++) {
        const start = performance.now();
        for (let attempt = 0; ; attempt++) {
          const res = await request('POST', `${url}/api/report/truth`, {
            headers: { 'x-did': dids[n % dids.length]!, 'idempotency-key': `${name}.${n}` },
            body: { key: `bench.hosts.${name}.${n}`, value: { n } }
          });
          if (res.status === 200) break;
          if (!RETRYABLE.has(res.status) || attempt >= 50)
            throw new Error(`write ${name} ${n}: ${res.status} ${JSON.stringify(res.body)}`);
          retried++;
          await sleep(res.status === 429 ? 1_000 : 200);
        }
        latencies.push(performance.now() - start);
      }
    })
  );
  const s = (Date.now() - t0) / 1000;
  return {
    name: `${dids.length === 1 ? '1 DID' : `${dids.length} DIDs`}, c=${concurrency}`,
    perSecond: ops / s,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    retried
  };
}

/** Polls both conditions every 2 s from `t0`; says when each held (s after t0), the mirror at most MIRROR_WAIT_S. */
async function untilBoth(t0: number, api: () => Promise<boolean>, mirror: () => Promise<boolean>): Promise<string> {
  let apiAt: number | null = null;
  let mirrorAt: number | null = null;
  while (apiAt === null || mirrorAt === null) {
    const now = Date.now();
    if (apiAt === null && (await api())) apiAt = now;
    if (mirrorAt === null && (await mirror().catch(() => false))) mirrorAt = now;
    if (now - t0 > MIRROR_WAIT_S * 1000) break;
    await sleep(2_000);
  }
  const at = (t: number | null) => (t === null ? `not within ${MIRROR_WAIT_S} s` : `${((t - t0) / 1000).toFixed(1)} s`);
  const lag =
    apiAt !== null && mirrorAt !== null ? `; the mirror ${((mirrorAt - apiAt) / 1000).toFixed(1)} s behind` : '';
  return `the API after ${at(apiAt)}, NodeState in Temporal after ${at(mirrorAt)}${lag}`;
}

const seconds = (since: number) => ((Date.now() - since) / 1000).toFixed(1);

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  }
);
