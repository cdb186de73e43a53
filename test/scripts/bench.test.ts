/**
 * `npm run bench:heartbeat` keeps the output of the stack it starts in a log file and names it: at the end of a
 * run, and when it fails, together with the stack's last lines (a failure with a trace id also gets the lines
 * about that request). A tiny run (4 nodes, 1 s phases, 3 s offline timeout), a stack that cannot start, and a
 * stack that goes away in the middle of a run.
 */
import fs from 'node:fs';
import { runBench } from './run-bench';

const bench = (
  env: Record<string, string>,
  onOutput: (text: string) => void = () => undefined,
  script = 'bench:heartbeat'
) => runBench(script, env, onOutput);

it('names the stack log at the end of a run', async () => {
  const run = await bench({ BENCH_NODES: '4', BENCH_SECONDS: '1', BENCH_STOP: '1', BENCH_OFFLINE_AFTER_S: '3' });
  expect(run.output).toMatch(/mass silence: 1 nodes stopped at once; 1 offline within/);
  const named = /the stack's log: (\S+)/.exec(run.output);
  expect(named).not.toBeNull();
  expect(run.code).toBe(0);
  const log = fs.readFileSync(named![1]!, 'utf8');
  expect(log).toMatch(/\[stack\] ready in/);
  expect(log).toMatch(/\[stack\] stopped/);
  fs.rmSync(named![1]!);
}, 180_000);

it('names the stack log and shows its last lines when the stack fails', async () => {
  const run = await bench({ BENCH_NODES: '4', NODE_CACHE_TTL_MS: 'not-a-number' });
  expect(run.code).not.toBe(0);
  expect(run.output).toMatch(/bench failed: the stack exited during start-up/);
  const named = /the stack's whole log is kept at (\S+)/.exec(run.output);
  expect(named).not.toBeNull();
  // The cause, in the bench's own output and in the file it names.
  expect(run.output).toMatch(/the stack's last log lines:[\s\S]*NODE_CACHE_TTL_MS/);
  expect(fs.readFileSync(named![1]!, 'utf8')).toMatch(/NODE_CACHE_TTL_MS/);
  fs.rmSync(named![1]!);
}, 120_000);

/** The launcher (scripts/start.ts) running with DATA_DIR=`dataDir`, found in /proc. */
function launcherOf(dataDir: string): number | undefined {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (
        cmdline.includes('scripts/start.ts') &&
        fs.readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`DATA_DIR=${dataDir}`)
      )
        return Number(entry);
    } catch {
      /* gone, or not ours */
    }
  }
  return undefined;
}

it('names the stack log when the stack goes away in the middle of a run', async () => {
  let stopped = false;
  const run = await bench(
    { BENCH_NODES: '4', BENCH_SECONDS: '5', BENCH_STOP: '1', BENCH_OFFLINE_AFTER_S: '3' },
    (text) => {
      const dir = /starting the stack \(npm start\) in (\S+)/.exec(text)?.[1];
      if (stopped || !dir || !/registered 4 nodes/.test(text)) return;
      const pid = launcherOf(dir);
      if (!pid) return;
      stopped = true;
      process.kill(pid, 'SIGINT');
    }
  );
  expect(stopped).toBe(true);
  expect(run.code).toBe(1);
  // Whichever request notices first (a database read, or the check that the stack still runs).
  expect(run.output).toMatch(/bench failed: (the stack exited|.*ECONNREFUSED)/);
  const named = /the stack's whole log is kept at (\S+)/.exec(run.output);
  expect(named).not.toBeNull();
  expect(fs.readFileSync(named![1]!, 'utf8')).toMatch(/\[stack\] SIGINT: stopping everything in order/);
  fs.rmSync(named![1]!);
}, 180_000);

it('bench:ledger, CI-sized: writes through HTTP beside bare inserts, reads meanwhile, and overload', async () => {
  // Figures are printed, not asserted: this only proves the bench runs end to end and reports every measurement.
  const run = await bench(
    {
      BENCH_PHASES: 'http',
      BENCH_LEDGER_SIZES: '100',
      BENCH_OPS: '40',
      BENCH_CONCURRENCY: '1,16',
      BENCH_DIDS: '4',
      BENCH_OVERLOAD_CLIENTS: '200',
      BENCH_OVERLOAD_S: '2',
      BENCH_WARMUP_OPS: '20',
      BENCH_ROUNDS: '2'
    },
    undefined,
    'bench:ledger'
  );
  expect(run.code).toBe(0);
  expect(run.output).toContain('through the whole stack on FerretDB/PostgreSQL');
  expect(run.output.match(/ledger filled to \d+ entries/g)).toHaveLength(1);
  expect(
    run.output.match(/warm-up \(not measured\): 20 bare inserts and 20 writes per API process of each configuration/g)
  ).toHaveLength(1);
  expect(run.output.match(/bare insertOne: +\d+ ops\/s .*\(median of 2 rounds: \d+-\d+\/s\)/g)).toHaveLength(2);
  expect(
    run.output.match(
      /POST \/api\/report\/truth: +\d+ ops\/s .*x of bare insert \(\d+\.\d+-\d+\.\d+x\); GET \/api\/status meanwhile p99 .*; status-data reads p99/g
    )
  ).toHaveLength(4);
  expect(run.output.match(/overload: 200 clients for 2 s: .*×200/g)).toHaveLength(1);
  // Every quota slot spent is an entry (a refused or withdrawn write spends none); every acknowledged write is there.
  const settled = [...run.output.matchAll(/(\d+) entries for (\d+) acknowledged writes; quota slots spent (\d+)/g)];
  expect(settled).toHaveLength(1);
  for (const [, entries, acknowledged, slots] of settled) {
    expect(Number(entries)).toBeGreaterThanOrEqual(Number(acknowledged));
    expect(slots).toBe(entries);
  }
  const named = /the stack's log: (\S+)/.exec(run.output);
  if (named) fs.rmSync(named[1]!, { force: true });
}, 420_000);
