/**
 * `npm start`: the whole service on the embedded stack, in one command.
 *   1. FerretDB on loopback, on a PostgreSQL server of its own (unless MONGODB_URI is set), and the Temporal dev
 *      server with its Web UI (unless TEMPORAL_ADDRESS is set), both built once (in parallel, with live progress) and
 *      cached outside the clone, data under DATA_DIR;
 *   2. the worker process and the API process (all listeners).
 * Before anything starts: the configuration is checked (invalid: exit code 78, EX_CONFIG) and the Debian packages
 * the service runs (PostgreSQL, nginx) are installed where missing (scripts/stack/packages.ts; a user who may not
 * install them gets the one command to run and exit code 77). Then the embedded store must be able to run
 * (scripts/stack/postgres.ts): PostgreSQL installed (else exit code 69, EX_UNAVAILABLE), a data dir without SQLite
 * data of an older version and, as root, within the postgres user's reach (else 78).
 * Every process is supervised (scripts/stack/supervisor.ts): one that dies is restarted with back-off; after too
 * many deaths in a short window everything stops with a message saying which one and why. One that stops on invalid
 * configuration (exit code 78) is not restarted: everything stops and the launcher exits with 78.
 * Ctrl-C (SIGINT), SIGTERM or SIGHUP stops them in order: API drains, worker drains, then Temporal and FerretDB
 * exit. A second Ctrl-C kills them all at once (SIGKILL) instead of waiting for the drains. Whatever way the launcher
 * ends (short of its own SIGKILL), it takes its servers with it; leftovers of a launcher killed outright (recorded
 * in DATA_DIR/run/*.pid) are stopped at the next start.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../core/config.node';
import { checkReferencedConfiguration, EX_CONFIG, isConfigurationError } from '../core/config-check.node';
import { startFerretDb } from './stack/ferretdb';
import {
  checkPostgresCanRun,
  checkSqliteData,
  EmbeddedStoreRefused,
  POSTGRES_ROLE,
  startPostgres
} from './stack/postgres';
import { startTemporal } from './stack/temporal';
import { findNginx, NGINX_INSTALL_HINT, startNginx } from './stack/nginx';
import {
  echoesPretty,
  holdStartupLines,
  killEveryServer,
  log,
  quietMoment,
  releaseStartupLines,
  spawnServer,
  stopStale,
  typescriptProcess
} from './stack/process';
import { SIGNAL_ECHO_MS, Supervised } from './stack/supervisor';
import { ensureTools, ToolName } from './stack/tools';
import { ensurePackages, PackagesMissing, packagesFor } from './stack/packages';

const ROOT = path.resolve(__dirname, '..');

// Output may go to a pipe whose reader has gone (a closed terminal, `npm start | head`): a failed write must not
// end the launcher before it has stopped its servers.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);
// The last act of a launcher that ends any other way than through stopAll (an uncaught error, process.exit
// elsewhere): no server is left without its parent.
process.on('exit', () => void killEveryServer());

async function main(): Promise<void> {
  const started = Date.now();
  const config = loadConfig();
  checkReferencedConfiguration(config);
  // The data dir first (nothing to install for one that is refused), PostgreSQL once the package step is done.
  const sqliteNote = config.MONGODB_URI ? null : checkSqliteData(config.dataDir);
  await ensurePackages(packagesFor(config));
  if (!config.MONGODB_URI) checkPostgresCanRun(config.dataDir);
  fs.mkdirSync(config.dataDir, { recursive: true });
  // The children write JSON into their pipes; the launcher formats it for its terminal (scripts/stack/process.ts).
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: config.dataDir, LOG_FORMAT: 'json' };
  // At a terminal the children's start-up info lines wait until just before the ready banner, which comes last.
  if (echoesPretty()) holdStartupLines();
  // In start order; stopped in reverse.
  const parts: Supervised[] = [];
  let stopping = false;
  let firstSignalAt = 0;
  let killing = false;

  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    releaseStartupLines();
    log('stopping: api, worker, then the embedded servers...');
    for (const part of [...parts].reverse()) await part.stop();
    log('stopped');
    process.exit(code);
  };
  const killAll = async () => {
    killing = true;
    const victims = killEveryServer();
    log(`killing every process at once (SIGKILL): ${victims.length} left`);
    await Promise.all(
      victims.map((c) =>
        c.exitCode !== null || c.signalCode !== null ? undefined : new Promise((r) => c.once('exit', r))
      )
    );
    log('killed');
    process.exit(130);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (!stopping) {
      firstSignalAt = Date.now();
      log(`${signal}: stopping everything in order (press Ctrl-C again to kill them at once)`);
      void stopAll(0);
    } else if (!killing && Date.now() - firstSignalAt >= SIGNAL_ECHO_MS) {
      log(`${signal} again`);
      void killAll();
    }
  };
  // process.on, not once: with no listener left, a second SIGINT would end the launcher at once and leave its
  // servers running without it.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);
  const giveUp = (message: string, exitCode: number) => {
    log(message);
    void stopAll(exitCode);
  };

  try {
    // Both builds (first start only) in parallel; each server below waits for its own binary.
    const tools: ToolName[] = [
      ...(config.MONGODB_URI ? [] : ['ferretdb' as const]),
      ...(config.TEMPORAL_ADDRESS ? [] : ['temporal' as const])
    ];
    void ensureTools(tools).catch(() => undefined);

    if (!config.MONGODB_URI) {
      // FerretDB stores in a PostgreSQL child server (docs/storage.md#the-embedded-store-ferretdb-on-postgresql).
      if (sqliteNote) log(sqliteNote);
      const cluster = path.join(config.dataDir, 'postgres');
      log(`starting PostgreSQL on 127.0.0.1:${config.POSTGRES_PORT} (data in ${cluster})`);
      const postgres = new Supervised(
        'postgres',
        () => startPostgres({ dataDir: config.dataDir, port: config.POSTGRES_PORT }),
        giveUp
      );
      parts.push(postgres);
      await postgres.run();
      log(`starting FerretDB on 127.0.0.1:${config.FERRETDB_PORT} (on PostgreSQL ${config.POSTGRES_PORT})`);
      const ferret = new Supervised(
        'ferretdb',
        () =>
          startFerretDb({
            dataDir: config.dataDir,
            port: config.FERRETDB_PORT,
            postgresqlUrl: `postgres://${POSTGRES_ROLE}@127.0.0.1:${config.POSTGRES_PORT}/postgres`,
            debugPort: config.FERRETDB_DEBUG_PORT
          }),
        giveUp
      );
      parts.push(ferret);
      await ferret.run();
      env.MONGODB_URI = `mongodb://127.0.0.1:${config.FERRETDB_PORT}/`;
    } else {
      log('using MONGODB_URI');
    }
    if (!config.TEMPORAL_ADDRESS) {
      log(
        `starting Temporal dev server on 127.0.0.1:${config.TEMPORAL_PORT}, Web UI on http://127.0.0.1:${config.TEMPORAL_UI_PORT}`
      );
      const temporal = new Supervised(
        'temporal',
        () =>
          startTemporal({
            dataDir: config.dataDir,
            port: config.TEMPORAL_PORT,
            uiPort: config.TEMPORAL_UI_PORT,
            namespace: config.TEMPORAL_NAMESPACE
          }),
        giveUp
      );
      parts.push(temporal);
      await temporal.run();
      env.TEMPORAL_ADDRESS = `127.0.0.1:${config.TEMPORAL_PORT}`;
    } else {
      log(`using TEMPORAL_ADDRESS=${config.TEMPORAL_ADDRESS}`);
    }

    // The deploy web server (docs/deploy.md#how-it-runs): optional; without it only deploys answer 503.
    const nginxBin = config.DEPLOY_WEB === 'on' ? findNginx(config.NGINX_BIN) : null;
    if (config.DEPLOY_WEB === 'off') log('DEPLOY_WEB=off: no deploy web server');
    else if (!nginxBin)
      log(
        `nginx not found at ${config.NGINX_BIN}: deploys will answer 503 until it is installed (${NGINX_INSTALL_HINT})`
      );
    else {
      log(
        `starting nginx (deploy web) on ${config.HOST}:${config.DEPLOY_WEB_PORT} (prefix ${path.join(config.dataDir, 'deploy', 'nginx')})`
      );
      const nginx = new Supervised(
        'nginx',
        () =>
          startNginx({ dataDir: config.dataDir, binary: nginxBin, host: config.HOST, port: config.DEPLOY_WEB_PORT }),
        giveUp
      );
      parts.push(nginx);
      await nginx.run();
    }

    for (const [name, script] of [
      ['worker', 'worker/main.ts'],
      ['api', 'api/server.ts']
    ] as const) {
      const pidFile = path.join(config.dataDir, 'run', `${name}.pid`);
      await stopStale(pidFile, path.join(ROOT, script));
      const part = new Supervised(
        name,
        () =>
          spawnServer({
            name,
            ...typescriptProcess(path.join(ROOT, script)),
            pidFile,
            echo: true,
            holdAtStart: true,
            env
          }),
        giveUp
      );
      parts.push(part);
      await part.run();
    }
    await waitForHealth(`http://127.0.0.1:${config.PORT}/health`, 120_000);
    const readyAfter = (Date.now() - started) / 1000;
    if (echoesPretty()) {
      // At a terminal the worker may still be bundling the workflow code, and the API saying what it started: their
      // lines first (the worker's up to its "worker polling" where info is logged, then a quiet moment for the
      // Temporal SDK's own lines), the banner last.
      const worker = parts.find((p) => p.name === 'worker')?.current;
      const saysPolling = ['info', 'debug', 'trace'].includes(config.LOG_LEVEL);
      for (const end = Date.now() + 60_000; saysPolling && Date.now() < end;) {
        if (!worker || worker.exitReason() !== null || worker.output().includes('"msg":"worker polling"')) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await quietMoment(500, 5000);
      releaseStartupLines();
    }
    log(`ready in ${readyAfter.toFixed(1)} s`);
    log(
      `  API            ${config.publicUrl}  (try ${config.publicUrl}/a2a/endpoints/summary, docs at ${config.publicUrl}/docs)`
    );
    if (!config.TEMPORAL_ADDRESS) log(`  Temporal Web UI http://127.0.0.1:${config.TEMPORAL_UI_PORT}`);
    log(
      `  admin token    ${config.ADMIN_TOKEN ? 'ADMIN_TOKEN from the environment' : path.join(config.dataDir, 'admin-token')}`
    );
    log('Press Ctrl-C to stop.');
  } catch (err) {
    if (stopping) return;
    log(`start failed: ${err instanceof Error ? err.message : String(err)}`);
    await stopAll(1);
  }
}

async function waitForHealth(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the API did not become healthy at ${url} within ${timeoutMs / 1000} s`);
}

main().catch((err) => {
  if (isConfigurationError(err)) {
    const text = err.message.startsWith('Invalid configuration')
      ? err.message
      : `Invalid configuration: ${err.message}`;
    process.stderr.write(
      `${text}\nNothing was started (exit code ${EX_CONFIG}); docs/configuration.md lists every variable.\n`
    );
    process.exit(EX_CONFIG);
  }
  if (err instanceof PackagesMissing || err instanceof EmbeddedStoreRefused) {
    log(`nothing was started: ${err.message} (exit code ${err.exitCode})`);
    process.exit(err.exitCode);
  }
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
