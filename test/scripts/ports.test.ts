/**
 * Ports of the embedded stack. A second start of a bench once failed with "bind: address already in use" on the
 * Temporal Web UI port: the launcher had picked it free, then the dev server, asking the OS for any free port for
 * one of its own listeners, was given the same one. Now every port the dev server takes a flag for is passed
 * explicitly, and a port picked by freePort() is not handed out again by the OS to anyone asking for any free port.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { freePort, listensOn } from '../../scripts/stack/process';
import { startTemporal } from '../../scripts/stack/temporal';

/** What the dev server (and any program) does to get "a free port": bind port 0, note the port, close. */
function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

it('never hands a port picked by freePort to a process that asks the OS for any free port', async () => {
  const picked = new Set<number>();
  for (let i = 0; i < 40; i++) picked.add(await freePort());
  const reused: number[] = [];
  for (let i = 0; i < 3000; i++) {
    const port = await anyFreePort();
    if (picked.has(port)) reused.push(port);
  }
  expect(reused).toEqual([]);
  // And the picked ports can still be listened on explicitly.
  const [first] = picked;
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(first, '127.0.0.1', () => resolve()));
  await new Promise((r) => srv.close(r));
}, 60_000);

it('starts the Temporal dev server with every port it binds set explicitly, and listening on each', async () => {
  const dataDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'ports-'));
  const temporal = await startTemporal({ dataDir, namespace: 'default', echo: false });
  try {
    const args = fs.readFileSync(`/proc/${temporal.child.pid}/cmdline`, 'utf8').split('\0');
    const flag = (name: string) => Number(args[args.indexOf(name) + 1]);
    const ports = {
      grpc: flag('--port'),
      ui: flag('--ui-port'),
      http: flag('--http-port'),
      metrics: flag('--metrics-port')
    };
    expect(Object.values(ports).every((p) => p > 0)).toBe(true);
    expect(ports.grpc).toBe(temporal.port);
    expect(ports.ui).toBe(temporal.uiPort);
    for (const [name, port] of Object.entries(ports))
      expect([name, listensOn(temporal.child.pid!, port)]).toEqual([name, true]);
  } finally {
    await temporal.stop();
  }
}, 120_000);

it('starts the dev server again when a port it was given turns out to be taken', async () => {
  const dataDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'ports-'));
  const uiPort = await freePort();
  // Someone else holds the UI port while the first start runs, and lets it go afterwards.
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(uiPort, '127.0.0.1', () => resolve()));
  const said: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    said.push(String(chunk));
    if (/starting it again/.test(String(chunk)) && holder.listening) holder.close();
    return write(chunk, ...rest);
  }) as typeof process.stderr.write;
  try {
    const temporal = await startTemporal({ dataDir, uiPort, namespace: 'default', echo: false });
    try {
      expect(said.join('')).toMatch(
        /temporal: a port was taken while it started \(.*address already in use.*\); starting it again \(attempt 2 of \d+\)/
      );
      expect(listensOn(temporal.child.pid!, uiPort)).toBe(true);
    } finally {
      await temporal.stop();
    }
  } finally {
    process.stderr.write = write;
    if (holder.listening) holder.close();
  }
}, 120_000);
