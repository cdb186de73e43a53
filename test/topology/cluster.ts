/**
 * The parts every topology test starts the same way (test/topology/*.test.ts): the database host `db`
 * (test/topology/db-host.ts), a real Temporal cluster of two members on `temporal-1` and `temporal-2` on its
 * PostgreSQL (scripts/stack/temporal-cluster.ts), nginx balancing gRPC over both frontends on `temporal-lb`
 * (test/topology/temporal-lb.ts), and the hub's API and worker processes on hosts of their own, each given the same
 * settings as a compose replica would be.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { ServerHandle, sleep, typescriptProcess } from '../../scripts/stack/process';
import {
  ensureTemporalServer,
  PostgresAddress,
  registerNamespace,
  setupTemporalSchema,
  startTemporalMember,
  TemporalMember,
  TemporalServerTools,
  waitForFrontend
} from '../../scripts/stack/temporal-cluster';
import { ensureTool } from '../../scripts/stack/tools';
import { DB_FERRETDB_PORT, DB_POSTGRES_PORT } from './db-host';
import { findNginx } from '../../scripts/stack/nginx';
import { BRIDGE_IP, cannotMakeHosts, Host, Topology, waitForHostPort } from './hosts';
import { startTemporalLb } from './temporal-lb';

const ROOT = path.resolve(__dirname, '..', '..');
export const SUBNET = `${BRIDGE_IP.replace(/\.1$/, '.0')}/24`;
/** The API's main listener on its host (the default PORT, as in compose). */
export const API_PORT = 8080;

/** The Temporal server and its SQL tool, and the Temporal CLI (which checks a frontend and registers namespaces). */
export async function temporalTools(): Promise<{ tools: TemporalServerTools; cli: string }> {
  const [tools, cli] = await Promise.all([
    ensureTemporalServer(),
    process.env.ZH_TEST_TEMPORAL_BIN ? Promise.resolve(process.env.ZH_TEST_TEMPORAL_BIN) : ensureTool('temporal')
  ]);
  return { tools, cli };
}

export interface DbAndTemporal {
  /** FerretDB on `db`, as the hub's processes and the test reach it. */
  mongoUri: string;
  pg: PostgresAddress;
  /** The members, in order; a restarted member replaces its entry. */
  members: TemporalMember[];
  /** Starts member `i` (1-based) on `temporal-<i>` again, after it was killed or stopped; replaces its entry. */
  startMember(i: number): TemporalMember;
  /** The balancer's host:port on `temporal-lb`: the hub's TEMPORAL_ADDRESS. */
  temporalAddress: string;
}

/**
 * PostgreSQL and FerretDB on `db`, Temporal's schema, the two members (one after the other: on a new database each
 * saves the cluster's metadata at its first start, and of two starting at once one can lose that insert and exit),
 * the `default` namespace and the gRPC balancer. `root` holds every data dir and log.
 */
export async function startDbAndTemporal(opts: {
  topology: Topology;
  root: string;
  tools: TemporalServerTools;
  cli: string;
  nginxBin: string;
}): Promise<DbAndTemporal> {
  const { topology, root, tools, cli } = opts;
  const db = topology.hosts.db!;
  const dbHost = db.spawn({
    name: 'db',
    ...withArgs(typescriptProcess(path.join(__dirname, 'db-host.ts')), [path.join(root, 'db'), db.ip, SUBNET]),
    pidFile: path.join(root, 'db.pid')
  });
  await waitForHostPort(db.ip, DB_FERRETDB_PORT, 120_000, dbHost);
  const pg: PostgresAddress = { host: db.ip, port: DB_POSTGRES_PORT, user: 'ferret' };
  await setupTemporalSchema(tools.sqlTool, pg);
  const members: TemporalMember[] = [];
  const startMember = (i: number): TemporalMember => {
    const host = topology.hosts[`temporal-${i}`]!;
    const member = startTemporalMember({
      server: tools.server,
      dir: path.join(root, `temporal-${i}`),
      ip: host.ip,
      postgres: pg,
      name: `temporal-${i}`,
      spawnIt: (o) => host.spawn(o)
    });
    members[i - 1] = member;
    return member;
  };
  for (const i of [1, 2]) {
    const member = startMember(i);
    await waitForFrontend(cli, member.address, 120_000, member);
  }
  await registerNamespace(
    cli,
    members.map((m) => m.address),
    'default'
  );
  const lb = await startTemporalLb(
    opts.nginxBin,
    topology.hosts['temporal-lb']!,
    root,
    members.map((m) => m.address)
  );
  return {
    mongoUri: `mongodb://${db.ip}:${DB_FERRETDB_PORT}/`,
    pg,
    members,
    startMember,
    temporalAddress: lb.address
  };
}

/** What every hub process of one test shares (its database, task queue and tokens): as compose's `x-hub-env`. */
export function hubEnv(
  shared: { mongoUri: string; dbName: string; temporalAddress: string; taskQueue: string; adminToken: string },
  extra: NodeJS.ProcessEnv = {}
): NodeJS.ProcessEnv {
  return {
    ...process.env,
    LOG_LEVEL: 'warn',
    MONGODB_URI: shared.mongoUri,
    MONGODB_DB: shared.dbName,
    TEMPORAL_ADDRESS: shared.temporalAddress,
    TEMPORAL_TASK_QUEUE: shared.taskQueue,
    ADMIN_TOKEN: shared.adminToken,
    NODE_REVIEW_REQUIRED: 'false',
    DEPLOY_WEB: 'off',
    REGISTER_RATE_LIMIT_PER_MIN: '100000',
    ...(process.env.ZH_TEST_WORKFLOW_BUNDLE ? { WORKFLOW_BUNDLE_PATH: process.env.ZH_TEST_WORKFLOW_BUNDLE } : {}),
    ...extra
  };
}

/**
 * The hub's API (`api`) or worker (`worker`) on `host`, named after it, its data dir and log under `root`
 * (`<root>/<host>`, `<root>/<host>.log`: a restart keeps both). An API listens on the host's address, which is also
 * its PUBLIC_URL unless `own` sets one.
 */
export function startHubProcess(
  kind: 'api' | 'worker',
  host: Host,
  root: string,
  env: NodeJS.ProcessEnv,
  own: NodeJS.ProcessEnv = {}
): ServerHandle & { url: string } {
  const handle = host.spawn({
    name: host.name,
    ...typescriptProcess(path.join(ROOT, kind === 'api' ? 'api/server.ts' : 'worker/main.ts')),
    pidFile: path.join(root, `${host.name}.pid`),
    logFile: path.join(root, `${host.name}.log`),
    env: {
      ...env,
      DATA_DIR: path.join(root, host.name),
      HOST: host.ip,
      ...(kind === 'api' ? { PUBLIC_URL: `http://${host.ip}:${API_PORT}` } : {}),
      ...own
    }
  });
  return { ...handle, url: `http://${host.ip}:${API_PORT}` };
}

/** Resolves once `url` answers 200; throws when `handle` exits or after `timeoutMs`. */
export async function waitHealthy(url: string, handle: ServerHandle, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const reason = handle.exitReason();
    if (reason) throw new Error(`${handle.name} exited (${reason}):\n${handle.output(30)}`);
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(5_000) })).ok) return;
    } catch {
      /* not yet listening */
    }
    await sleep(250);
  }
  throw new Error(`${url} did not become healthy within ${timeoutMs / 1000} s:\n${handle.output(30)}`);
}

/**
 * Resolves once `handle`, a worker process, polls `taskQueue` (a poller whose identity is its pid's: the SDK's default
 * `<pid>@<hostname>`, so a stopped worker's poller, still listed for a while, does not count); throws when it exits or
 * after `timeoutMs`.
 */
export async function waitForPoller(
  connection: Connection,
  taskQueue: string,
  handle: ServerHandle,
  timeoutMs = 180_000
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const reason = handle.exitReason();
    if (reason) throw new Error(`${handle.name} exited (${reason}):\n${handle.output(30)}`);
    const res = await connection.workflowService
      .describeTaskQueue({ namespace: 'default', taskQueue: { name: taskQueue }, taskQueueType: 1 })
      .catch(() => null);
    if ((res?.pollers ?? []).some((p) => p.identity?.startsWith(`${handle.child.pid}@`))) return;
    await sleep(500);
  }
  throw new Error(`the worker did not poll ${taskQueue} within ${timeoutMs / 1000} s:\n${handle.output(30)}`);
}

/** A data dir for the whole run under the system's temp dir, reachable by PostgreSQL's user (it runs as postgres). */
export function makeRoot(prefix: string): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(root, 0o711);
  return root;
}

function withArgs(p: { binary: string; args: string[] }, more: string[]): { binary: string; args: string[] } {
  return { binary: p.binary, args: [...p.args, ...more] };
}

/**
 * What every topology suite needs beside the tools it builds: test hosts (root, ip netns) and Debian's nginx (the
 * balancers). Without them the suite is skipped, saying why once (`suite` names it).
 */
export function onTestHosts(suite: string): { nginxBin: string; describeOnHosts: jest.Describe } {
  const nginxBin = findNginx(process.env.NGINX_BIN ?? '/usr/sbin/nginx');
  const refused = cannotMakeHosts() ?? (nginxBin ? null : 'nginx is not installed (apt-get install -y nginx)');
  if (refused) console.warn(`skipping ${suite}: ${refused}`);
  return { nginxBin: nginxBin ?? '', describeOnHosts: refused ? describe.skip : describe };
}
