/**
 * npm run bench:sdk — what a node's truth writes cost through the node SDKs (sdk/typescript, sdk/python) on the whole
 * local stack (npm start: FerretDB on its PostgreSQL, the Temporal dev server, the worker, the API). Per SDK,
 * BENCH_SDK_WRITES (2,000) writes made as fast as the caller can, each then followed to its acknowledgement:
 *   - the write() call (what the caller's thread is held for): p50, p99, max, and the calls over 1 ms;
 *   - from the call to the hub's acknowledgement: p50, p99; and the time until every write landed.
 * Beside them, in the same run, the floor: the same writes as a node without the SDK makes them, one
 * POST /api/report/truth at a time with an Idempotency-Key, each holding its caller for the round trip. Each run's
 * writes are then counted in the ledger by key: every one landed, none twice. The Python node is
 * scripts/bench/sdk-node.py, run with the CI venv's Python (scripts/ci/python-venv.sh) and the SDK from its path.
 * Beside the TypeScript SDK's calls, in the same loop, two controls without the SDK (typescriptNode): what building
 * a journal line costs, and building and writing it to a file; their calls over 1 ms are the machine's own.
 * BENCH_SDK_PIN=1 pins the stack to CPU 0 and the callers to CPU 1 (a node on a core of its own, as on its own
 * machine). Prints figures; asserts nothing. On a 2-core machine the SDK's sender and the stack share the cores with the
 * caller: a call over 1 ms is the caller waiting for a core (the TypeScript and Python tests' figures in
 * docs/node-sdk.md show as many with no disk sync at all).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { Agent } from 'undici';
import { HubNode } from '../../sdk/typescript/src';
import { StackLog } from './stack-log';
import { startBenchStack, type BenchStack } from './stack';

const ROOT = path.resolve(__dirname, '..', '..');
const WRITES = Math.max(1, Number(process.env.BENCH_SDK_WRITES ?? 2000));
/** BENCH_SDK_PIN=1: the stack on CPU 0 and this process (the callers: the floor, both SDKs) on CPU 1 (pinStack). */
const PIN = process.env.BENCH_SDK_PIN === '1';
const DID = 'did:bench:sdk-node';

interface Figures {
  name: string;
  /** The caller's time per write, ms. */
  calls: number[];
  /** From each call to its acknowledgement, ms. */
  acks: number[];
  /** Until every write was acknowledged, s. */
  landedS: number;
  prefix: string;
  /** A control measured beside the TypeScript SDK's calls: no writes to the hub, nothing to count in the ledger. */
  control?: boolean;
}

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
};
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 0.1 ? x.toFixed(2) : x.toFixed(3));

/** The floor: one POST at a time, the caller held for each. */
async function floor(stack: BenchStack, prefix: string): Promise<Figures> {
  const pool = new Agent({ connections: 1, keepAliveTimeout: 60_000 });
  const calls: number[] = [];
  const started = performance.now();
  for (let i = 0; i < WRITES; i++) {
    const body = JSON.stringify({ key: `${prefix}.${i}`, value: { i, bench: 'sdk' }, truth_type: 'data' });
    const t0 = performance.now();
    const res = await pool.request({
      origin: stack.base,
      path: '/api/report/truth',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-did': DID, 'idempotency-key': `${prefix}-${i}` },
      body
    });
    const text = await res.body.text();
    calls.push(performance.now() - t0);
    if (res.statusCode !== 200) throw new Error(`floor write ${i}: ${res.statusCode} ${text.slice(0, 200)}`);
  }
  await pool.close();
  return {
    name: 'no SDK: one POST at a time',
    calls,
    acks: calls,
    landedS: (performance.now() - started) / 1000,
    prefix
  };
}

/**
 * The TypeScript SDK's burst, and beside each of its calls, in the same loop (so under the same load, at the same
 * moments), two controls without the SDK: building a journal line of the same shape (JSON, no system call), and
 * building it and handing it to the kernel (write(2) to a scratch file, the one system call a write() must make to
 * survive a crash of its process). Their calls over 1 ms are this machine's, whatever the code.
 */
async function typescriptNode(stack: BenchStack, prefix: string, stateDir: string): Promise<Figures[]> {
  const node = new HubNode({ hubUrl: stack.base, stateDir, did: DID, heartbeat: false, verify: false });
  await node.start();
  const scratch = fs.openSync(path.join(stateDir, 'control.jsonl'), 'a');
  const line = (i: number) =>
    `${JSON.stringify({ t: 'enq', id: `c_${i}`, key: `${prefix}.${i}`, value: { i, bench: 'sdk' }, at: new Date().toISOString() })}\n`;
  const calls: number[] = [];
  const jsonOnly: number[] = [];
  const kernel: number[] = [];
  const kept: string[] = [];
  const acks: Promise<number>[] = [];
  const started = performance.now();
  for (let i = 0; i < WRITES; i++) {
    let t0 = performance.now();
    kept.push(line(i));
    jsonOnly.push(performance.now() - t0);
    t0 = performance.now();
    fs.writeSync(scratch, line(i));
    kernel.push(performance.now() - t0);
    t0 = performance.now();
    const handle = node.write({ key: `${prefix}.${i}`, value: { i, bench: 'sdk' } });
    calls.push(performance.now() - t0);
    const sent = t0;
    acks.push(handle.done.then(() => performance.now() - sent));
  }
  const acked = await Promise.all(acks);
  const landedS = (performance.now() - started) / 1000;
  fs.closeSync(scratch);
  await node.stop();
  const control = (name: string, times: number[]): Figures => ({
    name,
    calls: times,
    acks: [],
    landedS: 0,
    prefix,
    control: true
  });
  return [
    control('control: a journal line built (no SDK, no system call)', jsonOnly),
    control('control: a journal line built and written (write(2), no SDK)', kernel),
    { name: 'TypeScript SDK', calls, acks: acked, landedS, prefix }
  ];
}

async function pythonNode(stack: BenchStack, prefix: string, stateDir: string): Promise<Figures> {
  const venv = execFileSync('bash', [path.join(ROOT, 'scripts/ci/python-venv.sh')], { encoding: 'utf8' }).trim();
  const args = JSON.stringify({ hub: stack.base, did: DID, state_dir: stateDir, writes: WRITES, prefix });
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn(path.join(venv, 'bin/python'), [path.join(__dirname, 'sdk-node.py'), args], {
      env: { ...process.env, PYTHONPATH: path.join(ROOT, 'sdk/python/src'), PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe']
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // 'close', not 'exit': the figures are the last line of stdout, read to its end.
    child.once('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`the Python node exited ${code}: ${stderr.slice(-2000)}`))
    );
  });
  const r = JSON.parse(out.trim().split('\n').at(-1)!) as {
    calls: number[];
    acks: number[];
    landed_s: number;
    landed: boolean;
  };
  if (!r.landed) throw new Error(`the Python node saw ${r.acks.length} of ${WRITES} writes acknowledged in 600 s`);
  return { name: 'Python SDK', calls: r.calls, acks: r.acks, landedS: r.landed_s, prefix };
}

/**
 * A node has its own machine; on this one it shares the cores with the stack. With BENCH_SDK_PIN=1 every process of
 * the stack (the bench's descendants, and so the processes they start later) is pinned to CPU 0 and this process
 * (and the Python node it spawns) to CPU 1 with taskset, so a caller never waits for a core the stack holds.
 */
function pinStack(): string {
  if (os.cpus().length < 2) return 'not pinned: one CPU';
  const table = execFileSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number) as [number, number]);
  const descendants = new Set<number>();
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of table)
      if ((ppid === process.pid || descendants.has(ppid)) && !descendants.has(pid)) {
        descendants.add(pid);
        grew = true;
      }
  }
  for (const pid of descendants) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', '0', String(pid)], { stdio: 'ignore' });
    } catch {
      descendants.delete(pid); // (exited since: a short-lived helper)
    }
  }
  execFileSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
  return `the stack's ${descendants.size} processes pinned to CPU 0, the callers to CPU 1`;
}

async function main(): Promise<void> {
  const log = new StackLog('sdk');
  let stack: BenchStack | undefined;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-bench-sdk-'));
  try {
    console.log(
      `bench:sdk — ${WRITES} truth writes per client, made as fast as the caller can, on the whole stack (FerretDB/postgresql)`
    );
    stack = await startBenchStack('sdk', log, { TRUTH_DAILY_QUOTA: '100000000' });
    if (PIN) console.log(`  ${pinStack()}`);
    const admin = await fetch(`${stack.base}/admin/dids`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ did: DID })
    });
    if (admin.status >= 300) throw new Error(`registering ${DID}: ${admin.status} ${await admin.text()}`);
    const run = Date.now().toString(36);
    const results: Figures[] = [];
    for (const [what, go] of [
      ['floor', async () => [await floor(stack!, `bench.sdk.${run}.floor`)]],
      ['typescript', () => typescriptNode(stack!, `bench.sdk.${run}.ts`, path.join(scratch, 'ts'))],
      ['python', async () => [await pythonNode(stack!, `bench.sdk.${run}.py`, path.join(scratch, 'py'))]]
    ] as const) {
      const figures = await go();
      const f = figures.at(-1)!;
      console.log(`  ${what}: ${WRITES} writes landed in ${f.landedS.toFixed(1)} s`);
      results.push(...figures);
    }

    const client = await MongoClient.connect(stack.mongoUri, { retryWrites: false });
    try {
      const ledger = client.db(stack.dbName).collection('ledger');
      console.log(
        `\n${WRITES} writes per client; ms. "call": what write() held the caller (the floor: its POST's round trip)`
      );
      console.log(
        '| client | call p50 | call p99 | call max | calls over 1 ms | to ack p50 | to ack p99 | all landed in | writes/s | in the ledger (distinct keys) |'
      );
      console.log('|---|---|---|---|---|---|---|---|---|---|');
      for (const f of results) {
        if (f.control) {
          console.log(
            `| ${f.name} | ${ms(pct(f.calls, 0.5))} | ${ms(pct(f.calls, 0.99))} | ${ms(Math.max(...f.calls))} | ${f.calls.filter((c) => c > 1).length} | | | | | |`
          );
          continue;
        }
        const filter = { key: { $regex: `^${f.prefix.replace(/\./g, '\\.')}\\.` } };
        const [count, keys] = await Promise.all([ledger.countDocuments(filter), ledger.distinct('key', filter)]);
        console.log(
          `| ${f.name} | ${ms(pct(f.calls, 0.5))} | ${ms(pct(f.calls, 0.99))} | ${ms(Math.max(...f.calls))} | ${f.calls.filter((c) => c > 1).length} | ${ms(pct(f.acks, 0.5))} | ${ms(pct(f.acks, 0.99))} | ${f.landedS.toFixed(1)} s | ${(WRITES / f.landedS).toFixed(0)} | ${count} (${keys.length})${count === WRITES && keys.length === WRITES ? '' : ' ≠ writes'} |`
        );
      }
    } finally {
      await client.close();
    }
    log.reportSuccess();
  } catch (err) {
    log.reportFailure(err);
    process.exitCode = 1;
  } finally {
    await stack?.stop();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

void main();
