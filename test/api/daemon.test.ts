/**
 * The local daemon over real HTTP (loopback listener) against the real stack, with the local OpenAI-compatible test
 * upstream counting its calls: two-factor dispatch (missing, forged, wrong-version and revoked factors make no call
 * and isolate the asset until an administrator releases it; a revocation between admission and execution stops the
 * task before its call), DAG order and parallelism, 400 for a cycle, 403 for a model off the whitelist, wait:false
 * with GET /dags and GET /tasks, the circuit breaker, a worker restarted mid-DAG, the audit chain verified by
 * `npm run daemon:verify` (edited, deleted and torn lines named), and the provider key nowhere on disk, in logs, in
 * the ledger or in workflow histories.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LEDGER_COLLECTION } from '../../store/ledger/entries';
import { daemonDagWorkflowId } from '../../contracts/daemon/dag.contract';
import { FakeOpenAi, startFakeOpenAi } from '../support/fake-openai';
import { eventually, http, startTestService, TestService } from '../support/service';

jest.setTimeout(240_000);
const ROOT = path.resolve(__dirname, '..', '..');
const PROVIDER_KEY = `sk-daemon-test-${Date.now()}-d41d8cd98f00b204e9800998ecf8427e`;
let svc: TestService;
let upstream: FakeOpenAi;
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-daemon-api-'));

beforeAll(async () => {
  upstream = await startFakeOpenAi('daemon');
  const file = path.join(configDir, 'providers.yaml');
  fs.writeFileSync(
    file,
    [
      'providers:',
      '  - name: local',
      `    base_url: ${upstream.baseUrl}`,
      '    api_key_env: DAEMON_TEST_PROVIDER_KEY',
      // Long enough for a loaded machine and for a call that outlasts a worker's 10 s grace time.
      '    timeout_ms: 60000',
      '    models:',
      '      - { id: free-model, free_tier: true, price: { prompt_per_1k: 1, completion_per_1k: 2 } }',
      '      - { id: paid-model }'
    ].join('\n')
  );
  svc = await startTestService(
    {
      LOG_LEVEL: 'debug',
      CHAT_PROVIDERS_FILE: file,
      DAEMON_TEST_PROVIDER_KEY: PROVIDER_KEY,
      DAEMON_BREAKER_THRESHOLD: '2',
      DAEMON_BREAKER_COOLDOWN_S: '1',
      DAEMON_MAX_PARALLEL: '2'
    },
    { logFiles: true }
  );
});
afterAll(async () => {
  await svc?.close();
  await upstream?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
});
beforeEach(() => upstream.reset());

type Asset = { asset_id: string; order_root: string };
async function issueAsset(): Promise<Asset> {
  const res = await http('POST', `${svc.urls.main}/admin/daemon-assets`, {
    headers: { authorization: `Bearer ${svc.adminToken}` },
    body: {}
  });
  expect(res.status).toBe(201);
  return res.body;
}
const factors = (a: Asset) => ({ 'x-asset-id': a.asset_id, 'x-order-root': a.order_root });
const admin = (p: string) =>
  http('POST', `${svc.urls.main}${p}`, { headers: { authorization: `Bearer ${svc.adminToken}` } });
const dispatch = (headers: Record<string, string>, body: unknown) =>
  http('POST', `${svc.urls.daemon}/dispatch`, { headers, body });
const one = { model: 'free-model', prompt: 'hello daemon' };

test('a single task runs through the model: DONE with the output hash, usage, cost and the audit root', async () => {
  const a = await issueAsset();
  const res = await dispatch(factors(a), one);
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({
    ok: true,
    status: 'DONE',
    asset_id: a.asset_id,
    workflow_id: `daemon-dag/${res.body.dag_id}`
  });
  const [t] = res.body.tasks;
  expect(t).toMatchObject({ task_id: `${res.body.dag_id}~task`, status: 'DONE', output: 'echo: hello daemon' });
  expect(t.output_sha256).toBe(require('node:crypto').createHash('sha256').update('echo: hello daemon').digest('hex'));
  expect(t.usage).toEqual({
    prompt_tokens: expect.any(Number),
    completion_tokens: expect.any(Number),
    total_tokens: expect.any(Number)
  });
  expect(t.cost).toEqual(expect.any(Number));
  expect(t.audit_root).toMatch(/^[0-9a-f]{64}$/);
  // A single task's result is also at the top level.
  expect(res.body).toMatchObject({
    task_id: t.task_id,
    output_sha256: t.output_sha256,
    usage: t.usage,
    cost: t.cost,
    audit_root: t.audit_root
  });
  expect(upstream.calls).toBe(1);
  expect(upstream.authorizations[0]).toBe(`Bearer ${PROVIDER_KEY}`);

  const byTask = await http('GET', `${svc.urls.daemon}/tasks/${t.task_id}`, { headers: factors(a) });
  expect(byTask.status).toBe(200);
  expect(byTask.body).toMatchObject({ ok: true, task_id: t.task_id, status: 'DONE', output_sha256: t.output_sha256 });
  const byDag = await http('GET', `${svc.urls.daemon}/dags/${res.body.dag_id}`, { headers: factors(a) });
  expect(byDag.body.tasks[0].audit_root).toBe(t.audit_root);
  // Another asset does not see it.
  const other = await issueAsset();
  expect((await http('GET', `${svc.urls.daemon}/dags/${res.body.dag_id}`, { headers: factors(other) })).status).toBe(
    404
  );

  const mirrored = (await svc.db.collection(LEDGER_COLLECTION).find({ key: 'hub.daemon.dag_finished' }).toArray()).find(
    (e) => JSON.stringify(e).includes(res.body.dag_id)
  );
  expect(JSON.stringify(mirrored)).toContain(res.body.audit_root);

  const status = await http('GET', `${svc.urls.daemon}/status`, { headers: factors(a) });
  expect(status.status).toBe(200);
  expect(status.body.breaker.state).toBe('closed');
  expect(status.body.audit.length).toBeGreaterThan(0);
  expect(status.body.audit.root).toMatch(/^[0-9a-f]{64}$/);
  expect(status.body.queue).toMatchObject({ max_parallel: 2 });
});

test('missing, forged, wrong-version and revoked factors: 403, no model call, the asset isolated until released', async () => {
  const cases: [string, (a: Asset) => Record<string, string>, ((a: Asset) => Promise<unknown>)?][] = [
    ['missing order root', (a) => ({ 'x-asset-id': a.asset_id })],
    ['forged order root', (a) => ({ 'x-asset-id': a.asset_id, 'x-order-root': `or1_${'A'.repeat(43)}` })],
    ['wrong version', (a) => ({ 'x-asset-id': a.asset_id, 'x-order-root': a.order_root.replace(/^or1_/, 'or2_') })],
    ['revoked', (a) => factors(a), (a) => admin(`/admin/daemon-assets/${a.asset_id}/revoke`)]
  ];
  for (const [name, headers, before] of cases) {
    const a = await issueAsset();
    await before?.(a);
    const res = await dispatch(headers(a), one);
    expect([name, res.status, res.body.error]).toEqual([name, 403, 'identity_check_failed']);
    // Isolated: the right factors are refused too, and still nothing is called.
    const again = await dispatch(factors(a), one);
    expect([name, again.status]).toEqual([name, 403]);
    expect([name, upstream.calls]).toEqual([name, 0]);
    if (name !== 'revoked') {
      expect(again.body.message).toContain('isolated');
      if (name === 'forged order root') {
        // The administrator's command, as an operator runs it.
        const out = execFileSync('npm', ['run', '--silent', 'admin', '--', 'daemon-release', a.asset_id], {
          cwd: ROOT,
          encoding: 'utf8',
          env: { ...process.env, ADMIN_TOKEN: svc.adminToken, ADMIN_URL: svc.urls.main, DATA_DIR: svc.env.DATA_DIR }
        });
        expect(JSON.parse(out)).toMatchObject({ ok: true, asset_id: a.asset_id, released: true });
      } else {
        expect((await admin(`/admin/daemon-assets/${a.asset_id}/release`)).body).toMatchObject({
          ok: true,
          released: true
        });
      }
      expect((await admin(`/admin/daemon-assets/${a.asset_id}/release`)).body).toMatchObject({
        ok: true,
        released: false
      });
      const released = await dispatch(factors(a), one);
      expect([name, released.status, released.body.status]).toEqual([name, 200, 'DONE']);
      upstream.reset();
    }
  }
  expect((await admin('/admin/daemon-assets/asset_unknown0000/release')).status).toBe(404);
  // No asset id at all: 403 as well.
  expect((await dispatch({}, one)).status).toBe(403);
  expect(upstream.calls).toBe(0);
});

test('a factor revoked between admission and execution stops the task before its call', async () => {
  const a = await issueAsset();
  await svc.stopWorker();
  const res = await dispatch(factors(a), {
    wait: false,
    tasks: [
      { id: 'first', ...one },
      { id: 'second', ...one, depends_on: ['first'] }
    ]
  });
  expect(res.status).toBe(202);
  expect(res.body).toMatchObject({ ok: true, status: 'queued', status_url: `/dags/${res.body.dag_id}` });
  expect((await admin(`/admin/daemon-assets/${a.asset_id}/revoke`)).status).toBe(200);
  await svc.startWorker();
  const view = await svc.temporal.workflow.getHandle(daemonDagWorkflowId(res.body.dag_id)).result();
  expect(view.status).toBe('rejected');
  expect(view.tasks.map((t: { status: string }) => t.status)).toEqual(['rejected', 'skipped']);
  expect(upstream.calls).toBe(0);
});

test('a cycle, an unknown dependency and a bad quote are 400, a model off the whitelist 403, before anything runs', async () => {
  const a = await issueAsset();
  const cycle = await dispatch(factors(a), {
    tasks: [
      { id: 'a', ...one, depends_on: ['b'] },
      { id: 'b', ...one, depends_on: ['a'] }
    ]
  });
  expect(cycle.status).toBe(400);
  expect(cycle.body.message).toContain('cycle');
  const unknown = await dispatch(factors(a), { tasks: [{ id: 'a', ...one, depends_on: ['zzz'] }] });
  expect(unknown.status).toBe(400);
  expect(unknown.body.fields[0].field).toBe('tasks.0.depends_on.0');
  const quote = await dispatch(factors(a), {
    tasks: [
      { id: 'a', ...one },
      { id: 'b', model: 'free-model', prompt: 'x {{a.output}}' }
    ]
  });
  expect(quote.status).toBe(400);
  const paid = await dispatch(factors(a), { model: 'paid-model', prompt: 'hi' });
  expect(paid.status).toBe(403);
  expect(paid.body.error).toBe('forbidden');
  expect(upstream.calls).toBe(0);
  // Refusals of the body do not isolate the asset.
  expect((await dispatch(factors(a), one)).status).toBe(200);
});

test('DAG order and parallelism: children after their parent, independent tasks at the same time; wait:false and GET /dags', async () => {
  const a = await issueAsset();
  upstream.behaviour.delayMs = 700;
  const res = await dispatch(factors(a), {
    wait: false,
    tasks: [
      { id: 'root', ...one },
      { id: 'left', model: 'free-model', prompt: 'left of {{root.output}}', depends_on: ['root'] },
      { id: 'right', model: 'free-model', prompt: 'right', depends_on: ['root'] },
      { id: 'join', model: 'free-model', prompt: '{{left.output}} + {{right.output}}', depends_on: ['left', 'right'] }
    ]
  });
  expect(res.status).toBe(202);
  const view = await eventually(
    async () => {
      const r = await http('GET', `${svc.urls.daemon}${res.body.status_url}`, { headers: factors(a) });
      return r.body.status === 'DONE' ? r.body : undefined;
    },
    60_000,
    'the DAG to finish'
  );
  const t = Object.fromEntries(view.tasks.map((x: { id: string }) => [x.id, x]));
  expect(t.left.started_at >= t.root.finished_at).toBe(true);
  expect(t.right.started_at >= t.root.finished_at).toBe(true);
  expect(t.join.started_at >= t.left.finished_at && t.join.started_at >= t.right.finished_at).toBe(true);
  // left and right overlapped.
  expect(t.left.started_at < t.right.finished_at && t.right.started_at < t.left.finished_at).toBe(true);
  expect(t.join.output).toBe('echo: echo: left of echo: hello daemon + echo: right');
  expect(upstream.calls).toBe(4);
});

test('the breaker opens after the threshold, no call while open, the half-open probe closes it', async () => {
  const a = await issueAsset();
  upstream.behaviour.failNext = { count: 2, status: 500 };
  const failing = await dispatch(factors(a), {
    tasks: [
      { id: 'x', ...one },
      { id: 'y', ...one },
      { id: 'z', ...one, depends_on: ['x'] }
    ]
  });
  expect(failing.body.tasks.map((t: { status: string }) => t.status)).toEqual(['failed', 'failed', 'skipped']);
  expect(upstream.calls).toBe(2);
  const status = await http('GET', `${svc.urls.daemon}/status`, { headers: factors(a) });
  expect(status.body.breaker.state).toBe('open');
  const res = await dispatch(factors(a), one);
  expect(res.status).toBe(200);
  expect(res.body.status).toBe('DONE');
  expect(upstream.calls).toBe(3);
  const lines = fs
    .readFileSync(path.join(svc.env.DATA_DIR!, 'daemon_audit.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(lines.filter((l) => l.event === 'breaker').map((l) => l.to)).toEqual(['open', 'half_open', 'closed']);
  expect((await http('GET', `${svc.urls.daemon}/status`, { headers: factors(a) })).body.breaker.state).toBe('closed');
  const reset = await admin('/admin/daemon/breaker/reset');
  expect(reset.status).toBe(200);
});

/** How many model calls the upstream saw for each prompt. */
const callsByPrompt = (): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const b of upstream.bodies) {
    const messages = b.messages as { content: string }[];
    const prompt = messages[messages.length - 1]!.content;
    counts[prompt] = (counts[prompt] ?? 0) + 1;
  }
  return counts;
};

const taskLines = (view: { tasks: { id: string; status: string; error: string | null }[] }) =>
  view.tasks.map((t) => `${t.id} ${t.status} ${t.error ?? ''}`.trim());

test('a worker restarted mid-DAG finishes it without repeating completed calls', async () => {
  const a = await issueAsset();
  upstream.behaviour.delayMs = 500;
  const step = (id: string, prompt: string, after?: string) => ({
    id,
    model: one.model,
    prompt,
    ...(after ? { depends_on: [after] } : {})
  });
  const res = await dispatch(factors(a), {
    wait: false,
    tasks: [step('s1', 'restart one'), step('s2', 'restart two', 's1'), step('s3', 'restart three', 's2')]
  });
  await eventually(
    async () => {
      const r = await http('GET', `${svc.urls.daemon}/tasks/${res.body.dag_id}~s1`, { headers: factors(a) });
      return r.body.status === 'DONE' ? true : undefined;
    },
    60_000,
    's1 DONE'
  );
  await svc.stopWorker();
  await svc.startWorker();
  const view = await svc.temporal.workflow.getHandle(daemonDagWorkflowId(res.body.dag_id)).result();
  expect(taskLines(view)).toEqual(['s1 DONE', 's2 DONE', 's3 DONE']);
  expect(view.status).toBe('DONE');
  const calls = callsByPrompt();
  // s1 completed before the restart and s3 began after it: one call each. s2 is made again only if the stopping
  // worker received it so late that its grace time ran out mid-call (a loaded machine).
  expect([calls['restart one'], calls['restart three']]).toEqual([1, 1]);
  expect([1, 2]).toContain(calls['restart two']);
});

test('a worker killed during a call: the call is made again on the next worker and the DAG finishes', async () => {
  const a = await issueAsset();
  upstream.behaviour.delayMs = 2000;
  const res = await dispatch(factors(a), {
    wait: false,
    tasks: [
      { id: 'k1', model: one.model, prompt: 'killed one' },
      { id: 'k2', model: one.model, prompt: 'killed two', depends_on: ['k1'] }
    ]
  });
  await eventually(
    async () => (callsByPrompt()['killed one'] === 1 ? true : undefined),
    60_000,
    'k1 reached the upstream'
  );
  await svc.killWorker();
  await svc.startWorker();
  // The lost attempt is noticed when its heartbeats stop (the 30 s heartbeat timeout), then made again.
  const view = await svc.temporal.workflow.getHandle(daemonDagWorkflowId(res.body.dag_id)).result();
  expect(taskLines(view)).toEqual(['k1 DONE', 'k2 DONE']);
  const calls = callsByPrompt();
  expect([calls['killed one'], calls['killed two']]).toEqual([2, 1]);
}, 120_000);

test('a worker shut down during a long call cancels it after its grace time (10 s); the next worker makes it again', async () => {
  const a = await issueAsset();
  upstream.behaviour.delayMs = 30_000;
  const res = await dispatch(factors(a), { wait: false, tasks: [{ id: 'g1', model: one.model, prompt: 'grace one' }] });
  await eventually(
    async () => (callsByPrompt()['grace one'] === 1 ? true : undefined),
    60_000,
    'g1 reached the upstream'
  );
  await svc.stopWorker();
  upstream.behaviour.delayMs = 0;
  await svc.startWorker();
  const view = await svc.temporal.workflow.getHandle(daemonDagWorkflowId(res.body.dag_id)).result();
  expect(taskLines(view)).toEqual(['g1 DONE']);
  expect(callsByPrompt()['grace one']).toBe(2);
});

test('npm run daemon:verify recomputes the chain; an edited, a deleted and a torn line are named', () => {
  const file = path.join(svc.env.DATA_DIR!, 'daemon_audit.jsonl');
  const verify = (f: string) =>
    spawnSync(path.join(ROOT, 'node_modules', '.bin', 'tsx'), [path.join(ROOT, 'scripts', 'daemon-verify.ts'), f], {
      encoding: 'utf8',
      env: { ...process.env, DATA_DIR: svc.env.DATA_DIR }
    });
  const good = verify(file);
  expect(good.status).toBe(0);
  const result = JSON.parse(good.stdout);
  expect(result).toMatchObject({ ok: true, first_bad_line: null });
  expect(result.length).toBeGreaterThan(10);
  // The same through npm, with DATA_DIR.
  const viaNpm = execFileSync('npm', ['run', '--silent', 'daemon:verify'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, DATA_DIR: svc.env.DATA_DIR }
  });
  expect(JSON.parse(viaNpm).ok).toBe(true);

  const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
  const copy = path.join(configDir, 'audit.jsonl');
  const edited = [...lines];
  edited[4] = edited[4]!.replace(/"at":"[^"]+"/, '"at":"2000-01-01T00:00:00.000Z"');
  expect(edited[4]).not.toBe(lines[4]);
  fs.writeFileSync(copy, `${edited.join('\n')}\n`);
  let r = verify(copy);
  expect(r.status).toBe(1);
  expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, first_bad_line: 5 });
  expect(r.stderr).toContain('line 5');

  fs.writeFileSync(copy, `${lines.filter((_, i) => i !== 6).join('\n')}\n`);
  r = verify(copy);
  expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, first_bad_line: 7 });

  fs.writeFileSync(copy, `${lines.join('\n')}\n${lines[1]!.slice(0, 20)}`);
  r = verify(copy);
  expect(JSON.parse(r.stdout)).toMatchObject({
    ok: false,
    first_bad_line: lines.length + 1,
    reason: expect.stringContaining('torn')
  });
});

test('the provider key appears nowhere: not in DATA_DIR (audit file, logs), the ledger, workflow histories or the project', async () => {
  const hits: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && fs.statSync(p).size < 50_000_000 && fs.readFileSync(p).includes(PROVIDER_KEY))
        hits.push(p);
    }
  };
  walk(svc.env.DATA_DIR!);
  expect(hits).toEqual([]);
  // The logs were written (LOG_LEVEL=debug), so the check above looked at something.
  expect(fs.readdirSync(svc.env.DATA_DIR!).some((f) => f.endsWith('.log'))).toBe(true);
  for (const name of (await svc.db.listCollections().toArray()).map((c) => c.name)) {
    const docs = await svc.db.collection(name).find({}).toArray();
    expect([name, JSON.stringify(docs).includes(PROVIDER_KEY)]).toEqual([name, false]);
  }
  for await (const wf of svc.temporal.workflow.list({ query: `TaskQueue = "${svc.env.TEMPORAL_TASK_QUEUE}"` })) {
    const history = await svc.temporal.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    expect(JSON.stringify(history).includes(PROVIDER_KEY)).toBe(false);
  }
  const grep = spawnSync('grep', ['-rlF', '--exclude-dir=node_modules', '--exclude-dir=.git', PROVIDER_KEY, ROOT], {
    encoding: 'utf8'
  });
  // The key is built at run time, so not even this file holds it.
  expect(grep.stdout.trim()).toBe('');
});

test('a torn audit chain stops admissions (500, no call) but refusals stay 403; /status reports it; cutting the tail resumes', async () => {
  const a = await issueAsset();
  const file = path.join(svc.env.DATA_DIR!, 'daemon_audit.jsonl');
  const intact = fs.readFileSync(file, 'utf8');
  fs.appendFileSync(file, '{"at":"2026-11-21T00:00:00.000Z","ev');
  expect((await dispatch({ 'x-asset-id': a.asset_id, 'x-order-root': 'or1_forged' }, one)).status).toBe(403);
  const b = await issueAsset();
  const res = await dispatch(factors(b), one);
  expect(res.status).toBe(500);
  expect(upstream.calls).toBe(0);
  const status = await http('GET', `${svc.urls.daemon}/status`, { headers: factors(b) });
  expect(status.body.audit.error).toContain('torn');
  fs.writeFileSync(file, intact);
  expect((await dispatch(factors(b), one)).status).toBe(200);
});
