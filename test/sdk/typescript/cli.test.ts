/**
 * The zhongshu-node CLI against the real embedded stack, as a person runs it: --help for each command, join (the
 * credentials file 0600), write (acknowledged with its seq), status, verify (OK, then consistent with the last
 * checkpoint after more writes, then FAIL through a proxy that tampers with the proof), usage errors, and no node
 * key in anything it prints, even with --verbose.
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { typescriptProcess } from '../../../scripts/stack/process';
import { registerDid } from '../../support/credentials';
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
  svc = await startTestService({}, { worker: true });
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
