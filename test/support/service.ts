/**
 * Starts the real service for one test file against the shared embedded stack, as separate processes exactly as
 * `npm start` runs them: the API (every listener, on free ports) and the worker (on a task queue of its own),
 * with a database of its own, so suites do not see each other's data. Tests talk to it over real HTTP, and may
 * read MongoDB and Temporal directly to check what a user cannot see.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { Db, MongoClient } from 'mongodb';
import { freePort, isBindFailure, ServerHandle, spawnServer, typescriptProcess } from '../../scripts/stack/process';
import { START_ATTEMPTS } from '../../scripts/stack/temporal';

const ROOT = path.resolve(__dirname, '..', '..');

export type ListenerName = 'main' | 'backup' | 'hub' | 'commercial' | 'memory' | 'daemon';

export interface TestService {
  env: Record<string, string>;
  urls: Record<ListenerName, string>;
  adminToken: string;
  db: Db;
  temporal: Client;
  /** Starts the worker (`env`: settings of this process only, over the service's). */
  startWorker(env?: Record<string, string>): Promise<void>;
  /** Stops the worker process (SIGTERM, drains); workflows wait in Temporal meanwhile. */
  stopWorker(): Promise<void>;
  /** Kills the worker process (SIGKILL, no drain), as a crash or an out-of-memory kill would. */
  killWorker(): Promise<void>;
  /**
   * A second API process on other ports, sharing this service's database and task queue. `fixedPorts` pins some
   * listeners (e.g. { MEMORY_PORT: '41234' }), so a test can stop one and start it again where clients expect it;
   * `env` holds settings of this process only, over the service's.
   */
  startSecondApi(
    fixedPorts?: Record<string, string>,
    env?: Record<string, string>
  ): Promise<{ url: string; urls: Record<ListenerName, string>; stop(): Promise<void>; kill(): Promise<void> }>;
  /** A second worker process on this service's task queues (as a deployment runs several); stopped at close. */
  startSecondWorker(env?: Record<string, string>): Promise<{ stop(): Promise<void> }>;
  close(): Promise<void>;
}

const LISTENER_PORTS: Record<ListenerName, string> = {
  main: 'PORT',
  backup: 'BACKUP_PORT',
  hub: 'HUB_PORT',
  commercial: 'COMMERCIAL_PORT',
  memory: 'MEMORY_PORT',
  daemon: 'DAEMON_PORT'
};

/**
 * `logFiles`: each process's output also goes to `<DATA_DIR>/<name>.log` (for tests that read what was logged).
 * `harnessTemporal`: where the test's own Temporal client connects, when the service's processes reach the same
 * server through something the test need not go through (a TLS front: test/api/temporal-tls.test.ts).
 */
export async function startTestService(
  extra: Record<string, string> = {},
  options: { worker?: boolean; logFiles?: boolean; harnessTemporal?: string } = {}
): Promise<TestService> {
  const id = randomBytes(5).toString('hex');
  const dataDir = path.join(process.env.ZH_TEST_DATA_DIR!, `svc-${id}`);
  fs.mkdirSync(dataDir, { recursive: true });
  const env: Record<string, string> = {
    LOG_LEVEL: process.env.ZH_TEST_LOG_LEVEL ?? 'warn',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    MONGODB_URI: process.env.ZH_TEST_MONGODB_URI!,
    MONGODB_DB: `test_${id}`,
    TEMPORAL_ADDRESS: process.env.ZH_TEST_TEMPORAL_ADDRESS!,
    TEMPORAL_TASK_QUEUE: `test-${id}`,
    WORKFLOW_BUNDLE_PATH: process.env.ZH_TEST_WORKFLOW_BUNDLE!,
    ADMIN_TOKEN: `adm_test_${randomBytes(16).toString('hex')}`,
    // Suites register many nodes from one address; the limit itself is tested with its own low value.
    REGISTER_RATE_LIMIT_PER_MIN: '100000'
  };
  // Ports: freePort() keeps a picked port from being handed out again by the OS; an API that still finds one taken
  // (another program bound it meanwhile) is started again on new ones, for every listener the suite did not set.
  const urls = {} as Record<ListenerName, string>;
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  const pickPorts = async () => {
    for (const name of Object.values(LISTENER_PORTS)) env[name] = String(await freePort());
    env.PUBLIC_URL = `http://127.0.0.1:${env.PORT}`;
    env.HUB_PUBLIC_URL = `http://127.0.0.1:${env.HUB_PORT}`;
    Object.assign(env, extra);
    for (const l of Object.keys(LISTENER_PORTS) as ListenerName[])
      urls[l] = `http://127.0.0.1:${env[LISTENER_PORTS[l]]}`;
    Object.assign(childEnv, env);
  };
  await pickPorts();

  const spawnPart = (name: string, script: string, own: Record<string, string> = {}) =>
    spawnServer({
      name: `${name}-${id}`,
      ...typescriptProcess(path.join(ROOT, script)),
      pidFile: path.join(dataDir, 'run', `${name}.pid`),
      echo: process.env.ZH_TEST_ECHO === '1',
      env: { ...childEnv, ...own },
      ...(options.logFiles ? { logFile: path.join(dataDir, `${name}.log`) } : {})
    });

  let api: ServerHandle | null = null;
  let worker: ServerHandle | null = null;
  const startApi = async () => {
    if (api) return;
    api = await startWithRetry(
      () => spawnPart('api', 'api/server.ts'),
      () => urls.main,
      pickPorts
    );
  };
  const stopApi = async () => {
    await api?.stop();
    api = null;
  };
  const startWorker = async (own: Record<string, string> = {}) => {
    if (worker) return;
    worker = spawnPart('worker', 'worker/main.ts', own);
    await waitForPoller(env.TEMPORAL_TASK_QUEUE!, worker);
  };
  const stopWorker = async () => {
    await worker?.stop();
    worker = null;
  };
  const killWorker = async () => {
    worker?.kill();
    await worker?.closed;
    worker = null;
  };

  const mongo = await MongoClient.connect(env.MONGODB_URI!);
  const connection = await Connection.connect({ address: options.harnessTemporal ?? env.TEMPORAL_ADDRESS! });
  const temporal = new Client({ connection });

  /** Waits until `taskQueue` has pollers of at least `workers` worker processes (their identities). */
  async function waitForPoller(taskQueue: string, handle: ServerHandle, workers = 1): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (handle.child.exitCode !== null) throw new Error('worker exited during start');
      const res = await connection.workflowService.describeTaskQueue({
        namespace: 'default',
        taskQueue: { name: taskQueue },
        taskQueueType: 1
      });
      if (new Set((res.pollers ?? []).map((p) => p.identity)).size >= workers) return;
      await sleep(200);
    }
    throw new Error('worker did not start polling within 60 s');
  }

  const extraProcesses: ServerHandle[] = [];
  const startSecondApi = async (fixedPorts: Record<string, string> = {}, env: Record<string, string> = {}) => {
    const ports: Record<string, string> = {};
    const pick = async () => {
      for (const name of Object.values(LISTENER_PORTS)) ports[name] = fixedPorts[name] ?? String(await freePort());
    };
    await pick();
    const handle = await startWithRetry(
      () =>
        spawnServer({
          name: `api2-${id}`,
          ...typescriptProcess(path.join(ROOT, 'api/server.ts')),
          pidFile: path.join(dataDir, 'run', `api2-${ports.PORT}.pid`),
          echo: process.env.ZH_TEST_ECHO === '1',
          env: { ...childEnv, ...env, ...ports },
          ...(options.logFiles ? { logFile: path.join(dataDir, `api2-${ports.PORT}.log`) } : {})
        }),
      () => `http://127.0.0.1:${ports.PORT}`,
      pick
    );
    extraProcesses.push(handle);
    return {
      url: `http://127.0.0.1:${ports.PORT}`,
      urls: Object.fromEntries(
        (Object.keys(LISTENER_PORTS) as ListenerName[]).map((l) => [l, `http://127.0.0.1:${ports[LISTENER_PORTS[l]]}`])
      ) as Record<ListenerName, string>,
      stop: () => handle.stop(),
      kill: async () => {
        handle.kill();
        await handle.closed;
      }
    };
  };

  const startSecondWorker = async (own: Record<string, string> = {}) => {
    const handle = spawnPart('worker2', 'worker/main.ts', own);
    extraProcesses.push(handle);
    // (Its pollers join the first worker's.)
    await waitForPoller(env.TEMPORAL_TASK_QUEUE!, handle, worker ? 2 : 1);
    return { stop: () => handle.stop() };
  };

  await Promise.all([startApi(), options.worker === false ? Promise.resolve() : startWorker()]);
  return {
    env,
    urls,
    adminToken: env.ADMIN_TOKEN!,
    db: mongo.db(env.MONGODB_DB),
    temporal,
    startWorker,
    stopWorker,
    killWorker,
    startSecondApi,
    startSecondWorker,
    close: async () => {
      // A 500 is never what a suite expects: the API's own account of each (its error and stack) goes to the test
      // run's output, where a failure seen only in CI can be read afterwards.
      const internal = (api?.output() ?? '').split('\n').filter((l) => l.includes('"msg":"internal error"'));
      if (internal.length > 0)
        process.stderr.write(
          `[test service ${id}] the API answered ${internal.length} request(s) with 500; the first:\n` +
            internal
              .slice(0, 3)
              .map((l) => l.slice(0, 4000))
              .join('\n') +
            '\n'
        );
      await Promise.all([stopApi(), stopWorker(), ...extraProcesses.map((h) => h.stop())]);
      await mongo
        .db(env.MONGODB_DB)
        .dropDatabase()
        .catch(() => undefined);
      await mongo.close();
      await connection.close();
    }
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts an API process; one that fails to bind a port is started again after `newPorts`. */
async function startWithRetry(
  spawnIt: () => ServerHandle,
  mainUrl: () => string,
  newPorts: () => Promise<void>
): Promise<ServerHandle> {
  for (let attempt = 1; ; attempt++) {
    const handle = spawnIt();
    try {
      await waitHealthy(`${mainUrl()}/health`, handle);
      return handle;
    } catch (err) {
      await handle.stop();
      await handle.closed;
      if (!isBindFailure(handle.output()) || attempt >= START_ATTEMPTS) throw err;
      await newPorts();
    }
  }
}

async function waitHealthy(url: string, handle: ServerHandle): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (handle.child.exitCode !== null) throw new Error(`${handle.name} exited during start`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      /* not yet listening */
    }
    await sleep(100);
  }
  throw new Error(`${url} did not become healthy within 60 s`);
}

/** JSON over real HTTP. */
export async function http(
  method: string,
  url: string,
  options: { body?: unknown; headers?: Record<string, string>; raw?: string } = {}
): Promise<{ status: number; body: any; headers: Headers; text: string }> {
  const headers: Record<string, string> = { ...options.headers };
  let payload: string | undefined = options.raw;
  if (options.body !== undefined) {
    headers['content-type'] = headers['content-type'] ?? 'application/json';
    payload = JSON.stringify(options.body);
  }
  const res = await fetch(url, { method, headers, body: payload });
  const text = await res.text();
  let body: unknown = undefined;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, body, headers: res.headers, text };
}

/**
 * Waits, if the UTC minute is in its last `marginS` seconds, until the next minute starts: per-minute limits count in
 * calendar minutes, so a test that fills one must not straddle a boundary (it would see the next minute's fresh slots).
 */
export async function waitAwayFromMinuteEnd(marginS = 15): Promise<void> {
  const s = new Date().getUTCSeconds();
  if (s >= 60 - marginS) await sleep((61 - s) * 1000);
}

/** Polls `check` until it returns a value that is not undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 15000,
  what = 'condition'
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
