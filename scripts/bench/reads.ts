/**
 * npm run bench:reads — every read endpoint of the hub, measured over HTTP on the whole local stack (`npm start`:
 * API, worker, FerretDB on PostgreSQL, Temporal) at each ledger size of
 * BENCH_READ_SIZES (default 1000,100000; the large run adds 1000000), with BENCH_NODES nodes (10,000, the issue's
 * size), BENCH_TASKS tasks (100,000) and BENCH_CHAT_KEYS chat keys (1,000) for the
 * reads that touch them, while BENCH_READ_WRITERS writers (16; 0: none) write truths beside them (POST
 * /api/report/truth with Idempotency-Keys, from a process of their own: reads-writers.ts), BENCH_READ_WRITE_RATE
 * writes a second in all (10 by default; 0: unpaced, see WRITE_RATE). Those writes grow the ledger while a size is
 * measured; each size prints what the ledger held when its reads began and ended, and says so when it more than
 * doubled.
 *
 * For each read (reads-catalog.ts): p50 and p99 over BENCH_READ_OPS requests (200) one after another, and what it
 * returned, checked against what the database holds; beside it its floor (reads-measure.ts): as many rounds of N
 * parallel `findOne({ _id })` on the ledger (on the node documents for the node reads), N the number of entries the
 * read returned (at least 1), and the ratio.
 * BENCH_READ_WARMUP (3) unmeasured requests come first; a read (and its floor) still running after BENCH_READ_MAX_S
 * seconds (20) stops there and says how many it measured. GET /api/verify once per size, its time per entry. A table
 * per size, then each read at the largest size against the smallest.
 *
 * The fill (reads-fill.ts, reads-fixtures.ts): the ledger by Ledger.appendBulk, with realistic keys sharing prefixes
 * and what the reads look for; nodes, tasks, chat keys and the rest through the project's own stores.
 * BENCH_DATA_DIR=<dir> keeps the stack's data dir, with the filled ledger and fixtures, for the next run (a ledger
 * already larger than a size is measured at its own size). BENCH_READ_FILTER=<regex> measures the matching reads
 * only. A stack process over BENCH_MAX_RSS_MB stops the run (reads-guard.ts); each read's progress line names the
 * peak resident memory of every stack process while it was measured. Prints figures and asserts none; the reads that
 * did not answer 2xx with what they should are listed at the end. The stack's output goes to a log file
 * (stack-log.ts), named at the end.
 */
import { type Db, MongoClient } from 'mongodb';
import { Ledger } from '../../store/ledger/ledger';
import { buildCatalog, ledgerTakesBefore } from './reads-catalog';
import { type Fixtures, fillLedger, loadFixtures, saveFixtures } from './reads-fill';
import { ensureFixtures, nodeHistoryHour } from './reads-fixtures';
import { MemoryGuard } from './reads-guard';
import { type FloorSource, measureRead, printGrowth, printTable, Reader, type ReadRow } from './reads-measure';
import { startWriters, type WriterFigures } from './reads-writers';
import { StackLog } from './stack-log';
import { type BenchStack, startBenchStack } from './stack';

const num = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`${name}: expected a whole number, got ${process.env[name]}`);
  return value;
};
const SIZES = (process.env.BENCH_READ_SIZES ?? '1000,100000').split(',').map(Number);
if (SIZES.some((s) => !Number.isInteger(s) || s < 100))
  throw new Error(`BENCH_READ_SIZES: ledger sizes of 100 entries or more, got ${process.env.BENCH_READ_SIZES}`);
const OPS = Math.max(1, num('BENCH_READ_OPS', 200));
const WARMUP = num('BENCH_READ_WARMUP', 3);
const MAX_S = Math.max(1, num('BENCH_READ_MAX_S', 20));
const WRITERS = num('BENCH_READ_WRITERS', 16);
/**
 * Writes per second of all writers together (default 10); 0: each writer writes again as soon as it is answered.
 * Unpaced, the 16 writers wrote about 230 a second on the 2-core development machine, which saturated it: reads
 * scanning the ledger were answered 503 after the database driver's 40 s, and a 1,000-entry ledger held 100,000
 * entries 14 minutes into its reads.
 */
const WRITE_RATE = num('BENCH_READ_WRITE_RATE', 10);
const COUNTS = {
  nodes: Math.max(3, num('BENCH_NODES', 10_000)),
  tasks: Math.max(2, num('BENCH_TASKS', 100_000)),
  chatKeys: Math.max(1, num('BENCH_CHAT_KEYS', 1000)),
  writers: WRITERS
};
const FILTER = process.env.BENCH_READ_FILTER ? new RegExp(process.env.BENCH_READ_FILTER) : null;

const seconds = (t0: number) => (Date.now() - t0) / 1000;

async function main(): Promise<void> {
  const log = new StackLog('reads');
  const phases: string[] = [];
  async function phase<T>(name: string, run: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    const out = await run();
    phases.push(`${name} ${seconds(t0).toFixed(1)} s`);
    return out;
  }
  let stack: BenchStack | null = null;
  let client: MongoClient | null = null;
  const reader = new Reader();
  let guard: MemoryGuard | null = null;
  let failure: unknown = null;
  try {
    console.log(
      `bench:reads — every read endpoint over HTTP on the whole stack (FerretDB/postgresql), ledger at ${SIZES.join(', ')} entries; ` +
        `${COUNTS.nodes} nodes, ${COUNTS.tasks} tasks, ${COUNTS.chatKeys} chat keys; ${OPS} requests per read at concurrency 1 ` +
        `(at most ${MAX_S} s each, after ${WARMUP} unmeasured), ` +
        (WRITERS > 0
          ? `${WRITERS} writers beside them (POST /api/report/truth, Idempotency-Keys, ${WRITE_RATE > 0 ? `${WRITE_RATE} writes/s in all` : 'unpaced'})`
          : 'no writes beside them (BENCH_READ_WRITERS=0)')
    );
    const issue = { nodes: 10_000, tasks: 100_000, chatKeys: 1000 };
    const smaller = (Object.keys(issue) as (keyof typeof issue)[]).filter((k) => COUNTS[k] < issue[k]);
    if (smaller.length > 0)
      console.log(
        `  smaller than the issue's sizes (10,000 nodes, 100,000 tasks, 1,000 chat keys): ${smaller.map((k) => `${k} ${COUNTS[k]}`).join(', ')}`
      );
    stack = await phase('stack start', () =>
      startBenchStack(
        'reads',
        log,
        {
          TRUTH_DAILY_QUOTA: '100000000',
          // Nodes the bench stores online stay online without beating (no transitions, no ledger events).
          NODE_OFFLINE_AFTER_S: '86400'
        },
        process.env.BENCH_DATA_DIR
      )
    );
    const s = stack;
    guard = new MemoryGuard(s.dataDir, (reason) => {
      console.error(`!! ${reason}`);
      void s.stop().catch(() => undefined);
    });
    const g = guard;
    client = await MongoClient.connect(s.mongoUri, { retryWrites: false });
    const db = client.db(s.dbName);
    const ledger = new Ledger(db);
    const ledgerPaging = await ledgerTakesBefore(s.base);
    if (!ledgerPaging) console.log('GET /api/ledger takes no cursor on this hub (no `before`): no page of it is read');
    const base = { seeds: 0, seedHead: null, filled: 0, early: 0, lastLate: '' };
    const known: Partial<Fixtures> = { ...base, ...loadFixtures(s.dataDir) };
    g.doing = 'the fixtures';
    const fixtures = await phase('fixtures', () =>
      ensureFixtures(s, db, known, COUNTS, (f) => saveFixtures(s.dataDir, f))
    );
    const save = () => saveFixtures(s.dataDir, fixtures);
    const hub = `http://127.0.0.1:${s.ports.HUB_PORT}`;
    const memory = `http://127.0.0.1:${s.ports.MEMORY_PORT}`;
    const results = new Map<number, ReadRow[]>();
    /** The ledger's size when each size's reads began and ended. */
    const spans = new Map<number, [number, number]>();
    const missed: string[] = [];
    let measured = 0;

    for (const size of SIZES) {
      g.doing = `the fill to ${size}`;
      const filled = await phase(`fill to ${size}`, () => fillLedger(ledger, db, size, fixtures, save));
      const head0 = (await ledger.head()).size;
      const tree = await phase(`key tree to ${head0}`, () => keyTreeAt(ledger, head0));
      console.log(
        `  key tree: ${head0} entries indexed ${tree.seconds.toFixed(1)} s after the fill (the stack's indexer)`
      );
      console.log(
        `\n== ledger ${size} entries: ` +
          (filled
            ? `${filled.added} entries appended by appendBulk in ${filled.seconds.toFixed(1)} s`
            : `the ledger holds ${head0} already${head0 > size ? ' (more than the size asked for: measured at its own size)' : ''}`)
      );
      const writers =
        WRITERS > 0
          ? await startWriters({
              base: s.base,
              dids: fixtures.writerDids,
              concurrency: WRITERS,
              keyPrefix: `writes.s${size}`,
              rate: WRITE_RATE
            })
          : null;
      let figures: WriterFigures | null = null;
      try {
        const t0 = Date.now();
        await nodeHistoryHour(db, fixtures.instructionsNode);
        const specs = (
          await buildCatalog({ base: s.base, hub, memory, size: head0, fixtures, ledgerPaging }, db)
        ).filter((r) => !FILTER || FILTER.test(r.name));
        console.log(`${specs.length} reads, their expected counts read in ${seconds(t0).toFixed(1)} s; measuring…`);
        const rows: ReadRow[] = [];
        // The floors: `_id` lookups on the ledger at seqs 1..head0, or on the nodes at their ids (the node reads).
        const ledgerFloor: FloorSource = { collection: db.collection('ledger'), idAt: (i) => 1 + (i % head0) };
        const nodeIds = specs.some((r) => r.floor === 'nodes') ? await allNodeIds(db) : [];
        const nodeFloor: FloorSource = {
          collection: db.collection('nodes'),
          idAt: (i) => nodeIds[i % Math.max(1, nodeIds.length)]
        };
        const tm = Date.now();
        g.take();
        for (const spec of specs) {
          g.check();
          s.alive();
          g.doing = `${spec.name} at ${size}`;
          const floorOn = spec.floor === 'nodes' ? nodeFloor : ledgerFloor;
          const row = await measureRead(reader, spec, floorOn, {
            ops: OPS,
            warmup: WARMUP,
            maxSeconds: MAX_S
          });
          rows.push(row);
          measured++;
          const peaks = Object.entries(g.take())
            .map(([name, mib]) => `${name} ${mib}`)
            .join(', ');
          console.log(
            `  · ${row.name}: ${row.read.n} requests, p50 ${row.read.p50.toFixed(1)} ms; floor p50 ${row.floor.p50.toFixed(1)} ms; peak RSS MiB: ${peaks}`
          );
          const ok = [...row.statuses.keys()].every((code) => code >= 200 && code < 300);
          if (!ok || row.mismatch) missed.push(`${row.name} at ${size}: ${row.mismatch ?? 'not 2xx'}`);
        }
        phases.push(`measure at ${size} ${seconds(tm).toFixed(1)} s`);
        g.doing = `GET /api/verify at ${size}`;
        const verify = await phase(`verify at ${size}`, async () => {
          const res = await reader.get(`${s.base}/api/verify`);
          if (res.status !== 200) throw new Error(`GET /api/verify: ${res.status} ${res.body.slice(0, 300)}`);
          return { ms: res.ms, body: JSON.parse(res.body) as { consistent: boolean; ledger_lines: number } };
        });
        figures = (await writers?.stop()) ?? null;
        const head1 = (await ledger.head()).size;
        console.log(
          `\nledger ${size} entries (${head0} when the reads began, ${head1} after: the writes beside them added ${head1 - head0}); p50/p99 over the requests measured (n)`
        );
        printTable(rows);
        console.log(
          `GET /api/verify: ${(verify.ms / 1000).toFixed(2)} s for ${verify.body.ledger_lines} entries, ` +
            `${((verify.ms * 1000) / Math.max(1, verify.body.ledger_lines)).toFixed(1)} µs per entry, consistent=${verify.body.consistent}`
        );
        if (head1 > 2 * head0)
          console.log(
            `!! the writes beside the reads took the ledger from ${head0} to ${head1} entries (${(head1 / head0).toFixed(1)}x): ` +
              'the reads that depend on its size met a ledger of that size; a lower BENCH_READ_WRITE_RATE grows it less, BENCH_READ_WRITERS=0 not at all'
          );
        const short = rows.filter((r) => r.read.n < OPS);
        if (short.length > 0)
          console.log(
            `stopped after ${MAX_S} s (BENCH_READ_MAX_S): ${short.map((r) => `${r.name} (${r.read.n} requests)`).join('; ')}`
          );
        if (figures) {
          const statuses = Object.entries(figures.statuses)
            .map(([code, n]) => `${n}×${code}`)
            .join(' ');
          console.log(
            `writes beside the reads: ${figures.writes} in ${figures.seconds.toFixed(1)} s (${(figures.writes / figures.seconds).toFixed(0)}/s), p50 ${figures.p50.toFixed(1)} ms, p99 ${figures.p99.toFixed(1)} ms [${statuses}]`
          );
        }
        results.set(size, rows);
        spans.set(size, [head0, head1]);
      } finally {
        if (writers && !figures) await writers.stop().catch(() => undefined);
      }
    }

    if (SIZES.length > 1) {
      const small = Math.min(...SIZES);
      const large = Math.max(...SIZES);
      printGrowth(small, large, results.get(small)!, results.get(large)!, spans.get(small)!, spans.get(large)!);
    }
    console.log(`\nphases: ${phases.join('; ')}`);
    if (missed.length > 0)
      console.log(
        `!! ${missed.length} of ${measured} reads did not answer 2xx with the expected count:\n  ${missed.join('\n  ')}`
      );
    else console.log(`every read answered 2xx with the expected count: ${measured} of ${measured}`);
  } catch (err) {
    failure = err;
    // A request cut off by the memory guard's stop: the guard's reason is the cause.
    try {
      guard?.check();
    } catch (tripped) {
      failure = tripped;
    }
  } finally {
    guard?.stop();
    await reader.close();
    await client?.close();
    await stack?.stop().catch((err: unknown) => (failure ??= err));
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

/**
 * Waits until the stack's key-tree indexer (store/ledger/key-tree-indexer.ts) covers `size` entries: prefix reads
 * take the regex query until it is within 2,048 entries of the head, and a fill is only done once it is.
 */
async function keyTreeAt(ledger: Ledger, size: number): Promise<{ seconds: number }> {
  const t0 = Date.now();
  for (let logged = t0; ;) {
    const indexed = (await ledger.keyTree.indexedSize()) ?? 0;
    if (indexed >= size) return { seconds: (Date.now() - t0) / 1000 };
    if (Date.now() - logged > 30_000) {
      console.log(`  key tree: ${indexed}/${size} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      logged = Date.now();
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Every node's id, for the node reads' floor (read once per size, outside any measurement). */
async function allNodeIds(db: Db): Promise<string[]> {
  const docs = await db
    .collection<{ _id: string }>('nodes')
    .find({}, { projection: { _id: 1 } })
    .batchSize(100_000)
    .toArray();
  return docs.map((d) => d._id);
}
