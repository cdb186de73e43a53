/**
 * Helpers for the launcher tests (test/scripts/start-*.test.ts): run `npm start` (or the launcher itself) in a
 * scratch data dir on free ports as a user would, read the pids it records, and load it the way a user's clients
 * do: writers that retry each truth write with its Idempotency-Key until it is acknowledged, and high-risk writes
 * that wait for approval.
 */
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { childPids, freePort, typescriptProcess } from '../../scripts/stack/process';
import { eventually, http } from '../support/service';

const ROOT = path.resolve(__dirname, '..', '..');

export interface Launched {
  child: ChildProcess;
  env: Record<string, string>;
  dataDir: string;
  base: string;
  adminToken: string;
  output(): string;
  /** Resolves with [exit code, signal] when the launched process (npm, or the launcher) exits. */
  exited: Promise<[number | null, NodeJS.Signals | null]>;
  ready: Promise<void>;
}

/**
 * Starts the stack. `via: 'npm'` runs `npm start` in a process group of its own (as a terminal runs it, so a
 * signal to the group is a Ctrl-C); `via: 'node'` runs the launcher directly (what npm start runs).
 * `scriptShell` is the shell npm runs the script with: Debian's sh (dash) stays between npm and the launcher, while
 * bash (sh on most other systems) replaces itself with the launcher, which then gets a Ctrl-C twice: from the
 * terminal and forwarded by npm.
 * `readyWithinMs` bounds the wait for "ready in" (a start that builds a server first needs longer).
 */
export async function launch(
  via: 'npm' | 'node',
  extra: Record<string, string> = {},
  scriptShell = '/bin/sh',
  readyWithinMs = 150_000
): Promise<Launched> {
  const dataDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'launch-'));
  const adminToken = `adm_test_${randomBytes(16).toString('hex')}`;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    ADMIN_TOKEN: adminToken,
    TEMPORAL_TASK_QUEUE: `launch-${randomBytes(3).toString('hex')}`,
    // A prebuilt bundle: worker restarts in seconds instead of bundling each time.
    WORKFLOW_BUNDLE_PATH: process.env.ZH_TEST_WORKFLOW_BUNDLE!,
    TRUTH_DAILY_QUOTA: '1000000',
    MONGODB_URI: '',
    TEMPORAL_ADDRESS: '',
    // Packages are this machine's as they are (start-packages.test.ts covers installing them): PostgreSQL must be
    // installed, as CI does.
    ZHONGSHU_INSTALL_PACKAGES: '0',
    npm_config_script_shell: scriptShell
  };
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
  env.PUBLIC_URL = `http://127.0.0.1:${env.PORT}`;
  Object.assign(env, extra);
  const childEnv = { ...process.env, ...env };
  const { binary, args } = typescriptProcess(path.join(ROOT, 'scripts', 'start.ts'));
  const child =
    via === 'npm'
      ? spawn('npm', ['start'], { cwd: ROOT, env: childEnv, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(binary, args, { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout!.on('data', (d) => (text += d));
  child.stderr!.on('data', (d) => (text += d));
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.once('exit', (code, signal) => resolve([code, signal]))
  );
  const ready = eventually(
    async () => (/ready in [\d.]+ s/.test(text) ? true : undefined),
    readyWithinMs,
    'the stack to be ready'
  ).then(
    () => undefined,
    (e: Error) => {
      throw new Error(`${e.message}; what it printed last:\n${text.split('\n').slice(-25).join('\n')}`);
    }
  );
  return { child, env, dataDir, base: `http://127.0.0.1:${env.PORT}`, adminToken, output: () => text, exited, ready };
}

/**
 * Runs the launcher to its exit, as `user` where given (for the cases where it stops before starting anything: it
 * must exit by itself, else it is killed after 60 s).
 */
export function runToExit(
  env: Record<string, string>,
  user?: { uid: number; gid: number }
): Promise<{ code: number | null; output: string }> {
  const { binary, args } = typescriptProcess(path.join(ROOT, 'scripts', 'start.ts'));
  const child = spawn(binary, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(user ?? {})
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(killer);
      resolve({ code, output });
    })
  );
}

/** The pids the launcher recorded (DATA_DIR/run/<name>.pid), by name. */
export function recordedPids(dataDir: string): Record<string, number> {
  const dir = path.join(dataDir, 'run');
  if (!fs.existsSync(dir)) return {};
  const pids: Record<string, number> = {};
  for (const f of fs.readdirSync(dir)) {
    try {
      pids[f.replace(/\.pid$/, '')] = Number(fs.readFileSync(path.join(dir, f), 'utf8'));
    } catch {
      /* removed meanwhile */
    }
  }
  return pids;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // An exited child not yet reaped by its parent still answers signal 0: a zombie is not running.
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * Test cleanup: SIGKILL whatever of `pids` still runs (a launcher that failed its test may have left them), their
 * own children first (nginx's workers outlive a master killed with SIGKILL).
 */
export function killLeftovers(pids: Iterable<number>): void {
  for (const pid of pids) {
    if (!alive(pid)) continue;
    for (const victim of [...childPids(pid), pid]) {
      try {
        process.kill(victim, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
}

export interface Acknowledged {
  key: string;
  idempotencyKey: string;
  seq: number;
  event_id: string;
}

export interface Writers {
  acknowledged: Acknowledged[];
  held: { key: string; approval_id: string }[];
  /** Answers a client must never get (a 4xx other than 429, or a 500). */
  unexpected: string[];
  stop(): Promise<void>;
}

/**
 * `count` writers, each writing truths one after another, as a careful client does: a write that fails (no
 * connection, 503) is sent again with the same Idempotency-Key until it is answered 200 (or 202 when held), so a
 * restart of the API costs retries, never a lost or a doubled entry. Every `riskEvery`-th write is a risk truth,
 * held for approval.
 */
export function startWriters(base: string, did: string, count: number, prefix: string, riskEvery = 0): Writers {
  const acknowledged: Acknowledged[] = [];
  const held: { key: string; approval_id: string }[] = [];
  const unexpected: string[] = [];
  let running = true;
  let next = 0;
  const loops = Array.from({ length: count }, async () => {
    while (running) {
      const i = next++;
      const key = `${prefix}.n${i}`;
      const idempotencyKey = `${prefix}-${i}`;
      const risky = riskEvery > 0 && i % riskEvery === riskEvery - 1;
      for (;;) {
        try {
          const res = await http('POST', `${base}/api/report/truth`, {
            headers: { 'x-did': did, 'idempotency-key': idempotencyKey },
            body: { key, value: { i, writer: prefix }, truth_type: risky ? 'risk' : 'data' }
          });
          if (res.status === 200) {
            acknowledged.push({ key, idempotencyKey, seq: res.body.seq, event_id: res.body.event_id });
            break;
          }
          if (res.status === 202) {
            held.push({ key, approval_id: res.body.approval_id });
            break;
          }
          if (res.status !== 503 && res.status !== 429) unexpected.push(`${res.status} ${res.text}`);
        } catch {
          /* no connection: the API is restarting or stopping */
        }
        // A write not yet acknowledged is abandoned only when the writers stop (the stack is going away).
        if (!running) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  });
  return {
    acknowledged,
    held,
    unexpected,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    }
  };
}

/** Every ledger entry, read page by page through the public L0 subscription (GET /api/sub-l0). */
export async function readLedger(base: string): Promise<{ seq: number; key: string; event_id: string }[]> {
  const entries: { seq: number; key: string; event_id: string }[] = [];
  for (let after = 0; ;) {
    const page = await http('GET', `${base}/api/sub-l0?after=${after}&limit=500`);
    if (page.status !== 200) throw new Error(`sub-l0: ${page.status} ${page.text}`);
    entries.push(...page.body.entries);
    if (page.body.entries.length === 0) return entries;
    after = page.body.next_cursor;
  }
}
