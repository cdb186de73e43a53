/**
 * `npm start` as a user runs it: the whole stack comes up on the embedded servers, the Temporal Web UI shows the
 * worker polling, a second start after a crash (launcher killed with SIGKILL, children left running) works, and
 * SIGINT stops every process. FerretDB stores in the launcher's own PostgreSQL server (CI installs the package; the
 * launcher installs it where it may), its cluster in this data dir under the system's temporary directory.
 */
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findNginx } from '../../scripts/stack/nginx';
import { freePort, isAlive, typescriptProcess } from '../../scripts/stack/process';
import { eventually, http } from '../support/service';

const ROOT = path.resolve(__dirname, '..', '..');
let env: Record<string, string>;
let dataDir: string;

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zhongshu-start-'));
  env = { DATA_DIR: dataDir, LOG_LEVEL: 'warn', TEMPORAL_TASK_QUEUE: 'start-test' };
  for (const name of [
    'PORT',
    'BACKUP_PORT',
    'HUB_PORT',
    'COMMERCIAL_PORT',
    'MEMORY_PORT',
    'DAEMON_PORT',
    'FERRETDB_PORT',
    'POSTGRES_PORT',
    'TEMPORAL_PORT',
    'TEMPORAL_UI_PORT',
    'DEPLOY_WEB_PORT'
  ]) {
    env[name] = String(await freePort());
  }
});
const launchers: ChildProcess[] = [];
afterAll(() => {
  // After a failure, nothing of this test's stacks is left running (the launchers, then what they recorded).
  for (const child of launchers) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const pid of pids().filter(isAlive)) process.kill(pid, 'SIGKILL');
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function launch(): { child: ChildProcess; output: () => string; ready: Promise<void> } {
  // As `npm start` runs it (node --import tsx scripts/start.ts).
  const { binary, args } = typescriptProcess(path.join(ROOT, 'scripts', 'start.ts'));
  const child = spawn(binary, args, {
    env: { ...process.env, ...env, MONGODB_URI: '', TEMPORAL_ADDRESS: '', WORKFLOW_BUNDLE_PATH: '' },
    stdio: ['ignore', 'pipe', 'pipe']
  });
  launchers.push(child);
  let text = '';
  child.stdout!.on('data', (d) => (text += d));
  child.stderr!.on('data', (d) => (text += d));
  const ready = eventually(
    async () => (/ready in [\d.]+ s/.test(text) ? true : undefined),
    120000,
    'the stack to be ready'
  ).then(() => undefined);
  return { child, output: () => text, ready };
}

const pids = () =>
  fs.existsSync(path.join(dataDir, 'run'))
    ? fs
        .readdirSync(path.join(dataDir, 'run'))
        .map((f) => Number(fs.readFileSync(path.join(dataDir, 'run', f), 'utf8')))
    : [];
// Running (a leftover stopped may linger as a zombie until init reaps it: stopped all the same).
const alive = isAlive;

it('starts everything, survives a crashed launcher, and stops cleanly on SIGINT', async () => {
  const first = launch();
  await first.ready;
  const summary = await http('GET', `http://127.0.0.1:${env.PORT}/a2a/endpoints/summary`);
  expect(summary.status).toBe(200);
  const queue = await eventually(
    async () => {
      const res = await http(
        'GET',
        `http://127.0.0.1:${env.TEMPORAL_UI_PORT}/api/v1/namespaces/default/task-queues/start-test?taskQueueType=1`
      );
      return res.status === 200 && (res.body.pollers ?? []).length > 0 ? res.body : undefined;
    },
    30000,
    'the worker polling in the Temporal Web UI'
  );
  expect(queue.pollers.length).toBeGreaterThan(0);

  expect(first.output()).toContain(`starting PostgreSQL on 127.0.0.1:${env.POSTGRES_PORT}`);
  expect(first.output()).toContain(
    `starting FerretDB on 127.0.0.1:${env.FERRETDB_PORT} (on PostgreSQL ${env.POSTGRES_PORT})`
  );

  // A crash: the launcher dies without stopping its children (PostgreSQL, FerretDB, Temporal, the worker, the API,
  // and nginx for deployment arbitration where it is installed).
  const leftovers = pids();
  expect(leftovers).toHaveLength(5 + (findNginx('/usr/sbin/nginx') ? 1 : 0));
  first.child.kill('SIGKILL');
  await new Promise((r) => first.child.once('exit', r));
  expect(leftovers.every(alive)).toBe(true);

  const second = launch();
  await second.ready;
  expect(second.output()).toMatch(/stopping leftover/);
  // PostgreSQL's leftover stopped by its fast shutdown, not by the SIGKILL after it (which a smart shutdown needed).
  expect(second.output()).toMatch(/stopping leftover postgres \(pid \d+\)/);
  expect(second.output()).not.toMatch(/leftover postgres .* still runs after/);
  expect(leftovers.some(alive)).toBe(false);
  expect((await http('GET', `http://127.0.0.1:${env.PORT}/health`)).body.mongo).toBe('up');

  const running = pids();
  second.child.kill('SIGINT');
  const code = await new Promise((r) => second.child.once('exit', r));
  expect(code).toBe(0);
  expect(running.some(alive)).toBe(false);
  expect(pids()).toEqual([]);
}, 240000);
