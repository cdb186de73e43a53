/** Starts the Temporal CLI dev server (with its Web UI) on loopback, its state in a SQLite file under `dataDir`. */
import fs from 'node:fs';
import path from 'node:path';
import { SEARCH_ATTRIBUTES } from '../../core/search-attributes';
import { ServerHandle, spawnServer, stopStale, waitForPort } from './process';
import { ensureTool } from './tools';

export async function startTemporal(opts: {
  dataDir: string;
  port: number;
  uiPort: number;
  namespace: string;
  headless?: boolean;
  echo?: boolean;
}): Promise<ServerHandle & { address: string; binary: string }> {
  const binary = ensureTool('temporal');
  const dir = path.join(opts.dataDir, 'temporal');
  fs.mkdirSync(dir, { recursive: true });
  const pidFile = path.join(opts.dataDir, 'run', 'temporal.pid');
  await stopStale(pidFile, binary);
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--db-filename',
    path.join(dir, 'temporal.sqlite'),
    '--namespace',
    opts.namespace,
    '--log-level',
    'error'
  ];
  if (opts.headless) args.push('--headless');
  else args.push('--ui-port', String(opts.uiPort));
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) args.push('--search-attribute', `${name}=${type}`);
  const handle = spawnServer({ name: 'temporal', binary, args, pidFile, echo: opts.echo ?? true });
  await waitForPort('127.0.0.1', opts.port, 60_000, handle.child);
  if (!opts.headless) await waitForPort('127.0.0.1', opts.uiPort, 30_000, handle.child);
  return { ...handle, address: `127.0.0.1:${opts.port}`, binary };
}
