/**
 * The production load balancer (docker/nginx-lb.conf, compose service `lb`) on this machine: the same file, with
 * only what Docker provides replaced, run by Debian's nginx as a child process under a test data dir.
 *   - `resolver 127.0.0.11 …` (Docker's DNS) is dropped, and each `server api:<port> resolve;` (every replica's
 *     address for the service name) becomes one `server 127.0.0.1:<port>;` per replica given;
 *   - each `listen <port>;` becomes `listen 127.0.0.1:<free port>;`;
 *   - pid, logs and temp files go under the data dir (and `user root;` when run as root, as the deploy nginx does),
 *     and one worker process instead of `auto` (the test machine's cores are the suite's);
 *   - the balancer connects to the replicas from 127.0.0.2 (`proxy_bind`), an address of its own as a container's
 *     is, so the replicas can tell it from clients on 127.0.0.1 (TRUSTED_PROXIES).
 * Everything else (proxy headers, keep-alive upstreams, unbuffered answers, the 404 for /internal/) is the file's.
 * A change to the file that these replacements no longer fit fails the render, so the test cannot drift from it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { freePort, ServerHandle, spawnServer, waitForPort } from '../../scripts/stack/process';
import { nginxArgs, NginxConf } from './nginx-conf';

const CONF = path.resolve(__dirname, '..', '..', 'docker', 'nginx-lb.conf');

export interface LoadBalancer {
  /** The balancer's address per replica port of the file (8080 main, 8081 backup, 9001 hub, 9099 commercial). */
  urls: Record<number, string>;
  stop(): Promise<void>;
}

/** The address the balancer connects to the replicas from. */
export const LB_ADDRESS = '127.0.0.2';

/** `replicas`: per replica, its address for each port the file balances (e.g. { 8080: 'http://127.0.0.1:41234' }). */
export async function startLoadBalancer(
  nginxBin: string,
  dataDir: string,
  replicas: Record<number, string>[]
): Promise<LoadBalancer> {
  for (let attempt = 1; ; attempt++) {
    const { conf, urls } = await render(dataDir, replicas);
    const prefix = path.join(dataDir, 'lb');
    const confFile = path.join(prefix, 'nginx.conf');
    fs.writeFileSync(confFile, conf);
    const handle: ServerHandle = spawnServer({
      name: 'lb',
      binary: nginxBin,
      args: nginxArgs(prefix, confFile),
      pidFile: path.join(dataDir, 'run', 'lb.pid'),
      echo: process.env.ZH_TEST_ECHO === '1'
    });
    try {
      for (const url of Object.values(urls))
        await waitForPort('127.0.0.1', Number(new URL(url).port), 15_000, handle.child);
      return { urls, stop: () => handle.stop() };
    } catch (err) {
      await handle.stop();
      // (A port picked free was taken meanwhile: new ones.)
      if (attempt >= 3)
        throw new Error(
          `the load balancer did not start: ${err instanceof Error ? err.message : String(err)}\n${handle.output().slice(-2000)}`
        );
    }
  }
}

/** docker/nginx-lb.conf with the replacements above, and the balancer's address per port. */
async function render(
  dataDir: string,
  replicas: Record<number, string>[]
): Promise<{ conf: string; urls: Record<number, string> }> {
  const prefix = path.join(dataDir, 'lb');
  for (const dir of ['logs', 'temp']) fs.mkdirSync(path.join(prefix, dir), { recursive: true });
  const conf = new NginxConf(CONF);
  conf.replace(/^\s*resolver [^;]*;\n/m, () => '');
  conf.replace(/server api:(\d+) resolve;/, (port) =>
    replicas
      .map((r) => {
        const url = r[Number(port)];
        if (!url) throw new Error(`no replica address for port ${port}`);
        return `server ${new URL(url).host};`;
      })
      .join(' ')
  );
  const urls: Record<number, string> = {};
  const listens: number[] = [];
  for (const m of conf.text.matchAll(/listen (\d+);/g)) listens.push(Number(m[1]));
  for (const port of listens) urls[port] = `http://127.0.0.1:${await freePort()}`;
  conf.replace(/listen (\d+);/, (port) => `listen ${new URL(urls[Number(port)]!).host};`);
  conf.runUnder(prefix, [`proxy_bind ${LB_ADDRESS};`]);
  // Nothing of Docker's left: every listen and upstream server was replaced.
  for (const left of [/listen (?!127\.0\.0\.1:)/, /\bapi:\d/, /\bresolve\b/, /\bresolver\b/]) {
    if (left.test(conf.uncommented()))
      throw new Error(`docker/nginx-lb.conf: ${left} is left after the replacements; update test/support/nginx-lb.ts`);
  }
  return { conf: conf.text, urls };
}
