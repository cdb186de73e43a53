/**
 * Starts FerretDB (the MongoDB wire protocol) on loopback, storing in the PostgreSQL server given by `postgresqlUrl`
 * (scripts/stack/postgres.ts); its state file goes under `dataDir/ferretdb`.
 * It binds one port; its debug listener is off unless `debugPort` is given (its default, 127.0.0.1:8088, would
 * collide between two instances). A start whose port turns out to be taken is tried again, with a new port where the caller left the
 * choice to us, up to START_ATTEMPTS times.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startPostgres } from './postgres';
import { freePort, isBindFailure, log, ServerHandle, spawnServer, stopStale, waitForPort } from './process';
import { START_ATTEMPTS } from './temporal';
import { ensureTool } from './tools';

export async function startFerretDb(opts: {
  dataDir: string;
  /** FerretDB's PostgreSQL backend on this server (postgres://…). */
  postgresqlUrl: string;
  /** 0 or absent: a free port. */
  port?: number;
  /** The address it listens on: 127.0.0.1 unless given (a test host's own address, test/topology/). */
  host?: string;
  echo?: boolean;
  /** Also append the server's output to this file. */
  logFile?: string;
  /** Its debug listener (/debug/metrics) on this loopback port; absent or 0: off. */
  debugPort?: number;
}): Promise<ServerHandle & { uri: string; port: number }> {
  const binary = await ensureTool('ferretdb');
  const dir = path.join(opts.dataDir, 'ferretdb');
  fs.mkdirSync(dir, { recursive: true });
  const pidFile = path.join(opts.dataDir, 'run', 'ferretdb.pid');
  await stopStale(pidFile, binary);
  const host = opts.host ?? '127.0.0.1';
  for (let attempt = 1; ; attempt++) {
    const port = opts.port || (await freePort());
    const handle = spawnServer({
      name: 'ferretdb',
      binary,
      pidFile,
      echo: opts.echo ?? true,
      logFile: opts.logFile,
      args: [
        '--handler=postgresql',
        `--postgresql-url=${opts.postgresqlUrl}`,
        `--listen-addr=${host}:${port}`,
        `--state-dir=${dir}`,
        '--telemetry=disable',
        opts.debugPort ? `--debug-addr=127.0.0.1:${opts.debugPort}` : '--debug-addr=-',
        '--log-level=error'
      ]
    });
    try {
      await waitForPort(host, port, 30_000, handle.child);
      return { ...handle, uri: `mongodb://${host}:${port}/`, port };
    } catch (err) {
      await handle.stop();
      await handle.closed;
      if (!isBindFailure(handle.output()) || attempt >= START_ATTEMPTS) {
        throw new Error(
          `FerretDB did not start: ${err instanceof Error ? err.message : String(err)}\n${handle.output(30)}`
        );
      }
      log(`ferretdb: port ${port} was taken; starting it again (attempt ${attempt + 1} of ${START_ATTEMPTS})`);
    }
  }
}

/** FerretDB on a PostgreSQL server of its own (see startEmbeddedStore). */
export interface EmbeddedStore {
  /** mongodb://127.0.0.1:<port>/ */
  uri: string;
  ferret: ServerHandle & { uri: string; port: number };
  postgres: ServerHandle & { url: string; port: number };
  /** Stops FerretDB, then PostgreSQL. */
  stop(): Promise<void>;
}

/**
 * The embedded store outside the launcher (the test suite's global setup, the benches' module phases, CI): PostgreSQL
 * with its cluster under `dataDir/postgres` and FerretDB on it, both on free loopback ports unless `port` (FerretDB's)
 * is given. A FerretDB that does not start takes its PostgreSQL down with it.
 */
export async function startEmbeddedStore(opts: {
  dataDir: string;
  port?: number;
  echo?: boolean;
  logFile?: string;
}): Promise<EmbeddedStore> {
  const postgres = await startPostgres({ dataDir: opts.dataDir, echo: opts.echo, logFile: opts.logFile });
  let ferret: ServerHandle & { uri: string; port: number };
  try {
    ferret = await startFerretDb({ ...opts, postgresqlUrl: postgres.url });
  } catch (err) {
    await postgres.stop();
    throw err;
  }
  return {
    uri: ferret.uri,
    ferret,
    postgres,
    stop: async () => {
      await ferret.stop();
      await postgres.stop();
    }
  };
}
