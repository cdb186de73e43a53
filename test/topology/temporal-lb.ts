/**
 * The one Temporal address the hub's processes are given (TEMPORAL_ADDRESS takes one host:port): Debian's nginx on a
 * host of its own, balancing gRPC (HTTP/2 without TLS, as the SDK speaks it) over every member's frontend. A member
 * that is gone refuses the connection (or does not answer within grpc_connect_timeout) and the call goes to the next
 * one; long polls (a minute) pass, as the timeouts are longer. This is what a load balancer in front of a managed
 * cluster's frontends does (docs/operations.md#a-real-temporal-cluster).
 */
import fs from 'node:fs';
import path from 'node:path';
import { FRONTEND_PORT } from '../../scripts/stack/temporal-cluster';
import { ServerHandle } from '../../scripts/stack/process';
import { Host, waitForHostPort } from './hosts';

export function temporalLbConfig(prefix: string, listen: string, frontends: string[]): string {
  return [
    ...(process.getuid?.() === 0 ? ['user root;'] : []),
    'worker_processes 1;',
    `pid ${path.join(prefix, 'nginx.pid')};`,
    `error_log ${path.join(prefix, 'logs', 'error.log')} warn;`,
    'events { worker_connections 4096; }',
    'http {',
    '  access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
      (t) => `  ${t}_temp_path ${path.join(prefix, 'temp', t)};`
    ),
    // A member that stops answering is left out for 5 s after one failure, then tried again.
    `  upstream temporal_frontend { ${frontends.map((f) => `server ${f} max_fails=1 fail_timeout=5s;`).join(' ')} keepalive 32; }`,
    '  server {',
    `    listen ${listen} http2;`,
    '    client_max_body_size 0;',
    '    keepalive_requests 1000000;',
    '    keepalive_timeout 600s;',
    '    grpc_connect_timeout 2s;',
    '    grpc_read_timeout 600s;',
    '    grpc_send_timeout 600s;',
    '    grpc_next_upstream error timeout;',
    '    location / { grpc_pass grpc://temporal_frontend; }',
    '  }',
    '}',
    ''
  ].join('\n');
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
  fs.writeFileSync(confFile, temporalLbConfig(prefix, address, frontends));
  const handle = host.spawn({
    name: 'temporal-lb',
    binary: nginxBin,
    args: ['-p', `${prefix}/`, '-c', confFile, '-e', path.join(prefix, 'logs', 'error.log'), '-g', 'daemon off;'],
    pidFile: path.join(prefix, 'run.pid')
  });
  await waitForHostPort(host.ip, FRONTEND_PORT, 15_000, handle);
  return { ...handle, address };
}
