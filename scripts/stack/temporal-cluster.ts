/**
 * A real Temporal cluster (docs/operations.md#a-real-temporal-cluster), not the CLI's dev server: the Temporal server
 * (go.temporal.io/server at the version the CLI embeds, built by `scripts/install-tools.sh temporal-server`) with
 * persistence and visibility on PostgreSQL (the postgres12 plugin), its schema made and updated by Temporal's own SQL
 * tool, and any number of members, each running all four services (frontend, history, matching, worker) and joining
 * the others by ringpop membership (members find each other through the cluster_membership table, and talk on the
 * address each one broadcasts).
 *
 * Each member has a directory of its own with its config (`config/cluster.yaml`) and dynamic config, binds every
 * service on its own address with the same ports (7233 frontend, 7234 history, 7235 matching, 7239 worker; 69xx for
 * membership): on separate hosts each member has an address of its own, and on one machine the members take
 * 127.0.0.11, 127.0.0.12, … (the whole of 127/8 is loopback on Linux).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { log, ServerHandle, spawnServer, waitForPort } from './process';

export const TEMPORAL_SERVER_VERSION = 'v1.29.1';
/** History shards: fixed for the life of a cluster's database; a handful is plenty for a test or a small hub. */
export const HISTORY_SHARDS = 4;
export const FRONTEND_PORT = 7233;
const SERVICE_PORTS = {
  frontend: { grpcPort: FRONTEND_PORT, membershipPort: 6933, httpPort: 7243 },
  history: { grpcPort: 7234, membershipPort: 6934 },
  matching: { grpcPort: 7235, membershipPort: 6935 },
  worker: { grpcPort: 7239, membershipPort: 6939 }
} as const;
export const DATABASES = { persistence: 'temporal', visibility: 'temporal_visibility' } as const;

const SCRIPT = path.join(__dirname, '..', 'install-tools.sh');

export interface TemporalServerTools {
  server: string;
  sqlTool: string;
}

/** The server and its SQL tool, built on first use (a few minutes) and cached outside the clone. */
export async function ensureTemporalServer(): Promise<TemporalServerTools> {
  const found = await installTools('temporal-server', ['temporal-server', 'temporal-sql-tool']);
  return { server: found['temporal-server']!, sqlTool: found['temporal-sql-tool']! };
}

/** Temporal's Web UI server (the UI the CLI's dev server embeds), built on first use and cached outside the clone. */
export async function ensureTemporalUi(): Promise<string> {
  return (await installTools('temporal-ui', ['temporal-ui']))['temporal-ui']!;
}

/** Runs `install-tools.sh <target>` and answers the path it reports for each of `binaries`. */
function installTools(target: string, binaries: string[]): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [SCRIPT, target], { stdio: ['ignore', 'inherit', 'pipe'] });
    const found: Record<string, string> = {};
    const recent: string[] = [];
    let announced = false;
    readline.createInterface({ input: child.stderr! }).on('line', (raw) => {
      const line = raw.replace(/^\[install-tools\] ?/, '');
      recent.push(line);
      if (recent.length > 40) recent.shift();
      const m = /^(\S+) \S+: (?:cached at|built.*->) (\S+)$/.exec(line);
      if (m && binaries.includes(m[1]!)) found[m[1]!] = m[2]!;
      else if (/building with/.test(line) && !announced) {
        announced = true;
        log(`${line} (a few minutes on 2 cores)`);
      }
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0 && binaries.every((b) => found[b])) return resolve(found);
      reject(new Error(`could not build ${target} (exit code ${code}):\n${recent.join('\n')}`));
    });
  });
}

export interface PostgresAddress {
  host: string;
  port: number;
  user: string;
  password?: string;
}

/**
 * Makes the two databases where missing and brings their schemas to the version this server expects, with Temporal's
 * SQL tool (idempotent: `setup-schema -v 0.0` leaves a newer version alone, `update-schema` applies only what is
 * missing). The schema files are the ones embedded in the tool (`--schema-name postgresql/v12/…`, the module's
 * schema/postgresql/v12 directory).
 */
export async function setupTemporalSchema(sqlTool: string, pg: PostgresAddress): Promise<void> {
  for (const [db, schema] of [
    [DATABASES.persistence, 'postgresql/v12/temporal'],
    [DATABASES.visibility, 'postgresql/v12/visibility']
  ] as const) {
    const common = [
      '--plugin',
      'postgres12',
      '--ep',
      pg.host,
      '--port',
      String(pg.port),
      '--user',
      pg.user,
      '--password',
      pg.password ?? '',
      '--db',
      db
    ];
    const created = await runTool(sqlTool, [...common, 'create-database'], true);
    if (created.code !== 0 && !/already exists/.test(created.output))
      throw new Error(`temporal-sql-tool create-database ${db} failed:\n${created.output}`);
    for (const step of [
      ['setup-schema', '-v', '0.0'],
      ['update-schema', '--schema-name', schema]
    ]) {
      const res = await runTool(sqlTool, [...common, ...step]);
      if (res.code !== 0) throw new Error(`temporal-sql-tool ${step[0]} ${db} failed:\n${res.output}`);
    }
  }
}

function runTool(binary: string, args: string[], quiet = false): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', (err) => resolve({ code: 1, output: String(err) }));
    child.on('close', (code) => {
      if (!quiet && code !== 0) log(`temporal-sql-tool ${args.join(' ')}: exit code ${code}`);
      resolve({ code, output });
    });
  });
}

/** The server config of one member (YAML is a superset of JSON: written as JSON). */
export function memberConfig(opts: {
  /** The address this member binds and broadcasts to the others. */
  ip: string;
  postgres: PostgresAddress;
  dynamicConfigFile: string;
  logLevel?: string;
}): object {
  const datastore = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${opts.postgres.host}:${opts.postgres.port}`,
      connectProtocol: 'tcp',
      user: opts.postgres.user,
      password: opts.postgres.password ?? '',
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h'
    }
  });
  return {
    log: { stdout: true, level: opts.logLevel ?? 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: HISTORY_SHARDS,
      datastores: {
        'postgres-default': datastore(DATABASES.persistence, 20),
        'postgres-visibility': datastore(DATABASES.visibility, 5)
      }
    },
    global: { membership: { maxJoinDuration: '30s', broadcastAddress: opts.ip } },
    services: Object.fromEntries(
      Object.entries(SERVICE_PORTS).map(([name, ports]) => [name, { rpc: { ...ports, bindOnIP: opts.ip } }])
    ),
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `${opts.ip}:${FRONTEND_PORT}`
        }
      }
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: opts.dynamicConfigFile, pollInterval: '10s' }
  };
}

/**
 * Dynamic config: the namespace cache refreshed every 2 s rather than 10 (a namespace registered through one member is
 * known to the others at once), and search attributes read fresh, as the dev server does (the worker registers the
 * hub's own at its start and uses them right after).
 */
const DYNAMIC_CONFIG = [
  'system.forceSearchAttributesCacheRefreshOnRead:',
  '  - value: true',
  '    constraints: {}',
  'system.namespaceCacheRefreshInterval:',
  '  - value: 2s',
  '    constraints: {}',
  ''
].join('\n');

export interface TemporalMember extends ServerHandle {
  ip: string;
  /** host:port of its frontend. */
  address: string;
}

/**
 * Starts one member: writes its config under `dir` and runs the server with every service. `spawnIt`: how to run the
 * process (default: a child of this process here; a test host runs it inside its network namespace). Resolves once
 * the process runs; use waitForFrontend for when it serves.
 */
export function startTemporalMember(opts: {
  server: string;
  dir: string;
  ip: string;
  postgres: PostgresAddress;
  logLevel?: string;
  echo?: boolean;
  spawnIt?: (o: { name: string; binary: string; args: string[]; pidFile: string; logFile?: string }) => ServerHandle;
  name?: string;
}): TemporalMember {
  const configDir = path.join(opts.dir, 'config');
  fs.mkdirSync(configDir, { recursive: true });
  const dynamicConfigFile = path.join(opts.dir, 'dynamicconfig.yaml');
  fs.writeFileSync(dynamicConfigFile, DYNAMIC_CONFIG);
  const config = memberConfig({ ip: opts.ip, postgres: opts.postgres, dynamicConfigFile, logLevel: opts.logLevel });
  fs.writeFileSync(path.join(configDir, 'cluster.yaml'), `${JSON.stringify(config, null, 2)}\n`);
  const name = opts.name ?? `temporal-${opts.ip}`;
  const args = ['--root', opts.dir, '--config', 'config', '--env', 'cluster', '--allow-no-auth', 'start'];
  const spec = {
    name,
    binary: opts.server,
    args,
    pidFile: path.join(opts.dir, 'temporal-server.pid'),
    logFile: path.join(opts.dir, 'temporal-server.log')
  };
  const handle = opts.spawnIt ? opts.spawnIt(spec) : spawnServer({ ...spec, echo: opts.echo ?? true });
  return { ...handle, ip: opts.ip, address: `${opts.ip}:${FRONTEND_PORT}` };
}

/**
 * Resolves once the frontend at `address` says SERVING (`temporal operator cluster health`, the CLI's own check);
 * rejects after `timeoutMs`, or at once when `member` exits.
 */
export async function waitForFrontend(
  cli: string,
  address: string,
  timeoutMs: number,
  member?: ServerHandle
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    const reason = member?.exitReason();
    if (reason) throw new Error(`Temporal member ${member!.name} exited (${reason}):\n${member!.output(30)}`);
    const res = await runTool(cli, ['operator', 'cluster', 'health', '--address', address], true);
    if (res.code === 0 && /SERVING/.test(res.output)) return;
    last = res.output.trim();
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`the Temporal frontend at ${address} did not serve within ${timeoutMs / 1000} s: ${last}`);
}

/** Registers `namespace` (already registered: fine), then waits until every frontend in `addresses` knows it. */
export async function registerNamespace(cli: string, addresses: string[], namespace: string): Promise<void> {
  const created = await runTool(
    cli,
    ['operator', 'namespace', 'create', '--address', addresses[0]!, '--namespace', namespace, '--retention', '72h'],
    true
  );
  if (created.code !== 0 && !/already (registered|exists)/i.test(created.output))
    throw new Error(`could not register the Temporal namespace ${namespace}: ${created.output.trim()}`);
  for (const address of addresses) {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await runTool(
        cli,
        ['operator', 'namespace', 'describe', '--address', address, '--namespace', namespace],
        true
      );
      if (res.code === 0) break;
      if (Date.now() > deadline)
        throw new Error(`the frontend at ${address} does not know namespace ${namespace}: ${res.output.trim()}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/**
 * Temporal's Web UI server pointed at `temporalAddress` (a frontend, or the balancer in front of them), its config
 * under `dir`, listening on host:port. Resolves once it listens.
 */
export async function startTemporalUi(opts: {
  binary: string;
  dir: string;
  temporalAddress: string;
  host: string;
  port: number;
  echo?: boolean;
}): Promise<ServerHandle & { url: string }> {
  const configDir = path.join(opts.dir, 'config');
  fs.mkdirSync(configDir, { recursive: true });
  const config = {
    temporalGrpcAddress: opts.temporalAddress,
    host: opts.host,
    port: opts.port,
    enableUi: true,
    defaultNamespace: 'default',
    notifyOnNewVersion: false
  };
  fs.writeFileSync(path.join(configDir, 'cluster.yaml'), `${JSON.stringify(config, null, 2)}\n`);
  const handle = spawnServer({
    name: 'temporal-ui',
    binary: opts.binary,
    args: ['--root', opts.dir, '--config', 'config', '--env', 'cluster', 'start'],
    pidFile: path.join(opts.dir, 'temporal-ui.pid'),
    echo: opts.echo ?? true
  });
  await waitForPort(opts.host, opts.port, 30_000, handle.child);
  return { ...handle, url: `http://${opts.host}:${opts.port}` };
}
