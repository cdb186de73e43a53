/**
 * The Python node SDK (sdk/python) against the real embedded stack, over real HTTP: this suite starts the stack as
 * test/sdk/typescript/node-sdk.test.ts does (a second API process on a fixed port, which the Python tests kill and
 * start again, and the tampering proxy of hub-proxy.ts in front of the main listener), installs the SDK from its
 * path into a scratch directory (pip --target) and runs `pytest sdk/python/tests` with the CI venv's Python
 * (scripts/ci/python-venv.sh: httpx, cryptography, pytest). What the Python side cannot do over the hub's own API
 * (kill the API process, read the ledger's collection, set the proxy, cancel a task) it asks of a small control
 * server of this file (test/sdk/python/control.ts). Then it checks pytest's verdict test by test (test_cli.py: the
 * Python CLI, run as a person would), and that no node key is in anything the SDK logged.
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../../scripts/stack/process';
import { issueHomologousToken, registerDid } from '../../support/credentials';
import { http, startTestService, type TestService } from '../../support/service';
import { HubProxy } from '../typescript/hub-proxy';
import { startControl, type Control } from './control';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'python-sdk-'));
let svc: TestService;
let proxy: HubProxy;
let control: Control;
let python: string;
const env: Record<string, string> = {};

beforeAll(async () => {
  // The venv first (created once per requirements digest; CI made it already), while nothing else runs.
  const venv = (
    await promisify(execFile)('bash', [path.join(ROOT, 'scripts/ci/python-venv.sh')], { timeout: 300_000 })
  ).stdout.trim();
  python = path.join(venv, 'bin/python');
  // The SDK as a user installs it, from its path, outside the clone (its dependencies are in the venv already).
  await promisify(execFile)(
    python,
    [
      '-m',
      'pip',
      'install',
      '--quiet',
      '--no-deps',
      '--no-build-isolation',
      '--target',
      path.join(scratch, 'site'),
      path.join(ROOT, 'sdk/python')
    ],
    { timeout: 120_000 }
  );
  // What the build leaves in the tree (gitignored, removed all the same).
  for (const left of ['build', 'src/zhongshu_node_sdk.egg-info'])
    fs.rmSync(path.join(ROOT, 'sdk/python', left), { recursive: true, force: true });

  svc = await startTestService({ TRUTH_DAILY_QUOTA: '100000', TASK_LEASE_S: '3' });
  const reviewer = await issueHomologousToken(svc.urls.main, svc.adminToken);
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:python-sdk-node');
  const verifierKey = (await http('GET', `${svc.urls.main}/tlog/verifier-key`)).text.trim();
  const api2Port = String(await freePort());
  proxy = await new HubProxy(svc.urls.main).start();
  control = await startControl({ svc, api2Port, proxy, did });
  Object.assign(env, {
    ZHONGSHU_TEST_HUB: control.api2Url(),
    ZHONGSHU_TEST_MAIN: svc.urls.main,
    ZHONGSHU_TEST_A2A: svc.urls.hub,
    ZHONGSHU_TEST_PROXY: proxy.url,
    ZHONGSHU_TEST_CONTROL: control.url,
    ZHONGSHU_TEST_REVIEWER: reviewer,
    ZHONGSHU_TEST_ADMIN: svc.adminToken,
    ZHONGSHU_TEST_DID: did,
    ZHONGSHU_TEST_VERIFIER_KEY: verifierKey,
    ZHONGSHU_TEST_SCRATCH: path.join(scratch, 'nodes'),
    ZHONGSHU_TEST_LOG: path.join(scratch, 'sdk.log')
  });
}, 420_000);

afterAll(async () => {
  await control?.close();
  await proxy?.close();
  await svc?.close();
  fs.rmSync(scratch, { recursive: true, force: true });
});

/** Runs pytest to its end (asynchronously: the control server answers it meanwhile). */
function pytest(): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      python,
      [
        '-m',
        'pytest',
        '-v',
        '-s',
        '-p',
        'no:cacheprovider',
        '--show-capture=no',
        '--tb=short',
        '-rA',
        'sdk/python/tests'
      ],
      {
        cwd: ROOT,
        env: { ...process.env, ...env, PYTHONPATH: path.join(scratch, 'site'), PYTHONDONTWRITEBYTECODE: '1' },
        stdio: ['ignore', 'pipe', 'pipe']
      }
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => resolve({ code, out }));
  });
}

it('passes the Python SDK tests against the stack, and logs no node key', async () => {
  const t0 = Date.now();
  const { code, out } = await pytest();
  const seconds = ((Date.now() - t0) / 1000).toFixed(0);
  if (code !== 0) {
    // The failures first: a CI log that keeps only the head of a long message still shows why.
    const failures = out.match(/^=+ FAILURES =+$[\s\S]*?(?=^=+ (?:short test summary|warnings summary|PASSES))/m)?.[0];
    throw new Error(
      `pytest failed (exit ${code}) after ${seconds} s:\n${failures ? `${failures.slice(0, 8000)}\n…\n` : ''}${out.slice(-6000)}`
    );
  }
  console.log(
    `pytest sdk/python/tests: ${seconds} s\n${out
      .split('\n')
      .filter((l) => /^PASSED|figure:/.test(l))
      .join('\n')}`
  );
  for (const name of [
    'test_hub.py::test_join_beat_adopt_and_refusals',
    'test_hub.py::test_writes_land_once_through_two_api_kills_and_never_block',
    'test_hub.py::test_write_starts_no_request',
    'test_hub.py::test_held_writes_follow_their_decision',
    'test_hub.py::test_worker_claims_renews_completes_fails_and_honours_cancel',
    'test_hub.py::test_worker_sends_artifacts_asks_for_input_and_answers_with_a_message',
    'test_hub.py::test_instructions_pull_and_ack',
    'test_hub.py::test_tampered_proof_and_forged_checkpoint_are_reported',
    'test_hub.py::test_witness_cosignatures_k_of_n',
    'test_hub.py::test_backs_off_as_retry_after_asks_on_429_and_503',
    'test_hub.py::test_no_node_key_in_the_log',
    'test_cli.py::test_cli_help_and_usage_errors',
    'test_cli.py::test_cli_join_write_status_verify',
    'test_cli.py::test_cli_run_works_tasks_with_exec_and_call',
    'test_cli.py::test_cli_prints_no_node_key',
    'test_cli.py::test_shell_handler_cancel_kills_the_command_and_what_it_started',
    'test_cli.py::test_shell_handler_times_out_and_reports_stderr_and_bad_output',
    'test_cli.py::test_http_handler_stops_a_call_on_cancel_and_on_timeout',
    'test_vectors.py::test_checkpoint_and_forged_ones',
    'test_vectors.py::test_witness_cosignatures',
    'test_outbox.py::test_a_returned_write_survives_sigkill'
  ])
    expect(out).toContain(`PASSED sdk/python/tests/${name}`);
  expect(out).not.toMatch(/SKIPPED/);

  // The SDK's log, checked here too: every key the hub issued to a node of the run, and none in the log.
  const nodes = path.join(scratch, 'nodes');
  const keys = fs
    .readdirSync(nodes)
    .map((d) => path.join(nodes, d, 'credentials.json'))
    .filter((f) => fs.existsSync(f))
    .map((f) => JSON.parse(fs.readFileSync(f, 'utf8')).api_key as string);
  expect(keys.length).toBeGreaterThanOrEqual(3);
  const log = fs.readFileSync(env.ZHONGSHU_TEST_LOG!, 'utf8');
  expect(log).toMatch(/node registered/);
  for (const key of keys) expect(log).not.toContain(key);
}, 360_000);
