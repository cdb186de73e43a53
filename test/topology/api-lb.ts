/**
 * The production load balancer in front of the API replicas (docker/nginx-lb.conf, compose service `lb`) on a test
 * host, run by Debian's nginx. As test/support/nginx-lb.ts does on loopback, only what Docker provides is replaced:
 * `resolver 127.0.0.11 …` (Docker's DNS) is dropped, each `server api:<port> resolve;` becomes one `server
 * <replica host>:<port>;` per API host given, each `listen <port>;` becomes `listen <this host's address>:<port>;`,
 * and pid, logs and temp files go under the data dir (`user root;` when run as root, one worker process). The hosts
 * have addresses of their own, so the replicas tell the balancer from clients by its address (TRUSTED_PROXIES) with
 * no `proxy_bind`. Everything else (timeouts, keep-alive upstreams, unbuffered answers, the 404 for /internal/) is
 * the file's. A change to the file that these replacements no longer fit fails the render.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ServerHandle } from '../../scripts/stack/process';
import { nginxArgs, NginxConf } from '../support/nginx-conf';
import { Host, waitForHostPort } from './hosts';

const CONF = path.resolve(__dirname, '..', '..', 'docker', 'nginx-lb.conf');

/** docker/nginx-lb.conf for API replicas at `replicas` (addresses; each serves every port the file balances). */
export function renderApiLb(prefix: string, listen: string, replicas: string[]): { conf: string; ports: number[] } {
  const conf = new NginxConf(CONF);
  conf.replace(/^\s*resolver [^;]*;\n/m, () => '');
  conf.replace(/server api:(\d+) resolve;/, (port) => replicas.map((r) => `server ${r}:${port};`).join(' '));
  const ports = [...conf.text.matchAll(/listen (\d+);/g)].map((m) => Number(m[1]));
  conf.replace(/listen (\d+);/, (port) => `listen ${listen}:${port};`);
  conf.runUnder(prefix);
  for (const left of [/\bapi:\d/, /\bresolve\b/, /\bresolver\b/]) {
    if (left.test(conf.uncommented()))
      throw new Error(`docker/nginx-lb.conf: ${left} is left after the replacements; update test/topology/api-lb.ts`);
  }
  return { conf: conf.text, ports };
}

/** The balancer on `host` in front of `replicas`; answers its main listener's URL (the file's port 8080). */
export async function startApiLb(
  nginxBin: string,
  host: Host,
  dataDir: string,
  replicas: string[]
): Promise<ServerHandle & { url: string }> {
  const prefix = path.join(dataDir, 'lb');
  for (const dir of ['logs', 'temp']) fs.mkdirSync(path.join(prefix, dir), { recursive: true });
  const { conf, ports } = renderApiLb(prefix, host.ip, replicas);
  const confFile = path.join(prefix, 'nginx.conf');
  fs.writeFileSync(confFile, conf);
  const handle = host.spawn({
    name: 'lb',
    binary: nginxBin,
    args: nginxArgs(prefix, confFile),
    pidFile: path.join(prefix, 'run.pid')
  });
  for (const port of ports) await waitForHostPort(host.ip, port, 15_000, handle);
  return { ...handle, url: `http://${host.ip}:8080` };
}
