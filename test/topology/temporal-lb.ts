/**
 * The one Temporal address the hub's processes are given (TEMPORAL_ADDRESS takes one host:port): docker/temporal-lb.conf
 * (compose service temporal-lb), nginx balancing gRPC over every member's frontend, run by Debian's nginx on a test
 * host. Only what Docker provides is replaced: the members' names (`server temporal-N:7233`) by the frontends given,
 * `listen 7233` by the host's address, and pid, logs and temp files go under the data dir (`user root;` when run as
 * root). A change to the file that these replacements no longer fit fails the render, so the test cannot drift from
 * it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ServerHandle } from '../../scripts/stack/process';
import { FRONTEND_PORT } from '../../scripts/stack/temporal-cluster';
import { Host, waitForHostPort } from './hosts';

const CONF = path.resolve(__dirname, '..', '..', 'docker', 'temporal-lb.conf');

/** docker/temporal-lb.conf for `frontends` (host:port each, as many as the file names members), listening on `listen`. */
export function renderTemporalLb(prefix: string, listen: string, frontends: string[]): string {
  let conf = fs.readFileSync(CONF, 'utf8');
  const replace = (pattern: RegExp, by: (...groups: string[]) => string) => {
    if (!pattern.test(conf)) throw new Error(`docker/temporal-lb.conf no longer matches ${pattern}`);
    conf = conf.replace(new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`), (_m, ...groups: string[]) =>
      by(...groups)
    );
  };
  replace(/server temporal-(\d+):7233/, (n) => {
    const frontend = frontends[Number(n) - 1];
    if (!frontend) throw new Error(`no frontend for temporal-${n}`);
    return `server ${frontend}`;
  });
  replace(/listen 7233 /, () => `listen ${listen} `);
  replace(/^worker_processes [^;]*;/m, () =>
    [
      ...(process.getuid?.() === 0 ? ['user root;'] : []),
      'worker_processes 1;',
      `pid ${path.join(prefix, 'nginx.pid')};`,
      `error_log ${path.join(prefix, 'logs', 'error.log')} warn;`
    ].join('\n')
  );
  replace(/^http \{\n/m, () =>
    [
      'http {',
      '  access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
        (t) => `  ${t}_temp_path ${path.join(prefix, 'temp', t)};`
      ),
      ''
    ].join('\n')
  );
  if (/temporal-\d+:/.test(conf.replace(/#.*$/gm, '')))
    throw new Error('docker/temporal-lb.conf names more members than the frontends given');
  return conf;
}

export async function startTemporalLb(
  nginxBin: string,
  host: Host,
  dataDir: string,
  frontends: string[]
): Promise<ServerHandle & { address: string }> {
  const prefix = path.join(dataDir, 'temporal-lb');
  for (const dir of ['logs', 'temp']) fs.mkdirSync(path.join(prefix, dir), { recursive: true });
  const address = `${host.ip}:${FRONTEND_PORT}`;
  const confFile = path.join(prefix, 'nginx.conf');
  fs.writeFileSync(confFile, renderTemporalLb(prefix, address, frontends));
  const handle = host.spawn({
    name: 'temporal-lb',
    binary: nginxBin,
    args: ['-p', `${prefix}/`, '-c', confFile, '-e', path.join(prefix, 'logs', 'error.log'), '-g', 'daemon off;'],
    pidFile: path.join(prefix, 'run.pid')
  });
  await waitForHostPort(host.ip, FRONTEND_PORT, 15_000, handle);
  return { ...handle, address };
}
