/**
 * The whole local stack for a bench: `npm start` (scripts/start.ts: FerretDB on its PostgreSQL, the Temporal dev
 * server, the worker, the API) in a scratch data dir on free ports, its output in the bench's stack log. Benches drive it over HTTP as
 * clients do and may open the database directly to count what landed.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, typescriptProcess } from '../stack/process';
import { StackLog } from './stack-log';

const ROOT = path.resolve(__dirname, '..', '..');
const PORT_NAMES = [
  'PORT',
  'BACKUP_PORT',
  'HUB_PORT',
  'COMMERCIAL_PORT',
  'MEMORY_PORT',
  'DAEMON_PORT',
  'FERRETDB_PORT',
  'TEMPORAL_PORT',
  'TEMPORAL_UI_PORT',
  'DEPLOY_WEB_PORT',
  'POSTGRES_PORT',
  'FERRETDB_DEBUG_PORT'
] as const;

/** The pid of each process a bench stack runs, by name, from the pid files under `<dataDir>/run`. */
export function stackPids(dataDir: string): Record<string, number> {
  const dir = path.join(dataDir, 'run');
  const out: Record<string, number> = {};
  for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : [])
    if (f.endsWith('.pid')) out[f.replace(/\.pid$/, '')] = Number(fs.readFileSync(path.join(dir, f), 'utf8').trim());
  return out;
}

export interface BenchStack {
  /** The main listener, e.g. http://127.0.0.1:40123 */
  base: string;
  ports: Record<(typeof PORT_NAMES)[number], number>;
  /** The embedded FerretDB, and the database the service uses in it. */
  mongoUri: string;
  dbName: string;
  adminToken: string;
  dataDir: string;
  /** Throws when the stack has exited. */
  alive(): void;
  /**
   * One more API process on free ports, sharing the stack's database, Temporal and data dir, with `env` over the
   * stack's settings; its main listener URL.
   */
  startApi(env?: Record<string, string>): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Starts the stack in a scratch data dir, removed when it stops; or in `keepDataDir`, which is created if missing,
 * reused as it is (a bench keeps a large ledger there between runs) and kept.
 */
export async function startBenchStack(
  name: string,
  log: StackLog,
  env: Record<string, string>,
  keepDataDir?: string
): Promise<BenchStack> {
  const dataDir = keepDataDir
    ? path.resolve(keepDataDir)
    : fs.mkdtempSync(path.join(os.tmpdir(), `zhongshu-bench-${name}-`));
  fs.mkdirSync(dataDir, { recursive: true });
  const ports = {} as BenchStack['ports'];
  for (const k of PORT_NAMES) ports[k] = await freePort();
  const adminToken = `adm_bench_${randomBytes(16).toString('hex')}`;
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    ADMIN_TOKEN: adminToken,
    ...env
  };
  delete childEnv.MONGODB_URI;
  delete childEnv.TEMPORAL_ADDRESS;
  console.log(`starting the stack (npm start) in ${dataDir}`);
  const launcher = typescriptProcess(path.join(ROOT, 'scripts', 'start.ts'));
  const child = spawn(launcher.binary, launcher.args, { env: childEnv, stdio: ['ignore', log.fd(), log.fd()] });
  const extraApis: ChildProcess[] = [];
  const stack: BenchStack = {
    base: `http://127.0.0.1:${ports.PORT}`,
    ports,
    mongoUri: `mongodb://127.0.0.1:${ports.FERRETDB_PORT}/`,
    dbName: childEnv.MONGODB_DB ?? 'zhongshu_hub',
    adminToken,
    dataDir,
    alive: () => {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`the stack exited (${child.signalCode ?? `code ${child.exitCode}`})`);
    },
    startApi: async (env = {}) => {
      const apiPorts: Record<string, string> = {};
      for (const k of ['PORT', 'BACKUP_PORT', 'HUB_PORT', 'COMMERCIAL_PORT', 'MEMORY_PORT', 'DAEMON_PORT'])
        apiPorts[k] = String(await freePort());
      const api = typescriptProcess(path.join(ROOT, 'api', 'server.ts'));
      const proc = spawn(api.binary, api.args, {
        // What the launcher tells the processes it starts (scripts/start.ts), as this one is started beside them.
        env: {
          ...childEnv,
          ...env,
          ...apiPorts,
          MONGODB_URI: `mongodb://127.0.0.1:${ports.FERRETDB_PORT}/`,
          TEMPORAL_ADDRESS: `127.0.0.1:${ports.TEMPORAL_PORT}`
        },
        stdio: ['ignore', log.fd(), log.fd()]
      });
      extraApis.push(proc);
      const url = `http://127.0.0.1:${apiPorts.PORT}`;
      await waitHealthy(`${url}/health`, proc);
      return url;
    },
    stop: async () => {
      for (const api of extraApis) {
        if (api.exitCode === null && api.signalCode === null) {
          api.kill('SIGTERM');
          await new Promise((r) => api.once('exit', r));
        }
      }
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGINT');
        await new Promise((r) => child.once('exit', r));
      }
      if (!keepDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    }
  };
  try {
    await waitHealthy(`${stack.base}/health`, child);
  } catch (err) {
    await stack.stop();
    throw err;
  }
  return stack;
}

async function waitHealthy(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error('the stack exited during start-up');
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error('the stack did not become healthy');
}
