/**
 * npm run bench:ledger — ledger append throughput and latency against the embedded stack (its own FerretDB, or
 * MONGODB_URI), with the same number of bare insertOne calls into a scratch collection as the baseline, measured
 * in the same run. Then verify time and memory (live heap after collections, and RSS) for 10k and 100k entries
 * (BENCH_VERIFY_SIZES to change).
 * Prints figures and ratios; asserts nothing. FerretDB's output goes to a log file (stack-log.ts), named when the
 * bench fails and at its end.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { MongoClient } from 'mongodb';
import { Ledger } from '../../store/ledger/ledger';
import { verifyLedger } from '../../store/ledger/ledger-verify';
import { ensureIndexes } from '../../store/mongo';
import { startFerretDb } from '../stack/ferretdb';
import { StackLog } from './stack-log';

const OPS = Number(process.env.BENCH_OPS ?? 2000);
const CONCURRENCY = [1, 16, 64];
const VERIFY_SIZES = (process.env.BENCH_VERIFY_SIZES ?? '10000,100000').split(',').map(Number);

// A full garbage collection on demand (for measuring live memory), without having to start node with --expose-gc.
v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

interface Figures {
  opsPerSec: number;
  p50: number;
  p99: number;
}

async function run(concurrency: number, ops: number, op: (i: number) => Promise<unknown>): Promise<Figures> {
  const latencies: number[] = [];
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < ops) {
        const i = next++;
        const t0 = process.hrtime.bigint();
        await op(i);
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    })
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!;
  return { opsPerSec: ops / seconds, p50: pct(50), p99: pct(99) };
}

const fmt = (f: Figures) => `${f.opsPerSec.toFixed(0).padStart(6)} ops/s   p50 ${f.p50.toFixed(2).padStart(7)} ms   p99 ${f.p99.toFixed(2).padStart(7)} ms`;

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-bench-'));
  const log = new StackLog('ledger');
  let stop = async () => undefined as void;
  let uri = process.env.MONGODB_URI;
  let failure: unknown = null;
  try {
    if (!uri) {
      const ferret = await startFerretDb({ dataDir, echo: false, logFile: log.path });
      uri = ferret.uri;
      stop = () => ferret.stop();
    }
    await measure(uri);
  } catch (err) {
    failure = err;
  } finally {
    await stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  if (failure) {
    log.reportFailure(failure);
    process.exit(1);
  }
  log.reportSuccess();
}

async function measure(uri: string): Promise<void> {
  const client = await MongoClient.connect(uri, { retryWrites: false });
  try {
    console.log(`bench:ledger — ${OPS} appends per concurrency level, against ${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded FerretDB (SQLite)'}`);
    for (const c of CONCURRENCY) {
      const db = client.db(`bench_c${c}_${Date.now()}`);
      await ensureIndexes(db);
      const scratch = db.collection('scratch');
      const baseline = await run(c, OPS, (i) => scratch.insertOne({ i, key: `bench.insert.${i}`, value_json: JSON.stringify({ i, payload: 'x'.repeat(64) }), created_at: new Date().toISOString() }));
      const ledger = new Ledger(db);
      const appends = await run(c, OPS, (i) => ledger.append({ kind: 'truth', key: `bench.append.${i}`, value: { i, payload: 'x'.repeat(64) }, truth_type: 'data', did: 'did:bench:writer' }));
      console.log(`concurrency ${String(c).padStart(2)}  bare insertOne: ${fmt(baseline)}`);
      console.log(`                ledger append:  ${fmt(appends)}`);
      console.log(`                ratio (append cost / insert cost): ${(baseline.opsPerSec / appends.opsPerSec).toFixed(2)}x time per op, p50 ${(appends.p50 / baseline.p50).toFixed(2)}x`);
      await db.dropDatabase();
    }

    for (const size of VERIFY_SIZES) {
      const db = client.db(`bench_verify_${size}_${Date.now()}`);
      await ensureIndexes(db);
      const ledger = new Ledger(db);
      const fillStart = Date.now();
      await run(64, size, (i) => ledger.append({ kind: 'truth', key: `bench.verify.${i}`, value: { i }, truth_type: 'data', did: 'did:bench:writer' }));
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

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
