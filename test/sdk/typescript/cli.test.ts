/**
 * The zhongshu-node CLI against the real embedded stack, as a person runs it: --help for each command, join (the
 * credentials file 0600), write (acknowledged with its seq), status, verify (OK, then consistent with the last
 * checkpoint after more writes, then FAIL through a proxy that tampers with the proof), usage errors, no node key in
 * anything it prints, even with --verbose; `run --exec` and `run --call` work tasks an A2A client submitted (done,
 * failed, canceled with the command's processes killed, timed out).
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { typescriptProcess } from '../../../scripts/stack/process';
import { TaskStore } from '../../../store/federation/tasks';
import { sendA2AWork } from '../../support/a2a-client';
import { issueHomologousToken, registerDid } from '../../support/credentials';
import { eventually, http, startTestService, type TestService } from '../../support/service';
import { HubProxy } from './hub-proxy';

const CLI = typescriptProcess(path.resolve(__dirname, '../../../sdk/typescript/src/cli.ts'));
let svc: TestService;
let did: string;
let key: string;
const state = fs.mkdtempSync(path.join(os.tmpdir(), 'node-sdk-cli-'));
const printed: string[] = [];

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(CLI.binary, [...CLI.args, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      printed.push(stdout, stderr);
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  // A 3 s lease: the worker renews it every second, and so hears of a cancel within about a second.
  svc = await startTestService({ TASK_LEASE_S: '3' }, { worker: true });
  did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:cli-node');
  key = (await http('GET', `${svc.urls.main}/tlog/verifier-key`)).text.trim();
}, 90_000);

afterAll(async () => {
  await svc?.close();
  fs.rmSync(state, { recursive: true, force: true });
});

it('prints the usage of every command with --help, and refuses bad usage with exit 2', async () => {
  const top = await cli('--help');
  expect(top.code).toBe(0);
  for (const command of ['join', 'run', 'write', 'status', 'verify']) {
    expect(top.stdout).toContain(`  ${command} `);
    const help = await cli(command, '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(new RegExp(`^usage: zhongshu-node ${command}`));
  }
  expect((await cli('fly')).code).toBe(2);
  expect((await cli('write', 'sdk.cli.x', 'not json', '--hub', svc.urls.main, '--did', did)).code).toBe(2);
  // run's task options: one way at a time, a URL for --call, the others only with one of them.
  const both = await cli('run', '--hub', svc.urls.main, '--exec', 'true', '--call', 'http://127.0.0.1:1/x');
  expect([both.code, both.stderr]).toEqual([2, expect.stringContaining('give --exec or --call, not both')]);
  expect((await cli('run', '--hub', svc.urls.main, '--call', 'ftp://127.0.0.1/x')).code).toBe(2);
  expect((await cli('run', '--hub', svc.urls.main, '--max-tasks', '2')).code).toBe(2);
  expect((await cli('run', '--hub', svc.urls.main, '--exec', 'true', '--task-timeout', '0')).code).toBe(2);
}, 60_000);

it('joins, writes, shows the status and verifies; a tampered proof fails verify', async () => {
  const common = ['--hub', svc.urls.main, '--state', state, '--did', did, '--verifier-key', key, '--verbose'];
  const join = await cli('join', ...common, '--name', 'cli-node', '--capability', 'summarize');
  expect(join.code).toBe(0);
  expect(join.stdout).toMatch(/^ext-custom-\d+ pending_review\n$/);
  expect(fs.statSync(path.join(state, 'credentials.json')).mode & 0o777).toBe(0o600);

  const write = await cli('write', 'sdk.cli.one', '{"answer":42}', ...common);
  expect(write.code).toBe(0);
  expect(write.stdout).toMatch(/^w_\S+ acknowledged seq \d+\n$/);
  const status = await cli('status', ...common);
  expect(status.code).toBe(0);
  expect(status.stdout).toMatch(/entries, root [0-9a-f]{64}/);
  expect(status.stdout).toMatch(/node ext-custom-\d+ pending_review/);
  expect(status.stdout).toMatch(/outbox pending 0 held 0 acknowledged 1 unverified 1 failed 0/);

  const first = await cli('verify', ...common);
  expect(first.stdout).toMatch(/^OK 127\.0\.0\.1:\d+\/tlog: \d+ entries/);
  expect(first.stdout).toContain('proven 1 of 1 acknowledged writes');
  expect(first.code).toBe(0);

  // More writes, then verify again: the new checkpoint must be consistent with the one the first verify kept.
  expect((await cli('write', 'sdk.cli.two', '{"answer":43}', ...common)).code).toBe(0);
  const second = await cli('verify', ...common);
  expect(second.code).toBe(0);
  expect(second.stdout).toContain('proven 1 of 1 acknowledged writes');

  const proxy = await new HubProxy(svc.urls.main).start();
  try {
    proxy.tamperProof = true;
    const viaProxy = ['--hub', proxy.url, '--state', path.join(state, 'proxied'), '--did', did, '--verifier-key', key];
    expect((await cli('write', 'sdk.cli.three', '{"answer":44}', ...viaProxy)).code).toBe(0);
    const bad = await cli('verify', ...viaProxy);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/^FAIL: inclusion: entry \d+ is not proven/m);
  } finally {
    await proxy.close();
  }

  // run: beats (the first answer shows the state), sends the outbox, and stops cleanly on Ctrl-C (SIGINT).
  const run = spawn(CLI.binary, [...CLI.args, 'run', ...common], { stdio: ['ignore', 'pipe', 'pipe'] });
  let runOut = '';
  run.stdout.on('data', (d: Buffer) => (runOut += d.toString()));
  run.stderr.on('data', (d: Buffer) => printed.push(d.toString()));
  await eventually(
    async () => (/state unknown -> pending_review/.test(runOut) ? true : undefined),
    20_000,
    'run beats'
  );
  expect(runOut).toMatch(/running as ext-custom-\d+/);
  run.kill('SIGINT');
  const code = await new Promise((r) => run.once('exit', r));
  expect(code).toBe(0);
  printed.push(runOut);

  const apiKey = JSON.parse(fs.readFileSync(path.join(state, 'credentials.json'), 'utf8')).api_key as string;
  expect(printed.join('')).not.toContain(apiKey);
}, 90_000);

describe('run works tasks', () => {
  const dir = path.join(state, 'worker');
  let reviewer: string;
  let common: string[];

  /** The work comes from an A2A client (@a2a-js/sdk): one message per task, its type in the metadata; ids in order. */
  const submit = (...types: string[]) =>
    sendA2AWork(
      svc.urls.main,
      { 'x-zr-token': reviewer },
      types.map((type, i) => ({
        messageId: `${type}-${Date.now()}-${i}`,
        taskType: type,
        capabilities: ['cli-work'],
        data: { n: 7 }
      }))
    );
  /** The message a task came in as, as a worker receives it in the task's payload: the data part { n: 7 }. */
  const message = expect.objectContaining({ parts: [expect.objectContaining({ data: { n: 7 } })] });
  const task = async (id: string) =>
    (await http('GET', `${svc.urls.hub}/a2a/task/${id}`, { headers: { 'x-zr-token': reviewer } })).body.task;

  /** `zhongshu-node run` with these options; its stdout is kept line by line, its stderr in `printed`. */
  function run(...args: string[]) {
    const child = spawn(CLI.binary, [...CLI.args, 'run', ...common, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, PIDS: dir }
    }) as ChildProcessWithoutNullStreams;
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => printed.push(d.toString()));
    const line = (pattern: RegExp, what: string) =>
      eventually(async () => stdout.match(pattern) ?? undefined, 20_000, what).catch((err: Error) => {
        throw new Error(`${err.message}; run printed:\n${stdout}`);
      });
    const stop = async () => {
      child.kill('SIGINT');
      const code = await new Promise((r) => child.once('exit', r));
      printed.push(stdout);
      return code;
    };
    return { line, stop };
  }

  beforeAll(async () => {
    reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken);
    const at = ['--hub', svc.urls.main, '--state', dir];
    common = [...at, '--poll', '0.5'];
    const join = await cli('join', ...at, '--name', 'cli-worker', '--capability', 'cli-work');
    expect(join.code).toBe(0);
    const nodeId = join.stdout.split(' ')[0];
    const approved = await http('POST', `${svc.urls.main}/a2a/review/approve`, {
      headers: { 'x-zr-token': reviewer },
      body: { node_id: nodeId, reason: 'cli worker' }
    });
    expect(approved.status).toBe(200);
  }, 60_000);

  it("--exec: completes with stdout, fails with stderr, kills a canceled task's processes, times out", async () => {
    // The command: one case per task type; it reads the task from stdin and its type from the environment.
    const script = path.join(dir, 'task.sh');
    fs.writeFileSync(
      script,
      [
        'case "$ZHONGSHU_TASK_TYPE" in',
        '  cli.echo) printf \'{"type":"%s","attempt":%s,"task":%s}\' "$ZHONGSHU_TASK_TYPE" "$ZHONGSHU_TASK_ATTEMPT" "$(cat)" ;;',
        '  cli.boom) echo "loading the model" >&2; echo "boom: no such model" >&2; exit 3 ;;',
        '  cli.wait) sleep 60 & echo "$$ $!" > "$PIDS/$ZHONGSHU_TASK_ID.pids"; wait ;;',
        '  cli.slow) sleep 60 ;;',
        'esac',
        ''
      ].join('\n')
    );
    const worker = run('--exec', `sh '${script}'`, '--max-tasks', '4', '--task-timeout', '4');
    await worker.line(/running as ext-custom-\d+; working tasks with a shell command/, 'running');
    const [echo, boom, wait, slow] = await submit('cli.echo', 'cli.boom', 'cli.wait', 'cli.slow');
    // The waiting task's command and the sleep it started are running; the submitter cancels it.
    const pidFile = path.join(dir, `${wait}.pids`);
    await eventually(async () => (fs.existsSync(pidFile) ? true : undefined), 20_000, 'the waiting command started');
    const pids = fs.readFileSync(pidFile, 'utf8').trim().split(' ').map(Number);
    expect(pids.every(alive)).toBe(true);
    expect((await new TaskStore(svc.db).cancel(wait!)).canceled).toBe(true);

    await worker.line(new RegExp(`task ${echo} cli.echo done in \\d+\\.\\d s`), 'echo done');
    await worker.line(new RegExp(`task ${boom} cli.boom failed after .*: the command exited with status 3`), 'boom');
    await worker.line(new RegExp(`task ${wait} cli.wait canceled`), 'wait canceled');
    await worker.line(new RegExp(`task ${slow} cli.slow failed after .*: the command timed out after 4 s`), 'slow');
    expect(pids.some(alive)).toBe(false); // the shell and the sleep it left in the background

    expect(await task(echo!)).toMatchObject({
      state: 'done',
      result: { type: 'cli.echo', attempt: 1, task: { task_id: echo, type: 'cli.echo', payload: { message } } }
    });
    expect(await task(boom!)).toMatchObject({
      state: 'failed',
      error: 'the command exited with status 3: loading the model | boom: no such model'
    });
    expect(await task(wait!)).toMatchObject({ state: 'canceled', result: null });
    expect(await task(slow!)).toMatchObject({ state: 'failed', error: 'the command timed out after 4 s' });
    expect(await worker.stop()).toBe(0);
  }, 60_000);

  it('--call: POSTs each task to a local endpoint; a 2xx JSON answer completes it, a 500 fails it', async () => {
    const received: { id?: string; type?: string; task: { payload: unknown } }[] = [];
    const endpoint = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const t = JSON.parse(body);
        received.push({ id: req.headers['x-zhongshu-task-id'] as string, type: t.type, task: t });
        if (req.url !== '/work' || t.type === 'cli.call.bad') {
          res.writeHead(500, { 'content-type': 'text/plain' });
          return res.end('model unavailable');
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ answer: t.payload.message.parts.find((p: { data?: { n: number } }) => p.data).data.n * 6 })
        );
      });
    });
    await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/work`;
    try {
      const worker = run('--call', url);
      await worker.line(/working tasks with POST http:\/\/127\.0\.0\.1:\d+\/work \(--call\)/, 'running');
      const [good] = await submit('cli.call.good');
      await worker.line(new RegExp(`task ${good} cli.call.good done`), 'good done');
      const [bad] = await submit('cli.call.bad');
      await worker.line(new RegExp(`task ${bad} cli.call.bad failed after .*: ${url} answered 500`), 'bad failed');
      expect(await worker.stop()).toBe(0);
      expect(await task(good!)).toMatchObject({ state: 'done', result: { answer: 42 } });
      expect(await task(bad!)).toMatchObject({ state: 'failed', error: `${url} answered 500: model unavailable` });
      expect(received.map((r) => [r.id, r.type, r.task.payload])).toEqual([
        [good, 'cli.call.good', { message }],
        [bad, 'cli.call.bad', { message }]
      ]);
      const apiKey = JSON.parse(fs.readFileSync(path.join(dir, 'credentials.json'), 'utf8')).api_key as string;
      expect(printed.join('')).not.toContain(apiKey);
    } finally {
      endpoint.closeAllConnections();
      await new Promise((r) => endpoint.close(r));
    }
  }, 60_000);
});

/** A process that exists and is not a zombie (Linux: /proc). */
function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
