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
import { nginxArgs, NginxConf } from '../support/nginx-conf';
import { Host, waitForHostPort } from './hosts';

const CONF = path.resolve(__dirname, '..', '..', 'docker', 'temporal-lb.conf');

/** docker/temporal-lb.conf for `frontends` (host:port each, as many as the file names members), listening on `listen`. */
export function renderTemporalLb(prefix: string, listen: string, frontends: string[]): string {
  const conf = new NginxConf(CONF);
  conf.replace(/server temporal-(\d+):7233/, (n) => {
    const frontend = frontends[Number(n) - 1];
    if (!frontend) throw new Error(`no frontend for temporal-${n}`);
    return `server ${frontend}`;
  });
  conf.replace(/listen 7233 /, () => `listen ${listen} `);
  conf.runUnder(prefix);
  if (/temporal-\d+:/.test(conf.uncommented()))
    throw new Error('docker/temporal-lb.conf names more members than the frontends given');
  return conf.text;
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
    args: nginxArgs(prefix, confFile),
    pidFile: path.join(prefix, 'run.pid')
  });
  await waitForHostPort(host.ip, FRONTEND_PORT, 15_000, handle);
  return { ...handle, address };
}
