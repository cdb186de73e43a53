/**
 * `npm run bench:heartbeat` keeps the output of the stack it starts in a log file and names it: at the end of a
 * run, and when it fails, together with the stack's last lines (a failure with a trace id also gets the lines
 * about that request). A tiny run (4 nodes, 1 s phases, 3 s offline timeout) and a stack that cannot start.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

function bench(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn('npm', ['run', 'bench:heartbeat'], {
    cwd: ROOT,
    env: { ...process.env, MONGODB_URI: '', TEMPORAL_ADDRESS: '', WORKFLOW_BUNDLE_PATH: process.env.ZH_TEST_WORKFLOW_BUNDLE!, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, output })));
}

it('names the stack log at the end of a run', async () => {
  const run = await bench({ BENCH_NODES: '4', BENCH_SECONDS: '1', BENCH_STOP: '1', BENCH_OFFLINE_AFTER_S: '3' });
  expect(run.output).toMatch(/offline detected for 1\/1 stopped nodes/);
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
