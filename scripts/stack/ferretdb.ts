/** Starts FerretDB (MongoDB wire protocol on SQLite) on loopback, with its data under `dataDir`. */
import fs from 'node:fs';
import path from 'node:path';
import { ServerHandle, spawnServer, stopStale, waitForPort } from './process';
import { ensureTool } from './tools';

export async function startFerretDb(opts: { dataDir: string; port: number; echo?: boolean }): Promise<ServerHandle & { uri: string }> {
  const binary = ensureTool('ferretdb');
  const dir = path.join(opts.dataDir, 'ferretdb');
  fs.mkdirSync(dir, { recursive: true });
  const pidFile = path.join(opts.dataDir, 'run', 'ferretdb.pid');
  await stopStale(pidFile, binary);
  const handle = spawnServer({
    name: 'ferretdb',
    binary,
    pidFile,
    echo: opts.echo ?? true,
    args: [
      '--handler=sqlite',
      `--sqlite-url=file:${dir}/`,
      `--listen-addr=127.0.0.1:${opts.port}`,
      `--state-dir=${dir}`,
      '--telemetry=disable',
      '--debug-addr=-',
      '--log-level=error'
    ]
  });
  await waitForPort('127.0.0.1', opts.port, 30_000, handle.child);
  return { ...handle, uri: `mongodb://127.0.0.1:${opts.port}/` };
}
