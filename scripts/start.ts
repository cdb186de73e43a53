/**
 * `npm start`: the whole service on the embedded stack, in one command.
 *   1. FerretDB on loopback (unless MONGODB_URI is set) and the Temporal dev server with its Web UI (unless
 *      TEMPORAL_ADDRESS is set), both built once and cached outside the clone, data under DATA_DIR;
 *   2. the worker process and the API process (all listeners).
 * Ctrl-C or SIGTERM stops them in order: API drains, worker drains, then Temporal and FerretDB exit.
 * Leftovers of a crashed run (recorded in DATA_DIR/run/*.pid) are stopped before starting again.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig } from '../core/config.node';
import { startFerretDb } from './stack/ferretdb';
import { startTemporal } from './stack/temporal';
import { log, ServerHandle, spawnServer, stopStale, typescriptProcess } from './stack/process';

const ROOT = path.resolve(__dirname, '..');

async function main(): Promise<void> {
  const started = Date.now();
  const config = loadConfig();
  fs.mkdirSync(config.dataDir, { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: config.dataDir };
  const handles: ServerHandle[] = [];
  let stopping = false;

  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('stopping: api, worker, then the embedded servers...');
    for (const h of [...handles].reverse()) await h.stop();
    log('stopped');
    process.exit(code);
  };
  process.once('SIGINT', () => void stopAll(0));
  process.once('SIGTERM', () => void stopAll(0));

  try {
    if (!config.MONGODB_URI) {
      log(`starting FerretDB on 127.0.0.1:${config.FERRETDB_PORT} (data in ${path.join(config.dataDir, 'ferretdb')})`);
      const ferret = await startFerretDb({ dataDir: config.dataDir, port: config.FERRETDB_PORT });
      handles.push(ferret);
      env.MONGODB_URI = ferret.uri;
    } else {
      log('using MONGODB_URI');
    }
    if (!config.TEMPORAL_ADDRESS) {
      log(`starting Temporal dev server on 127.0.0.1:${config.TEMPORAL_PORT}, Web UI on http://127.0.0.1:${config.TEMPORAL_UI_PORT}`);
      const temporal = await startTemporal({
        dataDir: config.dataDir,
        port: config.TEMPORAL_PORT,
        uiPort: config.TEMPORAL_UI_PORT,
        namespace: config.TEMPORAL_NAMESPACE
      });
      handles.push(temporal);
      env.TEMPORAL_ADDRESS = temporal.address;
    } else {
      log(`using TEMPORAL_ADDRESS=${config.TEMPORAL_ADDRESS}`);
    }

    for (const [name, script] of [
      ['worker', 'worker/main.ts'],
      ['api', 'api/server.ts']
    ] as const) {
      const pidFile = path.join(config.dataDir, 'run', `${name}.pid`);
      await stopStale(pidFile, path.join(ROOT, script));
      const handle = spawnServer({ name, ...typescriptProcess(path.join(ROOT, script)), pidFile, echo: true, env });
      handles.push(handle);
      void handle.exited.then((code) => {
        if (!stopping) {
          log(`${name} exited unexpectedly (code ${code}); stopping everything`);
          void stopAll(1);
        }
      });
    }
    await waitForHealth(`http://127.0.0.1:${config.PORT}/health`, 120_000);
    log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    log(`  API            ${config.publicUrl}  (try ${config.publicUrl}/a2a/endpoints/summary, docs at ${config.publicUrl}/docs)`);
    if (!config.TEMPORAL_ADDRESS) log(`  Temporal Web UI http://127.0.0.1:${config.TEMPORAL_UI_PORT}`);
    log(`  admin token    ${config.ADMIN_TOKEN ? 'ADMIN_TOKEN from the environment' : path.join(config.dataDir, 'admin-token')}`);
    log('Press Ctrl-C to stop.');
  } catch (err) {
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
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\nSee README.md, "Configuration", for every variable.\n`);
    process.exit(1);
  }
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
