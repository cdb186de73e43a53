/**
 * `npm start` on a machine without the Debian packages the service runs (PostgreSQL, nginx): a fake `apt-get` on
 * PATH records what it is asked, and the probed paths (NGINX_BIN, PG_BIN_DIR) point where nothing is installed.
 * As root the launcher asks apt-get to update once and install both, saying why for each; as a user who may not
 * install packages it stops at once with the one command to run and exit code 77, having started nothing; told not
 * to install packages (ZHONGSHU_INSTALL_PACKAGES=0) on a machine without PostgreSQL, with 69. All before anything
 * starts, so no stack is needed here.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { EX_NOPERM, EX_UNAVAILABLE } from '../../scripts/stack/packages';
import { runToExit as runLauncher } from './launcher';

const ROOT = path.resolve(__dirname, '..', '..');

interface Machine {
  dir: string;
  env: Record<string, string>;
  /** What the fake apt-get was asked, one line per call: "DEBIAN_FRONTEND=<v> <args>". */
  aptCalls(): string[];
}

/** A scratch "machine": fake apt-get and sudo first on PATH; nginx and PostgreSQL probed where they are not. */
function machine(opts: { aptInstalls: boolean }): Machine {
  const dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'packages-'));
  fs.chmodSync(dir, 0o777);
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  const calls = path.join(dir, 'apt-calls');
  const nginx = path.join(dir, 'sbin', 'nginx');
  const pgBin = path.join(dir, 'postgresql', 'bin');
  // The fake apt-get "installs" by making the probed binaries, when asked to.
  const install = opts.aptInstalls
    ? `mkdir -p ${path.dirname(nginx)} ${pgBin}; printf '#!/bin/sh\\n' > ${nginx}; cp ${nginx} ${pgBin}/postgres; chmod +x ${nginx} ${pgBin}/postgres`
    : ':';
  fs.writeFileSync(
    path.join(bin, 'apt-get'),
    `#!/bin/sh\necho "DEBIAN_FRONTEND=\${DEBIAN_FRONTEND:-} $*" >> ${calls}\ncase "$1" in install) ${install} ;; esac\nexit 0\n`,
    { mode: 0o755 }
  );
  // No passwordless sudo on this machine.
  fs.writeFileSync(path.join(bin, 'sudo'), '#!/bin/sh\necho "sudo: a password is required" >&2\nexit 1\n', {
    mode: 0o755
  });
  fs.writeFileSync(calls, '', { mode: 0o666 });
  const dataDir = path.join(dir, 'data');
  return {
    dir,
    env: {
      PATH: `${bin}:${process.env.PATH}`,
      NGINX_BIN: nginx,
      PG_BIN_DIR: pgBin,
      DATA_DIR: dataDir,
      MONGODB_URI: '',
      DEPLOY_WEB: 'on',
      ZHONGSHU_INSTALL_PACKAGES: '',
      CHAT_PROVIDERS_FILE: '',
      CHAT_PROVIDERS: '',
      // Unset, so the install line shows that the launcher sets it.
      DEBIAN_FRONTEND: ''
    },
    aptCalls: () => fs.readFileSync(calls, 'utf8').split('\n').filter(Boolean)
  };
}

it('as root, asks apt-get to update once and install PostgreSQL and nginx, saying why for each', async () => {
  if (process.getuid?.() !== 0) return; // the non-root case below is this machine's
  const m = machine({ aptInstalls: false });
  const { code, output } = await runLauncher(m.env);
  expect(m.aptCalls()).toEqual([
    'DEBIAN_FRONTEND= update -q',
    'DEBIAN_FRONTEND=noninteractive install -y -q postgresql nginx'
  ]);
  expect(output).toMatch(/\[stack\] packages: installing postgresql: PostgreSQL server binaries: .*FerretDB/);
  expect(output).toMatch(/\[stack\] packages: installing nginx: serves the deploy targets/);
  // This apt-get installed nothing: the launcher checks, says so and starts nothing.
  expect(output).toMatch(/still missing where the launcher looks/);
  expect(code).toBe(1);
  expect(fs.existsSync(path.join(m.env.DATA_DIR!, 'run'))).toBe(false);
}, 90_000);

it('installs only what is missing, and what it installed is found (install-tools.sh packages)', () => {
  if (process.getuid?.() !== 0) return;
  const m = machine({ aptInstalls: true });
  const run = (extra: Record<string, string> = {}) =>
    spawnSync('bash', [path.join(ROOT, 'scripts', 'install-tools.sh'), 'packages', 'postgresql', 'nginx'], {
      env: { ...process.env, ...m.env, ...extra },
      encoding: 'utf8'
    });
  // Opted out: says what it would install and how, runs nothing.
  const optedOut = run({ ZHONGSHU_INSTALL_PACKAGES: '0' });
  expect(optedOut.status).toBe(0);
  expect(optedOut.stderr).toContain('ZHONGSHU_INSTALL_PACKAGES=0: not installing postgresql nginx');
  expect(m.aptCalls()).toEqual([]);
  const first = run();
  expect(first.status).toBe(0);
  expect(first.stderr).toContain('installed: postgresql nginx');
  expect(m.aptCalls()).toHaveLength(2);
  // Present now: nothing more is asked.
  const second = run();
  expect(second.status).toBe(0);
  expect(m.aptCalls()).toHaveLength(2);
});

it('as a user who may not install packages, stops at once with the one command to run and exit code 77', async () => {
  const m = machine({ aptInstalls: true });
  // As root, the launcher runs as nobody (no passwordless sudo: the fake sudo refuses).
  const user = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;
  const started = Date.now();
  const { code, output } = await runLauncher({ ...m.env, HOME: m.dir }, user);
  expect(code).toBe(EX_NOPERM);
  expect(output).toContain('sudo apt-get install -y postgresql nginx');
  expect(output).toMatch(/this user may not install packages/);
  expect(output).toMatch(/nothing was started: .* \(exit code 77\)/);
  expect(m.aptCalls()).toEqual([]);
  expect(fs.existsSync(path.join(m.env.DATA_DIR!, 'run'))).toBe(false);
  expect(output).not.toMatch(/starting|building/);
  expect(Date.now() - started).toBeLessThan(30_000);
}, 90_000);

it('told not to install packages, stops before anything starts with exit code 69 where PostgreSQL is missing', async () => {
  const m = machine({ aptInstalls: true });
  const { code, output } = await runLauncher({ ...m.env, ZHONGSHU_INSTALL_PACKAGES: '0', DEPLOY_WEB: 'off' });
  expect(output).toContain(
    'ZHONGSHU_INSTALL_PACKAGES=0: not installing postgresql (to install: sudo apt-get install -y postgresql)'
  );
  expect(output).toMatch(
    /nothing was started: the embedded FerretDB stores in PostgreSQL, which is not installed: apt-get install -y postgresql .*\(exit code 69\)/
  );
  expect(code).toBe(EX_UNAVAILABLE);
  expect(m.aptCalls()).toEqual([]);
  expect(fs.existsSync(path.join(m.env.DATA_DIR!, 'run'))).toBe(false);
  expect(output).not.toMatch(/starting|building/);
}, 90_000);
