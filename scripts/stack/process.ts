/**
 * Child-server plumbing for the embedded stack: spawn with prefixed logs, a pid file per server so a start after
 * a crash can stop leftovers, and waiting for a TCP port.
 */
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface ServerHandle {
  name: string;
  child: ChildProcess;
  /** Resolves when the process exits, with its exit code (null when ended by a signal). */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/**
 * How to run a TypeScript entry point: node itself with tsx as its loader. Not the tsx command: it runs the script
 * in a second process and relays signals to it, and when the script is slow to acknowledge a signal (a loaded
 * machine) it kills it with SIGKILL, so a SIGTERM could end the API or worker without its drain.
 */
export function typescriptProcess(script: string): { binary: string; args: string[] } {
  return { binary: process.execPath, args: ['--import', pathToFileURL(require.resolve('tsx')).href, script] };
}

export function log(message: string): void {
  process.stderr.write(`[stack] ${message}\n`);
}

/**
 * Stops a leftover server recorded in `pidFile` by an earlier run that crashed, then removes the file.
 * `marker` (the binary or script path) must appear in the process's command line, since pids get reused.
 */
export async function stopStale(pidFile: string, marker: string): Promise<void> {
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
  fs.rmSync(pidFile, { force: true });
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  let cmdline = '';
  try {
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return;
  }
  if (!cmdline.includes(marker)) return;
  log(`stopping leftover ${path.basename(marker)} (pid ${pid}) from an earlier run`);
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 50 && isAlive(pid); i++) await sleep(100);
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function spawnServer(opts: {
  name: string;
  binary: string;
  args: string[];
  pidFile: string;
  /** Print the server's own output (warnings and errors only, by its log level). */
  echo: boolean;
  env?: NodeJS.ProcessEnv;
}): ServerHandle {
  // Own process group: a terminal's Ctrl-C reaches only the launcher, which stops the children in order.
  const child = spawn(opts.binary, opts.args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: opts.env ?? process.env });
  fs.mkdirSync(path.dirname(opts.pidFile), { recursive: true });
  if (child.pid) fs.writeFileSync(opts.pidFile, String(child.pid));
  const tail: string[] = [];
  const onData = (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) {
      if (!line.trim()) continue;
      tail.push(line);
      if (tail.length > 30) tail.shift();
      if (opts.echo) process.stdout.write(`[${opts.name}] ${line}\n`);
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  let exited = false;
  let stopping = false;
  const exitPromise = new Promise<number | null>((resolve) =>
    child.on('exit', (code, signal) => {
      exited = true;
      fs.rmSync(opts.pidFile, { force: true });
      if (!stopping && code !== 0) {
        log(`${opts.name} exited (code ${code}, signal ${signal}); its last lines:\n${tail.join('\n')}`);
      }
      resolve(code);
    })
  );
  return {
    name: opts.name,
    child,
    exited: exitPromise,
    stop: async () => {
      if (exited) return;
      stopping = true;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exitPromise;
      clearTimeout(killer);
    }
  };
}

/** Resolves once something accepts TCP connections on host:port; rejects after `timeoutMs` or if `child` exits. */
export async function waitForPort(host: string, port: number, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`server exited with code ${child.exitCode} before listening on ${port}`);
    if (await canConnect(host, port)) return;
    await sleep(100);
  }
  throw new Error(`nothing listened on ${host}:${port} within ${timeoutMs} ms`);
}

export function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A port nobody listens on right now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}
