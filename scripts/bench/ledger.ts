/**
 * npm run bench:ledger — what truth writes cost, measured three ways in one run, each beside bare `insertOne` calls
 * into the same database at the same concurrency (the floor), with the ratio:
 *   module   Ledger.append called in-process against its own embedded FerretDB (or MONGODB_URI), concurrency 1/16/64;
 *   http     POST /api/report/truth through the whole stack (`npm start`: API, worker, FerretDB, Temporal), as a node
 *            writes, from one DID and from BENCH_DIDS DIDs, at concurrency 1/16/64, with the ledger filled to each of
 *            BENCH_LEDGER_SIZES entries first (1,000 and 100,000 by default; add 1000000 for the large run). The fill
 *            is the documented fast path, Ledger.appendBulk (one insertMany per 1,000 entries, the tail read once) from the bench process
 *            into the stack's database before the writes are measured; with BENCH_DATA_DIR the stack's data dir (and
 *            so the filled ledger) is kept there and reused by the next run. While writes run (and while the bare inserts
 *            they are set against run), GET /api/status is sampled
 *            from a process of its own (status-sampler.ts)
 *            every 100 ms, each followed by one of /api/status-data/assets, metrics and sync in turn and by the agent
 *            card (no database read: what of a read's latency is the API process's own); p99 and worst of each are
 *            printed (reads must stay fast under write load). Last, an overload
 *            phase: BENCH_OVERLOAD_CLIENTS clients (each waiting the Retry-After of a 503 before it writes again, as
 *            nodes do) for BENCH_OVERLOAD_S seconds, then how long writes kept landing
 *            after the load stopped and how many quota slots were spent on refused writes (should be none);
 *   verify   verify time and memory (live heap after collections, and RSS) for BENCH_VERIFY_SIZES entries.
 * BENCH_COMPARE_ASSETS=0 skips the idle assets comparison (minutes at 1,000,000 entries).
 * BENCH_PHASES picks phases (default module,http,verify); BENCH_OPS is the writes per measurement (default 1000);
 * BENCH_WARMUP_OPS (default 4000; 0: none) bare inserts, and writes per API process of each configuration (one
 * process; the lease's two), at concurrency 16 run unmeasured before each ledger size's lines, so they do not meet
 * the caches cold after a start (an API process's CPU per write at concurrency 1 fell from 0.93 ms after 1,000 writes to 0.50 ms after 4,000);
 * BENCH_ROUNDS (default 1) measures each concurrency that many times over (each round the bare inserts, then every
 * line once) and prints each line's median round by its ratio to that round's bare inserts, with the range of the
 * rounds' ratios (and of the rounds' ratios to the one-process line): single figures here drift up to 2x between runs;
 * BENCH_KEYED=1 gives every http write an Idempotency-Key of its own (and the filled entries idempotency records);
 * BENCH_HTTP_CLIENT (`request`, default, or `fetch`) is the client the http writes use, and each concurrency first
 * measures that client's HTTP floor (the agent card, no database read);
 * BENCH_API_PROCESSES (default 1; `1,2` for both) lists how many API processes the http writes alternate between:
 * with 2 a second API process is started beside the stack's, and every measurement is taken once per count, the
 * line for 2 giving its throughput and p99 against 1 (the worker runs beside them as always). Those processes each
 * append directly and race for the next seq. BENCH_WRITER_LEASE=1 gives the stack's API the writer lease
 * (LEDGER_FORWARD_SECRET: it holds it) and, with 2 in BENCH_API_PROCESSES, adds a third line per measurement,
 * `2 API lease`: the writes alternate between the stack's API and a further API process with the secret, which
 * forwards its appends to the holder (the `2 API` line's second process has no secret and still races; its line runs
 * after the lease line, which would otherwise meet what the race left behind). The racing
 * and the lease lines write from DIDs of their own (`did:bench:race<i>`, `did:bench:lease<i>`), so that one
 * configuration's quota counters do not weigh on another's lines, and with several lines per measurement each
 * starts 3 s after the last.
 * BENCH_API_CLUSTER=N measures the other way to run N API processes:
 * after the first run, a second stack with API_PROCESSES=N (Node's cluster: the processes share the ports and
 * hand their appends to the primary, the host's one ledger writer), every line against the one-process line of the
 * first run. In both runs the writes then alternate between N connection pools (undici Agents), so the cluster's
 * primary hands their connections to every process.
 * With BENCH_DATA_DIR the http phase keeps its stack's data in the subdirectory `postgresql` (`postgresql-cluster<N>`
 * for the cluster run; the names of the runs that also measured SQLite, so that their kept ledgers still serve).
 * Prints figures and ratios; asserts nothing. The stack's output goes to a log file (stack-log.ts), named when the
 * bench fails and at its end.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Collection, Db, MongoClient } from 'mongodb';
import { Agent, Dispatcher, fetch as undiciFetch } from 'undici';
import { Ledger } from '../../store/ledger/ledger';
import { verifyLedger } from '../../store/ledger/ledger-verify';
import { ensureIndexes } from '../../store/mongo';
import { startEmbeddedStore } from '../stack/ferretdb';
import { StackLog } from './stack-log';
import { BenchStack, startBenchStack } from './stack';
import { Latency, ReadLatencies, sampleStatus } from './status-sampler';

const OPS = Number(process.env.BENCH_OPS ?? 1000);
/** Writes per configuration (and bare inserts) at concurrency 16 before each ledger size's lines, not measured. */
const WARMUP_OPS = Number(process.env.BENCH_WARMUP_OPS ?? 4000);
/** Rounds per concurrency (each: the bare inserts, then every line once); a line reports its median round. */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 1));
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const VERIFY_SIZES = (process.env.BENCH_VERIFY_SIZES ?? '10000,100000').split(',').map(Number);
const LEDGER_SIZES = (process.env.BENCH_LEDGER_SIZES ?? '1000,100000').split(',').map(Number);
const DIDS = Number(process.env.BENCH_DIDS ?? 16);
/**
 * BENCH_KEYED=1: every http write carries an Idempotency-Key of its own (as a node that retries safely sends), and
 * the fill gives each filled entry an idempotency record too (written by the bench beside appendBulk, which writes
 * none), so the ledger looks like one whose writers always sent keys.
 */
const KEYED = process.env.BENCH_KEYED === '1';
const OVERLOAD_CLIENTS = Number(process.env.BENCH_OVERLOAD_CLIENTS ?? 512);
const OVERLOAD_S = Number(process.env.BENCH_OVERLOAD_S ?? 10);
/** API process counts to measure with (2: a second API process beside the stack's, the writes alternating). */
const API_PROCESSES = (process.env.BENCH_API_PROCESSES ?? '1').split(',').map(Number);
/** BENCH_WRITER_LEASE=1: the writer lease across API processes, measured beside the racing pair. */
const WRITER_LEASE = process.env.BENCH_WRITER_LEASE === '1';
const LEASE_SECRET = `bench-lease-${Math.random().toString(36).slice(2)}-${Date.now()}`;
/** API_PROCESSES of a second, cluster run (0: none). */
const API_CLUSTER = Number(process.env.BENCH_API_CLUSTER ?? 0);
/**
 * BENCH_COMPARE_ASSETS=0 skips the idle comparison of GET /api/status-data/assets with grouping the entries (at
 * 1,000,000 entries each grouping takes minutes, twice per stack; a rerun on a kept ledger has its figure already).
 */
const COMPARE_ASSETS = process.env.BENCH_COMPARE_ASSETS !== '0';
/**
 * The HTTP client the http phase writes with: `request` (undici's request API over a keep-alive pool: the client a
 * Node node would pick for throughput) or `fetch` (Node's built-in fetch, which costs the client 3-4 ms a request more
 * here). Each concurrency also measures that client's floor: GET of the agent card (no database read) at the same
 * concurrency, so a write's figures can be read against what HTTP alone costs on the same machine.
 */
const HTTP_CLIENT = process.env.BENCH_HTTP_CLIENT ?? 'request';
if (HTTP_CLIENT !== 'request' && HTTP_CLIENT !== 'fetch')
  throw new Error(`BENCH_HTTP_CLIENT: ${HTTP_CLIENT} (request, fetch)`);
const PHASES = new Set((process.env.BENCH_PHASES ?? 'module,http,verify').split(','));

/** One http measurement (a line), for the comparisons across sizes and with the one-process run. */
interface HttpRow {
  size: number;
  concurrency: number;
  writers: number;
  processes: number;
  /** Two API processes, the second forwarding its appends to the writer lease holder (BENCH_WRITER_LEASE). */
  lease: boolean;
  http: Figures;
  baseline: Figures;
}

// A full garbage collection on demand (for measuring live memory), without having to start node with --expose-gc.
v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

interface Figures {
  opsPerSec: number;
  p50: number;
  p99: number;
  /** Answers by HTTP status (HTTP phases only). */
  statuses: Map<number, number>;
}

/** `ops` operations from `concurrency` clients, each starting its next as soon as the last is answered. */
async function run(concurrency: number, ops: number, op: (i: number) => Promise<unknown>): Promise<Figures> {
  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < ops) {
        const i = next++;
        const t0 = process.hrtime.bigint();
        const status = await op(i);
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
        if (typeof status === 'number') statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    })
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { opsPerSec: ops / seconds, ...percentiles(latencies), statuses };
}

function percentiles(latencies: number[]): { p50: number; p99: number; max: number } {
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return { p50: pct(50), p99: pct(99), max: latencies[latencies.length - 1] ?? 0 };
}

const fmt = (f: Figures) =>
  `${f.opsPerSec.toFixed(0).padStart(6)} ops/s   p50 ${f.p50.toFixed(2).padStart(7)} ms   p99 ${f.p99.toFixed(2).padStart(7)} ms`;
/** The item whose key is the median (the lower middle one of an even count). */
function median<T>(items: T[], key: (t: T) => number): T {
  return [...items].sort((a, b) => key(a) - key(b))[Math.floor((items.length - 1) / 2)]!;
}
const spread = (values: number[], digits: number, unit: string) =>
  `${Math.min(...values).toFixed(digits)}-${Math.max(...values).toFixed(digits)}${unit}`;
const fmtStatuses = (f: Figures) =>
  [...f.statuses]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${n}×${s}`)
    .join(' ');
const benchValue = (i: number) => ({ i, payload: 'x'.repeat(64) });

async function main(): Promise<void> {
  const log = new StackLog('ledger');
  let failure: unknown = null;
  try {
    if (PHASES.has('module') || PHASES.has('verify')) await withModuleDatabase(log, measureModule);
    if (PHASES.has('http')) {
      const single = await measureHttp(log);
      if (API_CLUSTER > 1) await measureHttp(log, API_CLUSTER, single);
    }
  } catch (err) {
    failure = err;
  }
  if (failure) {
    log.reportFailure(failure);
    process.exit(1);
  }
  log.reportSuccess();
}

/** The module phases run against MONGODB_URI, or a FerretDB (on its PostgreSQL) of their own. */
async function withModuleDatabase(log: StackLog, measure: (uri: string) => Promise<void>): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-bench-'));
  let stop = async () => undefined as void;
  try {
    let uri = process.env.MONGODB_URI;
    if (!uri) {
      const store = await startEmbeddedStore({ dataDir, echo: false, logFile: log.path });
      uri = store.uri;
      stop = () => store.stop();
    }
    await measure(uri);
  } finally {
    await stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function measureModule(uri: string): Promise<void> {
  const client = await MongoClient.connect(uri, { retryWrites: false });
  try {
    if (PHASES.has('module'))
      console.log(
        `bench:ledger module — ${OPS} appends per concurrency level, against ${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded FerretDB (PostgreSQL)'}`
      );
    for (const c of PHASES.has('module') ? CONCURRENCY : []) {
      const db = client.db(`bench_c${c}_${Date.now()}`);
      await ensureIndexes(db);
      const scratch = db.collection('scratch');
      const baseline = await bareInserts(scratch, c);
      const ledger = new Ledger(db);
      const appends = await run(c, OPS, (i) =>
        ledger.append({
          kind: 'truth',
          key: `bench.append.${i}`,
          value: benchValue(i),
          truth_type: 'data',
          did: 'did:bench:writer'
        })
      );
      console.log(`concurrency ${String(c).padStart(2)}  bare insertOne: ${fmt(baseline)}`);
      console.log(`                ledger append:  ${fmt(appends)}`);
      console.log(
        `                ratio (append cost / insert cost): ${(baseline.opsPerSec / appends.opsPerSec).toFixed(2)}x time per op, p50 ${(appends.p50 / baseline.p50).toFixed(2)}x`
      );
      await db.dropDatabase();
    }

    for (const size of PHASES.has('verify') ? VERIFY_SIZES : []) {
      const db = client.db(`bench_verify_${size}_${Date.now()}`);
      await ensureIndexes(db);
      const ledger = new Ledger(db);
      const fillStart = Date.now();
      await run(64, size, (i) =>
        ledger.append({
          kind: 'truth',
          key: `bench.verify.${i}`,
          value: { i },
          truth_type: 'data',
          did: 'did:bench:writer'
        })
      );
      const fillSeconds = (Date.now() - fillStart) / 1000;
      // Time: one uninterrupted verify. Memory: a second verify with a collection every 100 ms; the largest heap
      // left after a collection is what verify holds (RSS only shows how lazily the collector runs).
      const t0 = Date.now();
      const report = await verifyLedger(ledger);
      const seconds = (Date.now() - t0) / 1000;
      const live = () => {
        collectGarbage();
        const m = process.memoryUsage();
        return m.heapUsed + m.external;
      };
      const before = live();
      let peakLive = before;
      const rssBefore = process.memoryUsage().rss;
      let peakRss = rssBefore;
      const sampler = setInterval(() => {
        peakLive = Math.max(peakLive, live());
        peakRss = Math.max(peakRss, process.memoryUsage().rss);
      }, 100);
      await verifyLedger(ledger);
      clearInterval(sampler);
      const mib = (n: number) => (n / 1048576).toFixed(1);
      console.log(
        `verify ${String(size).padStart(6)} entries: ${seconds.toFixed(2)} s (${(size / seconds).toFixed(0)} entries/s), consistent=${report.consistent}; ` +
          `live heap during verify +${mib(peakLive - before)} MiB over ${mib(before)} MiB, peak RSS +${mib(peakRss - rssBefore)} MiB (filled in ${fillSeconds.toFixed(1)} s)`
      );
      await db.dropDatabase();
    }
  } finally {
    await client.close();
  }
}

/** The floor: a document of the size of a ledger entry, inserted with nothing else around it. */
function bareInserts(scratch: Collection, concurrency: number, ops = OPS): Promise<Figures> {
  return run(concurrency, ops, async (i) => {
    await scratch.insertOne({
      key: `bench.insert.${i}`,
      value_json: JSON.stringify(benchValue(i)),
      leaf_hash: 'x'.repeat(64),
      root: 'y'.repeat(64),
      frontier: ['z'.repeat(64)],
      created_at: new Date().toISOString()
    });
  });
}

/**
 * The http phase; with `cluster` (N > 1) on a stack with API_PROCESSES=N, each line compared with the same line of
 * `single` (the one-process run).
 */
async function measureHttp(log: StackLog, cluster = 0, single: HttpRow[] = []): Promise<HttpRow[]> {
  const variant = cluster > 1 ? `postgresql-cluster${cluster}` : 'postgresql';
  console.log(
    `bench:ledger http — POST /api/report/truth through the whole stack on FerretDB/PostgreSQL${cluster > 1 ? `, API_PROCESSES=${cluster} (cluster, one ledger writer)` : ''}, ${OPS} writes per measurement${KEYED ? ', each with an Idempotency-Key' : ''}, ledger at ${LEDGER_SIZES.join(', ')} entries`
  );
  const keep = process.env.BENCH_DATA_DIR ? path.join(process.env.BENCH_DATA_DIR, variant) : undefined;
  const stack = await startBenchStack(
    `ledger-${variant}`,
    log,
    {
      TRUTH_DAILY_QUOTA: '100000000',
      NODE_REVIEW_REQUIRED: 'false',
      ...(cluster > 1 ? { API_PROCESSES: String(cluster) } : {}),
      ...(WRITER_LEASE ? { LEDGER_FORWARD_SECRET: LEASE_SECRET } : {})
    },
    keep
  );
  // With a cluster run to come, both runs write through API_CLUSTER pools of connections, alternating.
  const pools = API_CLUSTER > 1 ? Array.from({ length: API_CLUSTER }, () => new Agent({ connections: 64 })) : [];
  // Without cluster pools, one keep-alive pool for the writes (fetch's global dispatcher keeps connections too).
  const writerPool = new Agent({ connections: 1024 });
  const apiCounts = cluster > 1 ? [cluster] : API_PROCESSES;
  const rows: HttpRow[] = [];
  const client = await MongoClient.connect(stack.mongoUri, { retryWrites: false });
  try {
    const db = client.db(stack.dbName);
    const dids = await Promise.all(
      Array.from({ length: DIDS }, (_, i) => registerBenchDid(stack, `did:bench:writer${i}`))
    );
    const bases = [stack.base];
    // The racing processes have no lease secret: each appends itself.
    while (cluster <= 1 && bases.length < Math.max(...API_PROCESSES))
      bases.push(await stack.startApi({ LEDGER_FORWARD_SECRET: '' }));
    if (bases.length > 1) console.log(`writes alternate between ${API_PROCESSES.join(' and then ')} API process(es)`);
    // With the lease: one more API process, with the secret, forwarding to the stack's (the holder, started first).
    const leaseBases =
      WRITER_LEASE && cluster <= 1 && API_PROCESSES.includes(2) ? [stack.base, await stack.startApi()] : null;
    if (leaseBases)
      console.log(
        "and then between the stack's API (the writer lease holder) and one forwarding its appends to it (`2 API lease`)"
      );
    // The lease line right after the one-process line, before the racing pair: a line run after the racing pair
    // measured what the race left behind as well (session 26: 0.22-0.25x at c=16 in the bench where probes
    // alternating one process and the lease gave 0.59-0.94x).
    const modes = [
      ...apiCounts.filter((p) => p === 1).map((p) => ({ p, lease: false })),
      ...(leaseBases ? [{ p: 2, lease: true }] : []),
      ...apiCounts.filter((p) => p !== 1).map((p) => ({ p, lease: false }))
    ];
    // DIDs of their own for the racing and the lease lines: processes each keep a quota counter per DID, and a DID's
    // slots taken by the racing pair left the next line's process behind them (its claims refused, then the DID's
    // counter looked up again), which is the race's cost, not the next line's.
    const ownDids = (prefix: string) =>
      Promise.all(Array.from({ length: DIDS }, (_, i) => registerBenchDid(stack, `did:bench:${prefix}${i}`)));
    const raceDids = modes.some((m) => m.p > 1 && !m.lease) && cluster <= 1 ? await ownDids('race') : dids;
    const leaseDids = leaseBases ? await ownDids('lease') : dids;
    let lease = false;
    const scratch = db.collection('bench_scratch');
    const filler = new Ledger(db);
    let written = 0;
    /** The last line measured was a racing pair's (see the settling write before the next line). */
    let raced = false;
    let processes = apiCounts[0]!;
    const send = async (
      url: string,
      i: number,
      init: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: string }
    ): Promise<number> => {
      const dispatcher: Dispatcher = pools.length > 0 ? pools[i % pools.length]! : writerPool;
      if (HTTP_CLIENT === 'fetch') {
        const res = pools.length > 0 ? await undiciFetch(url, { ...init, dispatcher }) : await fetch(url, init);
        await res.arrayBuffer();
        return res.status;
      }
      const res = await dispatcher.request({
        origin: new URL(url).origin,
        path: new URL(url).pathname,
        method: init.method,
        headers: init.headers,
        body: init.body
      });
      await res.body.arrayBuffer();
      return res.statusCode;
    };
    const write = (did: string, key: string, i: number): Promise<number> =>
      send(
        `${lease && leaseBases ? leaseBases[i % 2] : bases[i % Math.min(processes, bases.length)]}/api/report/truth`,
        i,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-did': did,
            ...(KEYED ? { 'idempotency-key': `bench-${key}` } : {})
          },
          body: JSON.stringify({ key, value: benchValue(i), truth_type: 'data' })
        }
      );
    /** What HTTP alone costs with this client: the agent card (no database read) at the writes' concurrency. */
    const floor = (i: number): Promise<number> =>
      send(`${bases[i % Math.min(processes, bases.length)]}/.well-known/agent-card.json`, i, { method: 'GET' });
    for (const size of LEDGER_SIZES) {
      const head = async () =>
        ((await (await fetch(`${stack.base}/api/status`)).json()) as { truth_count: number }).truth_count;
      const missing = size - (await head());
      if (missing > 0) {
        const t0 = Date.now();
        // One call over a generator: appendBulk reads the tail once.
        function* fill() {
          for (let i = 0; i < missing; i++) {
            if (i > 0 && i % 100_000 === 0 && missing > 100_000)
              console.log(`  filling: ${i}/${missing} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
            yield {
              kind: 'truth' as const,
              key: `bench.fill.${i}`,
              value: benchValue(i),
              truth_type: 'data',
              did: 'did:bench:filler'
            };
          }
        }
        const filledFrom = await head();
        await filler.appendBulk(fill());
        if (KEYED) {
          // One record per filled entry, as keyed writes would have left (the ledger's `idem` stays the bulk one).
          const records = db.collection<{ _id: string; seq: number }>('ledger_idempotency');
          for (let seq = filledFrom + 1; seq <= filledFrom + missing; seq += 1000) {
            const last = Math.min(seq + 999, filledFrom + missing);
            await records
              .insertMany(
                Array.from({ length: last - seq + 1 }, (_, i) => ({
                  _id: `k:did:bench:filler:fill-${seq + i}`,
                  seq: seq + i
                })),
                { ordered: false }
              )
              .catch(() => undefined);
          }
        }
        console.log(
          `ledger filled to ${await head()} entries (${missing} entries by appendBulk in ${((Date.now() - t0) / 1000).toFixed(1)} s)`
        );
      }
      if (COMPARE_ASSETS) await compareAssets(stack.base, db, size);
      if (WARMUP_OPS > 0) {
        // Not measured: the first writes after a start or a fill meet cold caches (FerretDB's, the database's, the
        // page cache's), which at 1,000,000 entries made the first lines of a run a quarter to a half of the same
        // lines run later; each size's lines now start warm, and two runs' lines compare.
        const t0 = Date.now();
        await bareInserts(scratch, 16, WARMUP_OPS);
        for (const mode of modes.filter((m) => m.p === 1 || m.lease)) {
          processes = mode.p;
          lease = mode.lease;
          // WARMUP_OPS writes for each API process of the configuration (the lease's writes alternate between two):
          // a process that had half as many was measured still warming up (a probe at concurrency 16, PostgreSQL:
          // lease / one 0.65, 0.78, 0.92 in three rounds after 2,000 writes each; 0.80, 0.87, 0.73 after 4,000).
          const ops = WARMUP_OPS * mode.p;
          await run(16, ops, (i) =>
            write(
              (lease ? leaseDids : dids)[i % DIDS]!,
              `bench.warmup.${size}.${mode.p}${lease ? 'l' : ''}.${written + i}`,
              i
            )
          );
          written += ops;
        }
        console.log(
          `warm-up (not measured): ${WARMUP_OPS} bare inserts and ${WARMUP_OPS} writes per API process of each configuration at concurrency 16 in ${((Date.now() - t0) / 1000).toFixed(1)} s`
        );
      }
      for (const c of CONCURRENCY) {
        // Each round measures the bare inserts and then every line once; a line's figures are those of its median
        // round by the ratio to that round's own bare inserts (the machine's pace drifts between rounds and runs).
        const lines = [1, DIDS].flatMap((writers) =>
          modes.map((mode) => ({
            writers,
            mode,
            rounds: [] as { http: Figures; baseline: Figures; status: ReadLatencies }[]
          }))
        );
        const baselines: Figures[] = [];
        let http0: Figures | null = null;
        for (let round = 0; round < ROUNDS; round++) {
          // The bare inserts run beside the same status reads as the lines (status-sampler.ts): on a machine of two
          // cores those reads take their share of it (at c=1 they lowered the writes' throughput by 0.12-0.13x of a
          // bare insert), and a floor measured without them set the lines against a machine they did not have.
          const beside = await sampleStatus(stack.base);
          const baseline = await bareInserts(scratch, c);
          await beside.stop();
          baselines.push(baseline);
          http0 ??= await run(c, OPS, floor);
          for (const line of lines) {
            const { writers, mode } = line;
            if (raced) {
              // After a racing line the stack's API has not seen the other process's last entries: its next append is
              // refused once and it then appends as a contended writer for a second (store/ledger/commit-engine.ts,
              // CONTENDED_MS), which made the next line's first second twice as slow (measured: p50 2.1 against
              // 1.0 ms at c=1). One unmeasured write takes that, and the pause below lets it pass.
              processes = 1;
              lease = false;
              await write(dids[0]!, `bench.settle.${size}.${c}.${written}`, 0);
              written += 1;
            }
            raced = mode.p > 1 && !mode.lease && cluster <= 1;
            processes = mode.p;
            lease = mode.lease;
            // Each line after the last one's unused quota leases are given back (idle 2 s, store/ledger/quota.ts).
            if (modes.length > 1) await new Promise((r) => setTimeout(r, 3000));
            const probe = await sampleStatus(stack.base);
            const http = await run(c, OPS, (i) =>
              write(
                (lease ? leaseDids : mode.p > 1 && cluster <= 1 ? raceDids : dids)[i % writers]!,
                `bench.http.${size}.${c}.${writers}.${mode.p}${lease ? 'l' : ''}.${written + i}`,
                i
              )
            );
            line.rounds.push({ http, baseline, status: await probe.stop() });
            written += OPS;
          }
        }
        const baseline = median(baselines, (b) => b.opsPerSec);
        console.log(
          `ledger ${size} entries, concurrency ${String(c).padStart(2)}  bare insertOne:   ${fmt(baseline)}${
            ROUNDS > 1
              ? `   (median of ${ROUNDS} rounds: ${spread(
                  baselines.map((b) => b.opsPerSec),
                  0,
                  '/s'
                )})`
              : ''
          }`
        );
        console.log(
          `  HTTP floor (${HTTP_CLIENT}): GET /.well-known/agent-card.json: ${fmt(http0!)}   ${(http0!.opsPerSec / baselines[0]!.opsPerSec).toFixed(2)}x of bare insert`
        );
        for (const line of lines) {
          const { writers, mode } = line;
          const p = mode.p;
          const ratios = line.rounds.map((r) => r.http.opsPerSec / r.baseline.opsPerSec);
          const chosen = median(line.rounds, (r) => r.http.opsPerSec / r.baseline.opsPerSec);
          const { http, status } = chosen;
          rows.push({
            size,
            concurrency: c,
            writers,
            processes: p,
            lease: mode.lease,
            http,
            baseline: chosen.baseline
          });
          // Against one process: round by round (each pair measured minutes apart at most), the median and range.
          const oneLine = lines.find((l) => l.writers === writers && l.mode.p === 1);
          const one = [...rows, ...single].find(
            (r) => r.size === size && r.concurrency === c && r.writers === writers && r.processes === 1
          );
          const vsOne =
            oneLine && oneLine !== line
              ? line.rounds.map((r, i) => r.http.opsPerSec / oneLine.rounds[i]!.http.opsPerSec)
              : null;
          const throughputVsOne = vsOne
            ? `${median(vsOne, (x) => x).toFixed(2)}x${ROUNDS > 1 ? ` (${spread(vsOne, 2, 'x')})` : ''}`
            : one
              ? `${(http.opsPerSec / one.http.opsPerSec).toFixed(2)}x`
              : '';
          const vsSingle =
            p > 1 && one
              ? `; vs 1 process: throughput ${throughputVsOne}, p99 ${(http.p99 / one.http.p99).toFixed(2)}x`
              : '';
          console.log(
            `  ${String(writers).padStart(2)} DID${writers > 1 ? 's' : ' '}${modes.length > 1 || cluster > 1 ? ` ${p} API${cluster > 1 ? ' (cluster)' : ''}${mode.lease ? ' lease' : ''}` : ''}  POST /api/report/truth: ${fmt(http)}   [${fmtStatuses(http)}]   ` +
              `throughput ${(http.opsPerSec / chosen.baseline.opsPerSec).toFixed(2)}x of bare insert${ROUNDS > 1 ? ` (${spread(ratios, 2, 'x')})` : ''}; GET /api/status meanwhile p99 ${status.p99.toFixed(1)} ms, max ${status.max.toFixed(1)} ms; status-data reads p99 ${status.reads.p99.toFixed(1)} ms, max ${status.reads.max.toFixed(1)} ms; agent card p99 ${status.card.p99.toFixed(1)} ms${vsSingle}`
          );
        }
      }
    }
    processes = apiCounts[0]!;
    lease = false;
    if (LEDGER_SIZES.length > 1) {
      // Does a write cost more as the ledger grows? p99 and throughput at the largest size over the smallest.
      const [small, large] = [Math.min(...LEDGER_SIZES), Math.max(...LEDGER_SIZES)];
      console.log(`ledger ${large} entries against ${small} (flat is 1.00x):`);
      for (const row of rows.filter((r) => r.size === large)) {
        const base = rows.find(
          (r) =>
            r.size === small &&
            r.concurrency === row.concurrency &&
            r.writers === row.writers &&
            r.processes === row.processes &&
            r.lease === row.lease
        );
        if (base)
          console.log(
            `  c=${String(row.concurrency).padStart(2)} ${String(row.writers).padStart(2)} DID${row.writers > 1 ? 's' : ' '} ${row.processes} API${row.lease ? ' lease' : ''}: p99 ${(row.http.p99 / base.http.p99).toFixed(2)}x, throughput ${(row.http.opsPerSec / base.http.opsPerSec).toFixed(2)}x`
          );
      }
    }
    if (raced) await write(dids[0]!, `bench.settle.overload.${written++}`, 0); // see the settling write above
    await overload(stack, db, dids, write);
  } finally {
    await client.close();
    await stack.stop();
    await Promise.all([...pools, writerPool].map((p) => p.close()));
  }
  return rows;
}

/**
 * GET /api/status-data/assets (the tally its head carries) against what it did before tallies (grouping the ledger's
 * truths by type and counting its events, the same queries from this process), each a few times on the idle ledger.
 */
async function compareAssets(base: string, db: Db, size: number): Promise<void> {
  const time = async (f: () => Promise<unknown>, times: number) => {
    const latencies: number[] = [];
    for (let i = 0; i < times; i++) {
      const t0 = process.hrtime.bigint();
      await f();
      latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return percentiles(latencies).p50;
  };
  const ledger = db.collection('ledger');
  const tally = await time(() => fetch(`${base}/api/status-data/assets`).then((r) => r.arrayBuffer()), 20);
  const grouping = await time(
    () =>
      Promise.all([
        ledger
          .aggregate([{ $match: { kind: 'truth' } }, { $group: { _id: '$truth_type', count: { $sum: 1 } } }])
          .toArray(),
        ledger.countDocuments({ kind: 'event' })
      ]),
    size >= 100_000 ? 2 : 10
  );
  // A ledger kept from a run before tallies existed (BENCH_DATA_DIR) has none: assets groups then too.
  const tallied =
    (await new Ledger(db).headWithTally()).tally !== null
      ? 'from the tally'
      : 'NO TALLY (a ledger filled before tallies: grouped too)';
  console.log(
    `ledger ${size} entries, idle: GET /api/status-data/assets (${tallied}) p50 ${tally.toFixed(1)} ms; grouping the entries (before tallies) p50 ${grouping.toFixed(1)} ms: ${(grouping / tally).toFixed(0)}x`
  );
}

/** Far more writers than a process admits, for a while; then whether anything keeps landing once they stop. */
async function overload(
  stack: BenchStack,
  db: Db,
  dids: string[],
  write: (did: string, key: string, i: number) => Promise<number>
): Promise<void> {
  // The ledger's size as its newest head record states it (a small collection): counting the entries themselves
  // reads the whole ledger on FerretDB.
  const sizer = new Ledger(db);
  const entries = async () => (await sizer.head()).size;
  // Counted, not estimated: FerretDB's estimate lags deletes, and unused leased slots are deleted.
  const slots = () => db.collection('quota_uses').countDocuments({});
  // Quota slots leased ahead by the measurements before are given back 2-3 s after their DIDs' last writes
  // (store/ledger/quota.ts): count from after that.
  const slotsBefore = await settled(slots, 4000);
  const entriesBefore = await entries();
  // Who appends the stack's writes: with the writer lease, another process holding it (the stack's API can miss a
  // renewal under a line's load) takes them, with the quota counters of DIDs it may not have seen that day.
  const health = (await (await fetch(`${stack.base}/health`)).json()) as {
    ledger_writer?: { holds_lease: boolean | null; writer_url: string | null };
  };
  const writer = !health.ledger_writer
    ? 'no lease (LEDGER_FORWARD_SECRET not set)'
    : health.ledger_writer.holds_lease
      ? "held by the stack's API"
      : `held by another process (${health.ledger_writer.writer_url ?? 'unknown'})`;
  const probe = await sampleStatus(stack.base);
  const statuses = new Map<number, number>();
  const end = Date.now() + OVERLOAD_S * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: OVERLOAD_CLIENTS }, async (_, client) => {
      while (Date.now() < end) {
        const status = await write(dids[client % dids.length]!, `bench.overload.${n}`, n++).catch(() => 0);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        // As a node does: a refusal says when to come back (Retry-After: 1).
        if (status === 503) await new Promise((r) => setTimeout(r, 1000));
      }
    })
  );
  const stoppedAt = Date.now();
  const status = await probe.stop();
  let last = await entries();
  let settledAt = stoppedAt;
  while (Date.now() - settledAt < 3000 && Date.now() - stoppedAt < 120_000) {
    await new Promise((r) => setTimeout(r, 250));
    const now = await entries();
    if (now !== last) {
      last = now;
      settledAt = Date.now();
    }
  }
  const slotsAfter = await settled(slots, 4000);
  const summary = [...statuses]
    .sort(([a], [b]) => a - b)
    .map(([s, k]) => `${k}×${s || 'error'}`)
    .join(' ');
  const acknowledged = statuses.get(200) ?? 0;
  // Where the slowest read fell: at +0.0 s it met the load's onset (every client's first request at once).
  const read = (l: Latency) =>
    `p50 ${l.p50.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms, max ${l.max.toFixed(1)} ms (at +${l.maxAt.toFixed(1)} s)`;
  console.log(
    `overload: ${OVERLOAD_CLIENTS} clients for ${OVERLOAD_S} s: ${summary}; GET /api/status meanwhile ${read(status)}; status-data reads (assets, metrics, sync) ${read(status.reads)}; agent card (no database read) ${read(status.card)}`
  );
  console.log(
    `  after the load stopped, entries kept landing for ${((settledAt - stoppedAt) / 1000).toFixed(1)} s; ` +
      `${last - entriesBefore} entries for ${acknowledged} acknowledged writes; quota slots spent ${slotsAfter - slotsBefore} (the hub's own events take none; counted once unused leased slots were given back); writer lease at the start: ${writer}`
  );
}

/** The count once it has not changed for `quietMs` (at most 120 s). */
async function settled(count: () => Promise<number>, quietMs: number): Promise<number> {
  const started = Date.now();
  let last = await count();
  let since = Date.now();
  while (Date.now() - since < quietMs && Date.now() - started < 120_000) {
    await new Promise((r) => setTimeout(r, 250));
    const now = await count();
    if (now !== last) {
      last = now;
      since = Date.now();
    }
  }
  return last;
}

async function registerBenchDid(stack: BenchStack, did: string): Promise<string> {
  const res = await fetch(`${stack.base}/admin/dids`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${stack.adminToken}` },
    body: JSON.stringify({ did })
  });
  if (res.status !== 201 && res.status !== 200)
    throw new Error(`could not register ${did}: ${res.status} ${await res.text()}`);
  return did;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
