/**
 * Starts Debian's nginx as a child process serving the deploy targets (docs/deploy.md#how-it-runs), with its
 * prefix, config, logs, temp files and pid under DATA_DIR/deploy/nginx, so it never touches a system nginx. The
 * config is written at every start (core/deploy/web.ts). `daemon off`: the master stays our child, so the
 * supervisor restarts it and Ctrl-C stops it with the rest; `nginx -s reload` with the same flags reloads it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { deployLayout, nginxFlags, nginxListen, renderNginxConf } from '../../core/deploy/web';
import { freePort, isBindFailure, log, ServerHandle, spawnServer, stopStale, waitForPort } from './process';

export const NGINX_INSTALL_HINT = 'apt-get install -y nginx (Debian/Ubuntu; nginx-light also works)';

/** The nginx binary to use, or null when it is not installed. */
export function findNginx(configured: string): string | null {
  try {
    fs.accessSync(configured, fs.constants.X_OK);
    return configured;
  } catch {
    return null;
  }
}

export function writeNginxConf(opts: { dataDir: string; host: string; port: number }): void {
  const l = deployLayout(opts.dataDir);
  for (const dir of [
    l.nginxPrefix,
    path.join(l.nginxPrefix, 'logs'),
    path.join(l.nginxPrefix, 'temp'),
    l.confD,
    l.targets
  ])
    fs.mkdirSync(dir, { recursive: true });
  // The listen line every stored fragment's server block includes (the fragments in conf.d are kept across starts).
  fs.writeFileSync(l.listenConf, `listen ${nginxListen(opts.host, opts.port)};\n`);
  fs.writeFileSync(l.nginxConf, renderNginxConf({ ...opts, runAsRoot: process.getuid?.() === 0 }));
}

export async function startNginx(opts: {
  dataDir: string;
  binary: string;
  host: string;
  /** 0 or absent: a free port. */
  port?: number;
  echo?: boolean;
  logFile?: string;
}): Promise<ServerHandle & { port: number; url: string }> {
  const l = deployLayout(opts.dataDir);
  const pidFile = path.join(opts.dataDir, 'run', 'nginx.pid');
  // The marker is this data dir's config path: only our own leftover matches, never another nginx.
  await stopStale(pidFile, l.nginxConf);
  for (let attempt = 1; ; attempt++) {
    const port = opts.port || (await freePort());
    writeNginxConf({ dataDir: opts.dataDir, host: opts.host, port });
    const handle = spawnServer({
      name: 'nginx',
      binary: opts.binary,
      args: [...nginxFlags(opts.dataDir), '-g', 'daemon off;'],
      pidFile,
      echo: opts.echo ?? true,
      logFile: opts.logFile
    });
    const probeHost = opts.host === '0.0.0.0' || opts.host === '::' ? '127.0.0.1' : opts.host;
    try {
      await waitForPort(probeHost, port, 15_000, handle.child);
      return { ...handle, port, url: `http://${probeHost}:${port}` };
    } catch (err) {
      await handle.stop();
      await handle.closed;
      const output = handle.output() + readTail(l.nginxErrorLog);
      if (opts.port || !(isBindFailure(output) || /Address already in use/.test(output)) || attempt >= 3) {
        throw new Error(
          `nginx did not start: ${err instanceof Error ? err.message : String(err)}\n${output.slice(-2000)}`
        );
      }
      log(`nginx: port ${port} was taken; starting it again (attempt ${attempt + 1})`);
    }
  }
}

function readTail(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').slice(-2000);
  } catch {
    return '';
  }
}
