/**
 * npm run bench:heartbeat — a fleet of simulated nodes against the whole local stack (npm start: FerretDB on its
 * PostgreSQL, the Temporal dev server, the worker, the API), once per fleet size in BENCH_NODES (default `500`; the large run is
 * `500,2000,10000`), each size on a fresh stack:
 *
 *   1. registers the nodes (NODE_REVIEW_REQUIRED=false: online with their first heartbeat), then waits (bounded,
 *      BENCH_SETTLE_S, default 900) until every registration is recorded (its ledger event) and the sampled node
 *      workflows show their first state: the mass online below is a hub restart's, which meets an established fleet,
 *      not one whose registrations' workflow tasks are still being worked off (runs before session 18 measured both
 *      at once);
 *      then restarts the API process (BENCH_RESTART_API, default on), so the mass online below meets an API process
 *      that knows no node yet, as after a hub restart;
 *   2. realistic mode: every node beats every BENCH_BEAT_S (15, or a third of a shorter window) s from its own loop (random phase), as a real node
 *      does; a bounded warm-up (BENCH_WARMUP_S, default 2 × NODE_OFFLINE_AFTER_S + 60) waits until every node is
 *      online (a mass online: all nodes at once) and fails with a clear message if they are not;
 *   3. measures for BENCH_SECONDS (60): heartbeats/s, p50/p99, errors; false offline transitions (ledger events
 *      online → offline of nodes that kept beating); Temporal history events per second and per node per hour
 *      (from the Temporal API: historyLength of the sweepers and of a sample of BENCH_SAMPLE node workflows,
 *      before and after); CPU per process (FerretDB, Temporal, API, worker) from /proc/<pid>/stat, and the CPU
 *      cost of one heartbeat (all four together ÷ heartbeats); database commands per heartbeat by command (FerretDB's
 *      debug listener) and PostgreSQL's transactions and per-collection scans and writes;
 *   4. BENCH_STOP (default 10 % of the nodes, at most 1,000) fall silent at once while the others keep beating:
 *      delay from each stopped node's last acknowledged heartbeat to its recorded offline change (target
 *      NODE_OFFLINE_AFTER_S + 2 s), nodes detected, false offline transitions.
 * The heartbeats go through undici's request API over keep-alive connections: BENCH_CONNECTIONS `0` (the default)
 * opens one whenever every open one is busy and reuses idle ones, so a node's heartbeat never waits behind another
 * node's, as behind the load balancer (docker/nginx-lb.conf: nginx opens an upstream connection per request in
 * flight; `keepalive` only caps the idle ones it keeps); a number N shares a pool of N connections (512 was the
 * default until session 19: when answers slowed to ~2 s in a mass online, 512 connections carried ~250 of the 667
 * heartbeats/s offered, the rest queued in the client for up to 70 s, and the hub rightly judged those nodes silent).
 * With answers in milliseconds the connections open stay few (the mass online prints the most outstanding at once).
 * At the end, the cost per heartbeat at the largest size over the smallest (flat is 1.0). Prints figures; asserts
 * nothing. BENCH_OFFLINE_AFTER_S (default 30) sets NODE_OFFLINE_AFTER_S. The machine's other load makes every
 * figure noisy: run it when the machine is otherwise idle and say so beside the figures.
 * The stack's output goes to a log file (stack-log.ts), named when the bench fails and at its end.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { MongoClient } from 'mongodb';
import { Agent } from 'undici';
import { StackLog } from './stack-log';
import { BenchStack, stackPids, startBenchStack } from './stack';
import { presenceHorizon, PresenceStore, PRESENCE_SHARDS } from '../../store/federation/presence';
import { nodeSweeperWorkflowId, NODE_SWEEPER_GROUPS } from '../../contracts/federation/node-lifecycle-sweeper.contract';

const SIZES = (process.env.BENCH_NODES ?? '500')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => n > 0);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const OFFLINE_AFTER_S = Number(process.env.BENCH_OFFLINE_AFTER_S ?? 30);
/** A node beats well inside the offline window: 15 s, or a third of a shorter window. */
const BEAT_S = Number(process.env.BENCH_BEAT_S ?? Math.min(15, OFFLINE_AFTER_S / 3));
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2 * OFFLINE_AFTER_S + 60);
const SAMPLE = Number(process.env.BENCH_SAMPLE ?? 100);
const SETTLE_S = Number(process.env.BENCH_SETTLE_S ?? 900);
const CLK_TCK = 100;
/** Registrations in flight at once (the 10,000-node run spends minutes registering). */
const REGISTER_CONCURRENCY = Number(process.env.BENCH_REGISTER_CONCURRENCY ?? 16);
/** Keep-alive connections the heartbeats share (0: as many as the heartbeats in flight need). */
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 0);
/** The API process is restarted before the mass online (a hub restart: it meets the fleet knowing no node yet); 0: not. */
const RESTART_API = process.env.BENCH_RESTART_API !== '0';

interface Node {
  node_id: string;
  api_key: string;
}

/** A heartbeat of the mass online slower than a second: where the hub says its time went (Server-Timing). */
interface SlowBeat {
  lat: number;
  auth: number;
  presence: number;
}

/**
 * The mass online's heartbeats as the nodes see them: latencies, the nodes whose acknowledged heartbeats were more
 * than the window apart (client queueing or a slow answer: silent as far as the hub can tell), the most outstanding
 * at once, and the slow ones.
 */
interface MassOnlineBeats {
  lat: number[];
  late: Set<string>;
  maxInFlight: number;
  slow: SlowBeat[];
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

/** CPU seconds (user + system) of a process and its children, from /proc. */
function cpuSeconds(pid: number): number {
  let total = 0;
  const stat = (p: number) => {
    try {
      const fields = fs
        .readFileSync(`/proc/${p}/stat`, 'utf8')
        .replace(/^.*\) /, '')
        .split(' ');
      return { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / CLK_TCK };
    } catch {
      return null;
    }
  };
  const own = stat(pid);
  if (!own) return 0;
  total += own.cpu;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = stat(Number(entry));
    if (s && s.ppid === pid) total += s.cpu;
  }
  return total;
}

/**
 * Stops the stack's API process (SIGTERM: it drains and exits) and waits for the launcher's supervisor to start it
 * again and for it to answer /health: the mass online then meets an API process that knows no node yet, as after a
 * hub restart (its node cache loads at start).
 */
async function restartApi(stack: BenchStack): Promise<string> {
  let before = stackPids(stack.dataDir).api;
  // No pid file: the launcher is stopping (it removes them first, then drains the worker, which can take tens of
  // seconds) or never wrote one. Name the stack's exit when that is the cause, as every other step of the bench does.
  for (const waitedFrom = Date.now(); !before; before = stackPids(stack.dataDir).api) {
    stack.alive();
    if (Date.now() - waitedFrom > 120_000)
      throw new Error("restarting the API: no api.pid in the stack's run dir for 120 s");
    await new Promise((r) => setTimeout(r, 250));
  }
  const t = Date.now();
  process.kill(before, 'SIGTERM');
  for (;;) {
    stack.alive();
    const now = stackPids(stack.dataDir).api;
    if (
      now &&
      now !== before &&
      (await fetch(`${stack.base}/health`).then(
        (r) => r.ok,
        () => false
      ))
    ) {
      return `API process restarted before the mass online (pid ${before} → ${now}, answering again ${((Date.now() - t) / 1000).toFixed(1)} s after SIGTERM; BENCH_RESTART_API=0 keeps it)`;
    }
    if (Date.now() - t > 120_000)
      throw new Error('restarting the API: it did not answer /health within 120 s of SIGTERM');
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Database work as PostgreSQL counts it (null where psql cannot read it): committed transactions
 * (FerretDB runs each command in one or more) and, per table (FerretDB names a collection's table
 * `<collection>_<hash>`), reads (sequential + index scans) and rows written.
 */
interface DbWork {
  xacts: number;
  tables: Map<string, { reads: number; writes: number; rowsScanned: number }>;
}
function dbWork(stack: BenchStack): DbWork | null {
  const port = stack.ports.POSTGRES_PORT;
  if (!port) return null;
  const psql = (sql: string) =>
    execFileSync('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'ferret', '-d', 'postgres', '-Atc', sql], {
      encoding: 'utf8'
    });
  try {
    const xacts = Number(psql(`select xact_commit from pg_stat_database where datname = 'postgres'`).trim());
    const tables = new Map<string, { reads: number; writes: number; rowsScanned: number }>();
    for (const line of psql(
      `select relname, coalesce(seq_scan,0) + coalesce(idx_scan,0), n_tup_ins + n_tup_upd + n_tup_del, coalesce(seq_tup_read,0) from pg_stat_user_tables`
    )
      .trim()
      .split('\n')) {
      const [name, reads, writes, scanned] = line.split('|');
      if (!name) continue;
      // FerretDB names a collection's table after it with every character that is not a letter, and each character
      // following one that is not a letter, digits included, replaced by `_` (`node_presence_07` → `node_presence___`),
      // plus `_<fnv32a of the name>`.
      const collection = name
        .replace(/_[0-9a-f]{8}$/, '')
        .replace(/^node_presence(_samples)?_(\d\d|__)$/, 'node_presence$1_<ss>')
        .replace(/^node_changes_(\d\d|__)$/, 'node_changes_<ss>');
      const t = tables.get(collection) ?? { reads: 0, writes: 0, rowsScanned: 0 };
      t.reads += Number(reads);
      t.writes += Number(writes);
      t.rowsScanned += Number(scanned);
      tables.set(collection, t);
    }
    return { xacts, tables };
  } catch {
    return null;
  }
}

/** PostgreSQL transactions per heartbeat, and the collections read or written most, between two dbWork readings. */
function describeDbWork(
  before: DbWork | null,
  after: DbWork | null,
  heartbeats: number,
  elapsed: number
): { perHb: number | null; line: string } {
  if (!before || !after)
    return { perHb: null, line: "database statements: not counted (psql could not read PostgreSQL's statistics)" };
  const xacts = after.xacts - before.xacts;
  const rows = [...after.tables].map(([name, a]) => {
    const b = before.tables.get(name) ?? { reads: 0, writes: 0, rowsScanned: 0 };
    return { name, reads: a.reads - b.reads, writes: a.writes - b.writes, rowsScanned: a.rowsScanned - b.rowsScanned };
  });
  const scanned = rows
    .filter((r) => r.rowsScanned > 0)
    .sort((x, y) => y.rowsScanned - x.rowsScanned)
    .slice(0, 4);
  const top = rows
    .filter((r) => r.reads + r.writes > 0)
    .sort((x, y) => y.reads + y.writes - (x.reads + x.writes))
    .slice(0, 6);
  const perHb = xacts / Math.max(1, heartbeats);
  return {
    perHb,
    line: `database work (PostgreSQL behind FerretDB): ${(xacts / elapsed).toFixed(0)} transactions/s, ${perHb.toFixed(2)} per heartbeat; per collection, table scans / rows written per heartbeat: ${top.map((r) => `${r.name} ${(r.reads / Math.max(1, heartbeats)).toFixed(2)}/${(r.writes / Math.max(1, heartbeats)).toFixed(2)}`).join(', ')}; documents read by table scans per heartbeat: ${scanned.map((r) => `${r.name} ${(r.rowsScanned / Math.max(1, heartbeats)).toFixed(2)}`).join(', ') || 'none'}`
  };
}

/** FerretDB's requests by command so far, from its debug listener (FERRETDB_DEBUG_PORT); null when unreadable. */
async function ferretCommands(port: number): Promise<Map<string, number> | null> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/debug/metrics`)).text();
    const counts = new Map<string, number>();
    for (const m of text.matchAll(/^ferretdb_client_requests_total\{command="([^"]+)"[^}]*\} (\S+)$/gm))
      counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + Number(m[2]));
    return counts;
  } catch {
    return null;
  }
}

/** Database commands per heartbeat between two ferretCommands readings, busiest first. */
function describeCommands(
  before: Map<string, number> | null,
  after: Map<string, number> | null,
  heartbeats: number,
  elapsed: number
): string {
  if (!before || !after) return "database commands: not counted (FerretDB's debug listener did not answer)";
  const rows = [...after]
    .map(([command, n]) => ({ command, n: n - (before.get(command) ?? 0) }))
    .filter((r) => r.n > 0)
    .sort((a, b) => b.n - a.n);
  const total = rows.reduce((s, r) => s + r.n, 0);
  return `database commands (FerretDB): ${(total / elapsed).toFixed(0)}/s, ${(total / Math.max(1, heartbeats)).toFixed(2)} per heartbeat: ${rows
    .slice(0, 8)
    .map((r) => `${r.command} ${(r.n / Math.max(1, heartbeats)).toFixed(3)}`)
    .join(', ')}`;
}

interface SizeFigures {
  nodes: number;
  hbPerSec: number;
  cpuMsPerHb: number;
  dbPerHb: number | null;
}

async function runSize(nodesWanted: number, log: StackLog): Promise<SizeFigures> {
  console.log(
    `\n== ${nodesWanted} nodes, each beating every ${BEAT_S} s (about ${(nodesWanted / BEAT_S).toFixed(0)} heartbeats/s), NODE_OFFLINE_AFTER_S=${OFFLINE_AFTER_S}`
  );
  let stack: BenchStack | null = null;
  let mongo: MongoClient | null = null;
  let connection: Connection | null = null;
  const running = { on: true };
  const loops: Promise<void>[] = [];
  const heartbeats = new Agent({ connections: CONNECTIONS > 0 ? CONNECTIONS : null, keepAliveTimeout: 60_000 });
  try {
    stack = await startBenchStack('hb', log, {
      NODE_REVIEW_REQUIRED: 'false',
      NODE_OFFLINE_AFTER_S: String(OFFLINE_AFTER_S),
      REGISTER_RATE_LIMIT_PER_MIN: '100000000'
    });
    const { base } = stack;
    mongo = await MongoClient.connect(stack.mongoUri);
    const db = mongo.db(stack.dbName);
    connection = await Connection.connect({ address: `127.0.0.1:${stack.ports.TEMPORAL_PORT}` });
    const temporal = new Client({ connection });

    const t0 = Date.now();
    const nodes: Node[] = [];
    let requested = 0;
    await Promise.all(
      Array.from({ length: REGISTER_CONCURRENCY }, async () => {
        while (requested++ < nodesWanted) {
          const res = await fetch(`${base}/a2a/register`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ name: `bench-${requested}`, brand: { code: 'custom' }, instance: { memory_gb: 8 } })
          });
          if (res.status !== 201) throw new Error(`register: ${res.status} ${await res.text()}`);
          nodes.push((await res.json()) as Node);
        }
      })
    );
    console.log(`registered ${nodes.length} nodes in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const sampleIds = nodes
      .filter((_, i) => i % Math.max(1, Math.floor(nodes.length / SAMPLE)) === 0)
      .slice(0, SAMPLE)
      .map((n) => n.node_id);

    // Settle: every registration recorded (ledger) and the sampled workflows past their first workflow task.
    const registeredAt = Date.now();
    for (;;) {
      stack.alive();
      const recorded = await db.collection('ledger').countDocuments({ key: 'hub.node.state_changed' });
      let shown = 0;
      if (recorded >= nodes.length) {
        for (const id of sampleIds) {
          const d = await temporal.workflow
            .getHandle(`node/${id}`)
            .describe()
            .catch(() => null);
          if ((d?.searchAttributes as Record<string, unknown[]> | undefined)?.NodeState?.[0]) shown++;
        }
        if (shown === sampleIds.length) break;
      }
      if (Date.now() - registeredAt > SETTLE_S * 1000) {
        throw new Error(
          `settle: ${recorded} of ${nodes.length} registrations recorded, ${shown} of ${sampleIds.length} sampled workflows showing a state, ${SETTLE_S} s after the last registration (BENCH_SETTLE_S)`
        );
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
    console.log(
      `registrations settled (every one in the ledger, the sampled workflows showing their state) ${((Date.now() - registeredAt) / 1000).toFixed(1)} s after the last registration`
    );

    if (RESTART_API) console.log(await restartApi(stack));
    const origin = new URL(base).origin;
    const lastAck = new Map<string, number>();
    const stopped = new Set<string>();
    let recording: { lat: number[]; errors: number } | null = null;
    let massOnline: MassOnlineBeats | null = { lat: [], late: new Set(), maxInFlight: 0, slow: [] };
    let inFlight = 0;
    const beat = async (node: Node) => {
      const t = Date.now();
      let ok = false;
      inFlight++;
      if (massOnline && inFlight > massOnline.maxInFlight) massOnline.maxInFlight = inFlight;
      try {
        const res = await heartbeats.request({
          origin,
          path: '/a2a/heartbeat',
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-external-node': node.node_id,
            'x-external-key': node.api_key
          },
          body: JSON.stringify({
            resources: { cpu_percent: 35, memory_used_gb: 4, gpu_count: 1, gpu_util_percent: 50 },
            performance: { latency_ms: 120, tasks_done: 3 }
          })
        });
        await res.body.dump();
        ok = res.statusCode === 200;
        const took = Date.now() - t;
        if (massOnline && ok && took > 1000) {
          const timing = String(res.headers['server-timing'] ?? '');
          const dur = (name: string) => Number(new RegExp(`${name};dur=([0-9.]+)`).exec(timing)?.[1] ?? NaN);
          massOnline.slow.push({ lat: took, auth: dur('auth'), presence: dur('presence') });
        }
        if (ok) {
          const prev = lastAck.get(node.node_id);
          if (massOnline && prev !== undefined && Date.now() - prev > OFFLINE_AFTER_S * 1000)
            massOnline.late.add(node.node_id);
          lastAck.set(node.node_id, Date.now());
        }
        massOnline?.lat.push(took);
      } catch {
        ok = false;
      } finally {
        inFlight--;
      }
      if (recording) {
        recording.lat.push(Date.now() - t);
        if (!ok) recording.errors++;
      }
    };
    // Each node its own loop: first beat at a random point of its period, then every BEAT_S (measured from the
    // start of the previous beat, as a node's timer would).
    const t1 = Date.now();
    // Where the machine's CPU goes during the mass online (the sweepers' writes compete with everything else).
    const moPids = stackPids(stack.dataDir);
    const moCpu0 = Object.fromEntries(Object.entries(moPids).map(([k, pid]) => [k, cpuSeconds(pid)]));
    // And where the database's work goes (the same counters as the window's).
    const moDb0 = dbWork(stack);
    const moCommands0 = await ferretCommands(stack.ports.FERRETDB_DEBUG_PORT);
    for (const node of nodes) {
      loops.push(
        (async () => {
          await new Promise((r) => setTimeout(r, Math.random() * BEAT_S * 1000));
          while (running.on && !stopped.has(node.node_id)) {
            const start = Date.now();
            await beat(node);
            const rest = BEAT_S * 1000 - (Date.now() - start);
            if (rest > 0) await new Promise((r) => setTimeout(r, rest));
          }
        })()
      );
    }

    // How far behind the API processes' presence writes are, the most seen per phase: by their presence clocks
    // (the least of them), and by what the sweepers judge with, each shard's horizon (per process the later of its
    // clock and its document of the shard; the worst shard).
    const clockLag = { phase: 'warm-up', max: new Map<string, number>(), shardMax: new Map<string, number>() };
    const presence = new PresenceStore(db);
    void (async () => {
      while (running.on) {
        const readAt = Date.now();
        const liveMs = OFFLINE_AFTER_S * 1000;
        const clocks = await presence.readClocks().catch(() => []);
        if (clocks.some((c) => readAt - c.written_at < liveMs)) {
          const lag = readAt - presenceHorizon(clocks, readAt, liveMs);
          clockLag.max.set(clockLag.phase, Math.max(clockLag.max.get(clockLag.phase) ?? 0, lag));
          // One shard at a time, as the sweepers read them (reading all 16 at once would add a burst of load).
          for (let shard = 0; shard < PRESENCE_SHARDS; shard++) {
            const read = await presence.readSeen(shard).catch(() => null);
            if (!read) continue;
            const shardLag = readAt - presenceHorizon(clocks, readAt, liveMs, read.complete);
            clockLag.shardMax.set(clockLag.phase, Math.max(clockLag.shardMax.get(clockLag.phase) ?? 0, shardLag));
          }
        }
        await new Promise((r) => setTimeout(r, Math.max(500, 1000 - (Date.now() - readAt))));
      }
    })();
    const lagLine = (phase: string) =>
      `presence writes at most ${((clockLag.max.get(phase) ?? 0) / 1000).toFixed(1)} s behind by the processes' clocks, ${((clockLag.shardMax.get(phase) ?? 0) / 1000).toFixed(1)} s by the worst shard's horizon (${phase})`;
    // Bounded warm-up: all nodes come online at once (a mass online).
    for (;;) {
      stack.alive();
      // Bounded even if the database stops answering (the warm-up must end with its message).
      // The nodes not online yet are counted (FerretDB hands PostgreSQL the state filter and converts only the
      // documents that match): counting the online ones had FerretDB convert almost every node document of the
      // fleet every 2 s near the end, the bench's own load in the very phase it measures (estimated from the 244 ms
      // a 10,000-document range read takes, node-changes-ring.ts: some 15 % of FerretDB's time in a 10,000-node
      // mass online; not measured apart). The bench's nodes are never pending review (review off), so none left
      // offline means all online.
      const count = (state: string) =>
        Promise.race([
          db.collection('nodes').countDocuments({ state }),
          new Promise<number>((_, reject) =>
            setTimeout(
              () =>
                reject(
                  new Error(
                    `warm-up: the database did not answer a count of ${state} nodes within 30 s (${((Date.now() - t1) / 1000).toFixed(0)} s into the warm-up)`
                  )
                ),
              30_000
            )
          )
        ]);
      const offline = await count('offline');
      const online = offline === 0 ? await count('online') : nodes.length - offline;
      if (offline === 0 && online >= nodes.length) break;
      if (Date.now() - t1 > WARMUP_S * 1000) {
        throw new Error(
          `warm-up: only ${online} of ${nodes.length} nodes online after ${WARMUP_S} s of every node beating every ${BEAT_S} s (BENCH_WARMUP_S); the hub cannot keep this fleet online on this machine`
        );
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
    console.log(
      `mass online: all ${nodes.length} nodes online ${((Date.now() - t1) / 1000).toFixed(1)} s after the first heartbeats (settle target ${2 * OFFLINE_AFTER_S} s)`
    );
    const moSeconds = (Date.now() - t1) / 1000;
    console.log(
      `  CPU meanwhile (% of one core): ${Object.keys(moPids)
        .sort()
        .map((k) => `${k} ${(((cpuSeconds(moPids[k]!) - moCpu0[k]!) / moSeconds) * 100).toFixed(0)}%`)
        .join(', ')}`
    );
    {
      const beats = massOnline.lat.length;
      console.log(`  ${describeDbWork(moDb0, dbWork(stack), beats, moSeconds).line}`);
      console.log(
        `  ${describeCommands(moCommands0, await ferretCommands(stack.ports.FERRETDB_DEBUG_PORT), beats, moSeconds)}`
      );
    }
    // Every node beats through the mass online: any online → offline among these is a false transition.
    console.log(
      `transitions recorded during the mass online: ${await transitionsSince(db, new Date(t1).toISOString())}`
    );
    const mo: MassOnlineBeats = massOnline;
    massOnline = null;
    console.log(
      `heartbeats during the mass online: p50 ${pct(mo.lat, 50)} ms, p99 ${pct(mo.lat, 99)} ms, max ${mo.lat.reduce((a, b) => Math.max(a, b), 0)} ms, at most ${mo.maxInFlight} outstanding at once (sent, or waiting for a client connection); ${mo.late.size} nodes had acknowledged heartbeats more than ${OFFLINE_AFTER_S} s apart (silent as the hub saw them)`
    );
    if (mo.slow.length > 0) {
      const part = (f: (x: SlowBeat) => number) => mo.slow.map(f).filter((v) => Number.isFinite(v));
      console.log(
        `  of them ${mo.slow.length} took over 1 s; their time, p50 / p99: in the hub's authentication (node read, body) ${pct(
          part((x) => x.auth),
          50
        )} / ${pct(
          part((x) => x.auth),
          99
        )} ms, its presence write ${pct(
          part((x) => x.presence),
          50
        )} / ${pct(
          part((x) => x.presence),
          99
        )} ms, outside the hub's handler (client and server queues, connection set-up) ${pct(
          part((x) => x.lat - x.auth - x.presence),
          50
        )} / ${pct(
          part((x) => x.lat - x.auth - x.presence),
          99
        )} ms`
      );
    }

    // Measurement window.
    // The node workflows mirror the sweeper's transitions (NodeState search attribute): how far behind they are.
    const mirrorLine = async () => {
      let online = 0;
      for (const id of sampleIds) {
        const d = await temporal.workflow
          .getHandle(`node/${id}`)
          .describe()
          .catch(() => null);
        const v = (d?.searchAttributes as Record<string, unknown[]> | undefined)?.NodeState?.[0];
        if (v === 'online') online++;
      }
      const events = await db.collection('ledger').countDocuments({ key: 'hub.node.state_changed' });
      return `${online} of ${sampleIds.length} sampled node workflows show NodeState online; ${events} hub.node.state_changed ledger events`;
    };
    console.log(`Temporal mirror at the end of the mass online: ${await mirrorLine()}; ${lagLine('warm-up')}`);
    clockLag.phase = 'window';
    const historyOf = async () => {
      let nodesTotal = 0;
      for (const id of sampleIds)
        nodesTotal += (await temporal.workflow.getHandle(`node/${id}`).describe()).historyLength;
      let sweepers = 0;
      for (let g = 0; g < NODE_SWEEPER_GROUPS; g++)
        sweepers += await temporal.workflow
          .getHandle(nodeSweeperWorkflowId(process.env.TEMPORAL_TASK_QUEUE ?? 'zhongshu-hub', g))
          .describe()
          .then(
            (d) => d.historyLength,
            () => 0
          );
      return { nodesTotal, sweepers };
    };
    const pids = stackPids(stack.dataDir);
    const cpu0 = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
    const h0 = await historyOf();
    const db0 = dbWork(stack);
    const commands0 = await ferretCommands(stack.ports.FERRETDB_DEBUG_PORT);
    const since = new Date().toISOString();
    recording = { lat: [], errors: 0 };
    // The bench client shares the machine: its own CPU and event-loop delay are part of every latency it measures.
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const client0 = process.cpuUsage();
    const machine0 = machineCpu();
    const m0 = Date.now();
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const rec: { lat: number[]; errors: number } = recording;
    recording = null;
    const elapsed = (Date.now() - m0) / 1000;
    loopDelay.disable();
    const client1 = process.cpuUsage(client0);
    const machine1 = machineCpu();
    const cpu1 = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
    const db1 = dbWork(stack);
    const commands1 = await ferretCommands(stack.ports.FERRETDB_DEBUG_PORT);
    const h1 = await historyOf();
    stack.alive();
    const hbPerSec = rec.lat.length / elapsed;
    console.log(
      `heartbeats: ${hbPerSec.toFixed(0)}/s, p50 ${pct(rec.lat, 50)} ms, p99 ${pct(rec.lat, 99)} ms, ${rec.lat.length} requests, ${rec.errors} errors`
    );
    const machineTicks = machine1.total - machine0.total;
    const busy = (machine1.busy - machine0.busy) / machineTicks;
    const stolen = (machine1.steal - machine0.steal) / machineTicks;
    console.log(
      `bench client: ${(((client1.user + client1.system) / 1e6 / elapsed) * 100).toFixed(0)}% of a core, its event-loop delay p50 ${(loopDelay.percentile(50) / 1e6).toFixed(0)} ms, p99 ${(loopDelay.percentile(99) / 1e6).toFixed(0)} ms, max ${(loopDelay.max / 1e6).toFixed(0)} ms (in every latency above); the machine ${(busy * 100).toFixed(0)}% busy over its ${machine1.cores} cores, ${(stolen * 100).toFixed(0)}% stolen by the host`
    );
    const nodeEvents = ((h1.nodesTotal - h0.nodesTotal) / sampleIds.length) * nodes.length;
    const eventsPerSec = (nodeEvents + (h1.sweepers - h0.sweepers)) / elapsed;
    console.log(
      `Temporal history events: ${eventsPerSec.toFixed(1)}/s (${(nodeEvents / elapsed).toFixed(1)}/s in node workflows, extrapolated from ${sampleIds.length}; ${((h1.sweepers - h0.sweepers) / elapsed).toFixed(2)}/s in the sweepers), ${((eventsPerSec * 3600) / nodes.length).toFixed(2)} per node per hour`
    );
    let cpuTotal = 0;
    const parts: string[] = [];
    for (const k of Object.keys(pids).sort()) {
      const used = (cpu1[k]! - cpu0[k]!) / elapsed;
      cpuTotal += used;
      parts.push(`${k} ${(used * 100).toFixed(0)}%`);
    }
    const cpuMsPerHb = ((cpuTotal * elapsed) / Math.max(1, rec.lat.length)) * 1000;
    console.log(
      `CPU (% of one core): ${parts.join(', ')}; all ${(cpuTotal * 100).toFixed(0)}% → ${cpuMsPerHb.toFixed(2)} ms of CPU per heartbeat`
    );
    const work = describeDbWork(db0, db1, rec.lat.length, elapsed);
    console.log(work.line);
    console.log(describeCommands(commands0, commands1, rec.lat.length, elapsed));
    const falseDuring = await falseOfflines(db, since, stopped);
    console.log(`false offline transitions during the window: ${falseDuring}; ${lagLine('window')}`);
    clockLag.phase = 'mass silence';
    console.log(`Temporal mirror after the window: ${await mirrorLine()}`);

    // Mass silence.
    const stopCount = Number(process.env.BENCH_STOP ?? Math.min(1000, Math.ceil(nodes.length / 10)));
    const silent = nodes.slice(0, stopCount);
    for (const n of silent) stopped.add(n.node_id);
    const silentSince = new Date().toISOString();
    const stopAt = Date.now();
    const wait = (2 * OFFLINE_AFTER_S + 10) * 1000;
    let delays: number[] = [];
    while (Date.now() - stopAt < wait) {
      stack.alive();
      await new Promise((r) => setTimeout(r, 2000));
      const offline = await db
        .collection('nodes')
        .find({ state: 'offline' }, { projection: { _id: 1, state_changed_at: 1 } })
        .toArray();
      delays = offline
        .filter((d) => stopped.has(String(d._id)))
        .map((d) => (Date.parse(d.state_changed_at) - lastAck.get(String(d._id))!) / 1000);
      if (delays.length >= silent.length) break;
    }
    console.log(
      `mass silence: ${silent.length} nodes stopped at once; ${delays.length} offline within ${((Date.now() - stopAt) / 1000).toFixed(0)} s; delay after the last heartbeat p50 ${pct(delays, 50).toFixed(2)} s, max ${pct(delays, 100).toFixed(2)} s (target ≤ ${OFFLINE_AFTER_S + 2} s, settle ≤ ${2 * OFFLINE_AFTER_S} s)`
    );
    console.log(
      `false offline transitions while they settled: ${await falseOfflines(db, silentSince, stopped)}; ${lagLine('mass silence')}`
    );
    return { nodes: nodes.length, hbPerSec, cpuMsPerHb, dbPerHb: work.perHb };
  } finally {
    running.on = false;
    await Promise.race([Promise.all(loops), new Promise((r) => setTimeout(r, (BEAT_S + 5) * 1000))]);
    await heartbeats.close().catch(() => undefined);
    await connection?.close().catch(() => undefined);
    await mongo?.close().catch(() => undefined);
    await stack?.stop();
  }
}

/** Every node state change in the ledger (`hub.node.state_changed` events). */
async function stateChanges(
  db: ReturnType<MongoClient['db']>
): Promise<{ node_id: string; from: string | null; to: string; at: string }[]> {
  const events = await db
    .collection('ledger')
    .find({ key: 'hub.node.state_changed' }, { projection: { value_json: 1 } })
    .toArray();
  return events.map(
    (e) => JSON.parse(String(e.value_json)) as { node_id: string; from: string | null; to: string; at: string }
  );
}

/** The liveness transitions recorded since `since`, by direction, and the most any one node had. */
async function transitionsSince(db: ReturnType<MongoClient['db']>, since: string): Promise<string> {
  const byKind = new Map<string, number>();
  const perNode = new Map<string, number>();
  for (const v of await stateChanges(db)) {
    if (v.at < since || v.from === null) continue;
    byKind.set(`${v.from} → ${v.to}`, (byKind.get(`${v.from} → ${v.to}`) ?? 0) + 1);
    perNode.set(v.node_id, (perNode.get(v.node_id) ?? 0) + 1);
  }
  const kinds = [...byKind].map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  return `${kinds}; at most ${Math.max(0, ...perNode.values())} for one node`;
}

/** Ledger events online → offline since `since` of nodes that kept beating. */
async function falseOfflines(db: ReturnType<MongoClient['db']>, since: string, stopped: Set<string>): Promise<number> {
  return (await stateChanges(db)).filter(
    (v) => v.from === 'online' && v.to === 'offline' && v.at >= since && !stopped.has(v.node_id)
  ).length;
}

async function main(): Promise<void> {
  const log = new StackLog('heartbeat');
  console.log(
    `bench:heartbeat — fleets of ${SIZES.join(', ')} nodes, beat every ${BEAT_S} s, ${SECONDS} s window, NODE_OFFLINE_AFTER_S=${OFFLINE_AFTER_S}, heartbeats over ${CONNECTIONS > 0 ? `${CONNECTIONS} keep-alive connections` : 'as many keep-alive connections as are in flight'} (figures are noisy when the machine has other load)`
  );
  const figures: SizeFigures[] = [];
  try {
    for (const size of SIZES) figures.push(await runSize(size, log));
  } catch (err) {
    log.reportFailure(err);
    process.exit(1);
  }
  if (figures.length > 1) {
    const first = figures[0]!;
    const last = figures[figures.length - 1]!;
    console.log(
      `\ncost per heartbeat (CPU of FerretDB, Temporal, API and worker ÷ heartbeats), ${last.nodes} vs ${first.nodes} nodes: ${(last.cpuMsPerHb / first.cpuMsPerHb).toFixed(2)}x (${first.cpuMsPerHb.toFixed(2)} → ${last.cpuMsPerHb.toFixed(2)} ms; flat is 1.00x)`
    );
    if (first.dbPerHb !== null && last.dbPerHb !== null)
      console.log(
        `database transactions per heartbeat, ${last.nodes} vs ${first.nodes} nodes: ${(last.dbPerHb / first.dbPerHb).toFixed(2)}x (${first.dbPerHb.toFixed(2)} → ${last.dbPerHb.toFixed(2)})`
      );
  }
  log.reportSuccess();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

/** The machine's CPU time so far (/proc/stat, in ticks, all cores): busy (user, nice, system, irq, softirq), stolen by the host, total. */
function machineCpu(): { busy: number; steal: number; total: number; cores: number } {
  const lines = fs.readFileSync('/proc/stat', 'utf8').split('\n');
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = lines[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return {
    busy: user + nice + system + irq + softirq,
    steal,
    total: user + nice + system + idle + iowait + irq + softirq + steal,
    cores: lines.filter((l) => /^cpu\d/.test(l)).length
  };
}
