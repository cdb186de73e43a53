/**
 * A configuration error stops at once: a chat provider file with one unknown key makes the API and the worker exit
 * with code 78 (EX_CONFIG) before they connect to anything, with one message naming the key, the setting and the
 * file, and nothing after it (no MongoExpiredSessionError from a connection closed under a reader). The launcher
 * checks the same before starting anything, and its supervisor never restarts a process that exits with 78: it
 * stops the stack and exits with that code.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { EX_CONFIG } from '../../core/config-check.node';
import { spawnServer, typescriptProcess } from '../../scripts/stack/process';
import { Supervised } from '../../scripts/stack/supervisor';

const ROOT = path.resolve(__dirname, '..', '..');

function badProviderFile(): string {
  const dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'config-'));
  const file = path.join(dir, 'providers.yaml');
  fs.writeFileSync(
    file,
    [
      'providers:',
      '  - name: local',
      '    base_url: http://127.0.0.1:9/v1',
      '    temperature: 0.2',
      '    models:',
      '      - id: m1',
      ''
    ].join('\n')
  );
  return file;
}

function env(file: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    CHAT_PROVIDERS_FILE: file,
    CHAT_PROVIDERS: '',
    // A database and a Temporal that are there: the process must stop before it uses them.
    MONGODB_URI: process.env.ZH_TEST_MONGODB_URI,
    TEMPORAL_ADDRESS: process.env.ZH_TEST_TEMPORAL_ADDRESS,
    DATA_DIR: path.join(path.dirname(file), 'data'),
    LOG_LEVEL: 'info'
  };
}

it.each([
  ['api', 'api/server.ts'],
  ['worker', 'worker/main.ts']
])('%s: exit code 78 and one message naming the key, the setting and the file', (name, script) => {
  const file = badProviderFile();
  const { binary, args } = typescriptProcess(path.join(ROOT, script));
  const run = spawnSync(binary, args, { cwd: ROOT, env: env(file), encoding: 'utf8', timeout: 60_000 });
  expect(run.status).toBe(EX_CONFIG);
  const said = `${run.stdout}${run.stderr}`.trim().split('\n');
  expect(said).toEqual([
    `${name}: Invalid configuration: CHAT_PROVIDERS_FILE=${file}: providers.0: Unrecognized key: "temperature" (exit code 78)`
  ]);
  expect(run.stderr).not.toMatch(/MongoExpiredSessionError/);
});

it('the launcher stops at once with exit code 78, having started nothing', async () => {
  const file = badProviderFile();
  const { binary, args } = typescriptProcess(path.join(ROOT, 'scripts', 'start.ts'));
  const child = spawn(binary, args, {
    cwd: ROOT,
    env: { ...env(file), MONGODB_URI: '', TEMPORAL_ADDRESS: '', ZHONGSHU_INSTALL_PACKAGES: '0' },
    stdio: ['ignore', 'pipe', 'pipe']
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code).toBe(EX_CONFIG);
  expect(output).toContain(`CHAT_PROVIDERS_FILE=${file}: providers.0: Unrecognized key: "temperature"`);
  expect(output).toMatch(/Nothing was started \(exit code 78\)/);
  expect(output).not.toMatch(/starting|building|restart|MongoExpiredSessionError/);
}, 60_000);

it('the supervisor does not restart a process that exits with 78: it gives up at once with that code', async () => {
  const dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'supervise-'));
  let starts = 0;
  const gaveUp: [string, number][] = [];
  const part = new Supervised(
    'api',
    () => {
      starts++;
      return spawnServer({
        name: 'api',
        binary: process.execPath,
        args: ['-e', `process.stderr.write('api: Invalid configuration: X\\n'); process.exit(${EX_CONFIG})`],
        pidFile: path.join(dir, 'run', 'api.pid'),
        echo: false
      });
    },
    (message, exitCode) => gaveUp.push([message, exitCode])
  );
  await part.run();
  await part.current!.closed;
  // Time for a restart to be scheduled, were it to be (the first back-off is 0.5 s).
  await new Promise((r) => setTimeout(r, 1500));
  expect(starts).toBe(1);
  expect(gaveUp).toEqual([['api stopped on invalid configuration (exit code 78); not restarting it', EX_CONFIG]]);
  await part.stop();
});
