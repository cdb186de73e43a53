/**
 * Starts the Temporal CLI dev server (with its Web UI) on loopback, its state in a SQLite file under `dataDir`.
 *
 * Ports: the dev server binds more than the gRPC and UI ports it is given: an HTTP API port and a metrics port
 * (random unless given; both are passed explicitly here) and one port per internal service (always random, no
 * flag). A random port can be one another server of ours was just given, and then a start fails with "address
 * already in use" (seen as the UI port taken by the dev server's own HTTP port). freePort() keeps the ports we hand
 * out from being handed out again, and a start that still fails on a bind is tried again (with new ports where the
 * caller left the choice to us), up to START_ATTEMPTS times.
 */
import fs from 'node:fs';
import path from 'node:path';
import { SEARCH_ATTRIBUTES } from '../../core/search-attributes';
import { freePort, isBindFailure, log, ServerHandle, spawnServer, stopStale, waitForPort } from './process';
import { ensureTool } from './tools';

/** Starts tried when a port turns out to be taken. */
export const START_ATTEMPTS = 4;

export async function startTemporal(opts: {
  dataDir: string;
  /** gRPC port; 0 or absent: a free one. */
  port?: number;
  /** Web UI port (ignored when headless); 0 or absent: a free one. */
  uiPort?: number;
  namespace: string;
  headless?: boolean;
  echo?: boolean;
  /** Also append the server's output to this file. */
  logFile?: string;
}): Promise<ServerHandle & { address: string; binary: string; port: number; uiPort: number | null }> {
  const binary = await ensureTool('temporal');
  const dir = path.join(opts.dataDir, 'temporal');
  fs.mkdirSync(dir, { recursive: true });
  const pidFile = path.join(opts.dataDir, 'run', 'temporal.pid');
  await stopStale(pidFile, binary);
  for (let attempt = 1; ; attempt++) {
    const port = opts.port || (await freePort());
    const uiPort = opts.headless ? null : opts.uiPort || (await freePort());
    const args = [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--http-port',
      String(await freePort()),
      '--metrics-port',
      String(await freePort()),
      '--db-filename',
      path.join(dir, 'temporal.sqlite'),
      '--namespace',
      opts.namespace,
      '--log-level',
      'error'
    ];
    if (uiPort === null) args.push('--headless');
    else args.push('--ui-port', String(uiPort));
    for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) args.push('--search-attribute', `${name}=${type}`);
    const handle = spawnServer({
      name: 'temporal',
      binary,
      args,
      pidFile,
      echo: opts.echo ?? true,
      logFile: opts.logFile
    });
    try {
      await waitForPort('127.0.0.1', port, 60_000, handle.child);
      if (uiPort !== null) await waitForPort('127.0.0.1', uiPort, 30_000, handle.child);
      return { ...handle, address: `127.0.0.1:${port}`, binary, port, uiPort };
    } catch (err) {
      await handle.stop();
      await handle.closed;
      if (!isBindFailure(handle.output()) || attempt >= START_ATTEMPTS) {
        throw new Error(
          `the Temporal dev server did not start: ${err instanceof Error ? err.message : String(err)}\n${handle.output(30)}`
        );
      }
      log(
        `temporal: a port was taken while it started (${lastLine(handle.output())}); starting it again (attempt ${attempt + 1} of ${START_ATTEMPTS})`
      );
    }
  }
}

function lastLine(output: string): string {
  return (
    output
      .split('\n')
      .reverse()
      .find((l) => /address already in use/i.test(l)) ??
    output.split('\n').pop() ??
    ''
  );
}
