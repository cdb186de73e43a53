/**
 * npm run bench:heartbeat — N simulated nodes heartbeating in parallel against the whole local stack (npm start:
 * FerretDB, Temporal dev server, worker, API), then offline detection for nodes that stop.
 *
 *   1. registers BENCH_NODES nodes (NODE_REVIEW_REQUIRED=false, so they go online with their first heartbeat),
 *      lets every node beat once per OFFLINE_AFTER_S / 6 s and waits until every node is online (the time this
 *      takes is printed: it is the cost of N state changes, each a workflow step and a ledger event, not of
 *      heartbeats);
 *   2. baseline: GET /health at the same concurrency for BENCH_SECONDS (the bare HTTP cost on this machine);
 *   3. sustained heartbeats for BENCH_SECONDS at BENCH_CONCURRENCY (default: BENCH_NODES, every simulated node
 *      its own client, heartbeating again as soon as it has its answer): heartbeats/s, errors, p50/p99;
 *   4. BENCH_STOP nodes stop; the rest keep beating every few seconds; for each stopped node the delay from its
 *      last acknowledged heartbeat to its recorded offline change (target: NODE_OFFLINE_AFTER_S + 2 s), and any
 *      node that went offline although it kept beating (must be none).
 * Prints figures and ratios; asserts nothing. BENCH_OFFLINE_AFTER_S (default 90) sets NODE_OFFLINE_AFTER_S.
 * The stack's output goes to a log file (stack-log.ts), named when the bench fails and at its end.
 */
import { MongoClient } from 'mongodb';
import { StackLog } from './stack-log';
import { BenchStack, startBenchStack } from './stack';

const NODES = Number(process.env.BENCH_NODES ?? 500);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? NODES);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const STOP = Number(process.env.BENCH_STOP ?? 50);
const OFFLINE_AFTER_S = Number(process.env.BENCH_OFFLINE_AFTER_S ?? 90);

interface Figures {
  ops: number;
  errors: number;
  perSec: number;
  p50: number;
  p99: number;
}

async function load(seconds: number, concurrency: number, op: (i: number) => Promise<boolean>): Promise<Figures> {
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const end = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        const i = next++;
        const t0 = process.hrtime.bigint();
        const ok = await op(i).catch(() => false);
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
        if (!ok) errors++;
      }
    })
  );
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return { ops: latencies.length, errors, perSec: latencies.length / elapsed, p50: pct(50), p99: pct(99) };
}

const fmt = (f: Figures) => `${f.perSec.toFixed(0).padStart(6)} req/s   p50 ${f.p50.toFixed(2).padStart(7)} ms   p99 ${f.p99.toFixed(2).padStart(7)} ms   ${f.ops} requests, ${f.errors} errors`;

async function main(): Promise<void> {
  const log = new StackLog('heartbeat');
  console.log(`bench:heartbeat — ${NODES} nodes, concurrency ${CONCURRENCY}, ${SECONDS} s per phase, NODE_OFFLINE_AFTER_S=${OFFLINE_AFTER_S}`);
  let stack: BenchStack | null = null;
  let failure: unknown = null;
  try {
    stack = await startBenchStack('hb', log, {
      NODE_REVIEW_REQUIRED: 'false',
      NODE_OFFLINE_AFTER_S: String(OFFLINE_AFTER_S),
      // Every simulated node registers from this one address.
      REGISTER_RATE_LIMIT_PER_MIN: '1000000'
    });
    const base = stack.base;
    const stackAlive = stack.alive;

    const t0 = Date.now();
    const nodes: { node_id: string; api_key: string }[] = [];
    let requested = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (requested++ < NODES) {
          const res = await fetch(`${base}/a2a/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: `bench-${nodes.length}`, brand: { code: 'custom' }, instance: { memory_gb: 8 } }) });
          if (res.status !== 201) throw new Error(`register: ${res.status} ${await res.text()}`);
          nodes.push((await res.json()) as { node_id: string; api_key: string });
        }
      })
    );
    console.log(`registered ${nodes.length} nodes in ${((Date.now() - t0) / 1000).toFixed(1)} s (${(nodes.length / ((Date.now() - t0) / 1000)).toFixed(0)}/s)`);

    const lastAck = new Map<string, number>();
    // A heartbeat that cannot be sent (the API is gone) counts as failed; the waits below notice a dead stack.
    const beat = async (node: { node_id: string; api_key: string }) => {
      try {
        const res = await fetch(`${base}/a2a/heartbeat`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-external-node': node.node_id, 'x-external-key': node.api_key },
          body: JSON.stringify({ resources: { cpu_percent: 35, memory_used_gb: 4, gpu_count: 1, gpu_util_percent: 50 }, performance: { latency_ms: 120, tasks_done: 3 } })
        });
        await res.arrayBuffer();
        if (res.status === 200) lastAck.set(node.node_id, Date.now());
        return res.status === 200;
      } catch {
        return false;
      }
    };
    // Nodes that keep beating as a real node would: every node once per OFFLINE_AFTER_S / 6 s, 50 at a time.
    const keepBeating = (group: typeof nodes) => {
      let running = true;
      const done = (async () => {
        while (running) {
          const round = Date.now();
          for (let i = 0; i < group.length && running; i += 50) await Promise.all(group.slice(i, i + 50).map(beat));
          while (running && Date.now() - round < (OFFLINE_AFTER_S * 1000) / 6) await new Promise((r) => setTimeout(r, 200));
        }
      })();
      return async () => {
        running = false;
        await done;
      };
    };

    // Warm-up: every node's first heartbeat brings it online (they keep beating meanwhile); measure from steady
    // state only. Polled every 3 s: on FerretDB the count scans the nodes.
    const warm = Date.now();
    const stopWarmUp = keepBeating(nodes);
    const mongo = await MongoClient.connect(stack.mongoUri);
    const db = mongo.db(stack.dbName);
    while ((await db.collection('nodes').countDocuments({ state: 'online' })) < nodes.length) {
      stackAlive();
      await new Promise((r) => setTimeout(r, 3000));
    }
    await stopWarmUp();
    console.log(`all ${nodes.length} nodes online ${((Date.now() - warm) / 1000).toFixed(1)} s after their first heartbeat`);

    const health = await load(SECONDS, CONCURRENCY, async () => {
      const res = await fetch(`${base}/health`);
      await res.arrayBuffer();
      return res.ok;
    });
    console.log(`baseline GET /health          ${fmt(health)}`);
    const hb = await load(SECONDS, CONCURRENCY, (i) => beat(nodes[i % nodes.length]!));
    console.log(`POST /a2a/heartbeat           ${fmt(hb)}`);
    console.log(`ratio (heartbeat cost / bare HTTP cost): ${(health.perSec / hb.perSec).toFixed(2)}x time per request, p50 ${(hb.p50 / health.p50).toFixed(2)}x`);

    // Offline detection: STOP nodes fall silent; the others keep beating every OFFLINE_AFTER_S / 6 s.
    const stopped = nodes.slice(0, STOP);
    const alive = nodes.slice(STOP);
    const stoppedAt = Date.now();
    const stopBeating = keepBeating(alive);
    console.log(`${stopped.length} nodes stopped; waiting for offline (up to ${OFFLINE_AFTER_S + 30} s)`);
    const ids = new Set(stopped.map((n) => n.node_id));
    const delays: number[] = [];
    while (Date.now() - stoppedAt < (OFFLINE_AFTER_S + 30) * 1000 && delays.length < stopped.length) {
      stackAlive();
      await new Promise((r) => setTimeout(r, 3000));
      const offline = await db.collection('nodes').find({ state: 'offline' }, { projection: { _id: 1, state_changed_at: 1 } }).toArray();
      delays.length = 0;
      for (const d of offline) if (ids.has(d._id as unknown as string)) delays.push((Date.parse(d.state_changed_at) - lastAck.get(d._id as unknown as string)!) / 1000);
    }
    await stopBeating();
    const falseOffline = (await db.collection('nodes').countDocuments({ state: 'offline' })) - delays.length;
    await mongo.close();
    delays.sort((a, b) => a - b);
    console.log(`offline detected for ${delays.length}/${stopped.length} stopped nodes; delay after last heartbeat: min ${delays[0]?.toFixed(2)} s, p50 ${delays[Math.floor(delays.length / 2)]?.toFixed(2)} s, max ${delays[delays.length - 1]?.toFixed(2)} s (target ≤ ${OFFLINE_AFTER_S + 2} s)`);
    console.log(`nodes that went offline although they kept beating: ${falseOffline}`);
  } catch (err) {
    failure = err;
  } finally {
    await stack?.stop();
  }
  if (failure) {
    log.reportFailure(failure);
    process.exit(1);
  }
  log.reportSuccess();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
