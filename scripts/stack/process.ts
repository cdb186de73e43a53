/**
 * Child-server plumbing for the embedded stack: spawn with prefixed logs (and optionally a log file), a pid file per
 * server so a start after a crash can stop leftovers, waiting for a TCP port, and picking free ports that stay free.
 */
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { EX_CONFIG } from '../../core/config-check.node';
import { formatLogLine, levelOf, logFormat } from '../../core/logger.node';
import { printLine } from './progress';

export interface ServerHandle {
  name: string;
  child: ChildProcess;
  /** Resolves when the process exits, with its exit code (null when ended by a signal). */
  exited: Promise<number | null>;
  /** Resolves once it has exited and its output has been read to the end. */
  closed: Promise<void>;
  /** How it ended, for messages: "exit code 1", "killed by SIGKILL"; null while it runs. */
  exitReason(): string | null;
  /** Its last output lines (at most 200; a Go panic's stack trace can be long). */
  output(lines?: number): string;
  /** SIGTERM (the process drains; or the server's own stop signal), SIGKILL after 20 s. */
  stop(): Promise<void>;
  /** SIGKILL now, without waiting for a drain. */
  kill(): void;
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
  printLine(process.stderr, `[stack] ${message}`);
}

/**
 * Stops a leftover server recorded in `pidFile` by an earlier run that crashed, then removes the file.
 * `marker` (the binary or script path) must appear in the process's command line, since pids get reused.
 * `signal`: the server's own "stop now" (SIGTERM; PostgreSQL's is SIGINT, a fast shutdown: its SIGTERM waits for
 * every client to leave, and a leftover FerretDB stays connected), given `graceMs` (5 s; PostgreSQL's shutdown
 * checkpoint may take longer). Then SIGKILL to it and its children (PostgreSQL's backends, each a process group of
 * its own, would otherwise keep its shared memory attached), and they are waited for: a server started on the same
 * data dir while the old one is still there refuses (PostgreSQL's postmaster.pid).
 */
export async function stopStale(
  pidFile: string,
  marker: string,
  signal: NodeJS.Signals = 'SIGTERM',
  graceMs = 5000
): Promise<void> {
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
  const name = path.basename(marker);
  log(`stopping leftover ${name} (pid ${pid}) from an earlier run`);
  process.kill(pid, signal);
  for (const end = Date.now() + graceMs; Date.now() < end && isAlive(pid);) await sleep(100);
  let victims = [pid];
  if (isAlive(pid)) {
    log(`leftover ${name} (pid ${pid}) still runs after ${graceMs / 1000} s: SIGKILL to it and its children`);
    const children = killChildrenOf(pid);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone meanwhile */
    }
    victims = [...children, pid];
    for (const end = Date.now() + 5000; Date.now() < end && victims.some(isAlive);) await sleep(100);
  }
  // Exited; its parent gone, init reaps it: until then its pid still answers (PostgreSQL's own check of
  // postmaster.pid takes such a zombie for a running server), so a moment is given for that too.
  for (const end = Date.now() + 2000; Date.now() < end && victims.some(isPresent);) await sleep(50);
}

/** Whether `pid` is in the process table at all (running, or a zombie not yet reaped). */
function isPresent(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether `pid` runs: a zombie (exited, not yet reaped) does not. */
export function isAlive(pid: number): boolean {
  if (!isPresent(pid)) return false;
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return true; // no /proc: as kill(0) says
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * How the children's lines are echoed. At a terminal (the launcher's stdout; LOG_FORMAT=json keeps JSON) a child's
 * pino JSON line becomes one readable line (core/logger.node.ts), other lines are prefixed with the child's name.
 * While the stack starts, the children's info and debug lines can be held (holdStartupLines) and printed together
 * just before the ready banner (releaseStartupLines), so the banner is the last thing on the screen; warnings and
 * errors are never held, nor are the lines of the Go servers (only their warnings are logged).
 */
const echo = {
  pretty: logFormat(process.stdout) === 'pretty',
  color: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR,
  held: null as string[] | null,
  lastAt: 0
};

export function echoesPretty(): boolean {
  return echo.pretty;
}

export function holdStartupLines(): void {
  echo.held ??= [];
}

/** Prints the held lines and stops holding. */
export function releaseStartupLines(): void {
  const held = echo.held ?? [];
  echo.held = null;
  if (held.length > 0) printLine(process.stdout, held.join('\n'));
}

/** Resolves once no child has printed for `quietMs` (at most `maxMs`): stragglers land before what follows. */
export async function quietMoment(quietMs: number, maxMs: number): Promise<void> {
  for (const end = Date.now() + maxMs; Date.now() < end && Date.now() - echo.lastAt < quietMs;) await sleep(50);
}

/**
 * One line of a child as it is echoed (see `echo`). `holdable`: a line of the API or the worker, held while the stack
 * starts unless it is a warning or an error in their JSON (their other lines, e.g. the Temporal SDK's own start-up
 * messages, are held too).
 */
export function echoChildLine(name: string, line: string, holdable = false): void {
  echo.lastAt = Date.now();
  const text = (echo.pretty && formatLogLine(line, { label: name, color: echo.color })) || `[${name}] ${line}`;
  const level = echo.held && holdable ? levelOf(line) : null;
  if (echo.held && holdable && (level === null || level < 40)) echo.held.push(text);
  else printLine(process.stdout, text);
}

/** Every server this process started that has not exited yet (see killEveryServer). */
const running = new Set<ChildProcess>();

/**
 * SIGKILL to every server this process started and that still runs, at once (also one still starting, whose handle
 * its caller does not have yet). For a second Ctrl-C, and as the launcher's last act if it exits any other way.
 */
export function killEveryServer(): ChildProcess[] {
  const victims = [...running];
  for (const child of victims) killWithChildren(child);
  return victims;
}

/**
 * SIGKILL to a server and, first, to its own children: nginx's workers outlive a master killed with SIGKILL (they are
 * not told), and would keep serving its ports from a data dir that is gone.
 */
function killWithChildren(child: ChildProcess): void {
  killChildrenOf(child.pid);
  try {
    child.kill('SIGKILL');
  } catch {
    /* already gone */
  }
}

/** SIGKILL to the direct children of `pid`; answers their pids. */
function killChildrenOf(pid: number | undefined): number[] {
  const children = childPids(pid);
  for (const child of children) {
    try {
      process.kill(child, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  return children;
}

/** The direct children of `pid` (Linux: /proc/<pid>/task/<pid>/children; none where that is missing). */
export function childPids(pid: number | undefined): number[] {
  if (!pid) return [];
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

export function spawnServer(opts: {
  name: string;
  binary: string;
  args: string[];
  pidFile: string;
  /** Print the server's own output (warnings and errors only, by its log level). */
  echo: boolean;
  /** Its echoed lines may be held while the stack starts (holdStartupLines): the API's and the worker's. */
  holdAtStart?: boolean;
  /** Also append the server's output, each line prefixed with its name, to this file. */
  logFile?: string;
  env?: NodeJS.ProcessEnv;
  /** Run as this user (a server that refuses to run as root, started by a root launcher). */
  user?: { uid: number; gid: number };
  /** The signal `stop` sends (SIGTERM; see stopStale for PostgreSQL's). */
  stopSignal?: NodeJS.Signals;
}): ServerHandle {
  // Own process group: a terminal's Ctrl-C reaches only the launcher, which stops the children in order.
  const child = spawn(opts.binary, opts.args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: opts.env ?? process.env,
    ...(opts.user ?? {})
  });
  fs.mkdirSync(path.dirname(opts.pidFile), { recursive: true });
  if (child.pid) fs.writeFileSync(opts.pidFile, String(child.pid));
  running.add(child);
  const tail: string[] = [];
  const logFd = opts.logFile ? fs.openSync(opts.logFile, 'a') : null;
  const onLine = (line: string) => {
    if (!line.trim()) return;
    tail.push(line);
    if (tail.length > 200) tail.shift();
    if (opts.echo) echoChildLine(opts.name, line, opts.holdAtStart);
    if (logFd !== null) fs.writeSync(logFd, `[${opts.name}] ${line}\n`);
  };
  for (const stream of [child.stdout, child.stderr]) {
    // Whole lines only: a chunk can end in the middle of one.
    let partial = '';
    stream?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      lines.forEach(onLine);
    });
    stream?.on('end', () => {
      if (partial) onLine(partial);
      partial = '';
    });
  }
  let exited = false;
  let reason: string | null = null;
  let stopping = false;
  const exitPromise = new Promise<number | null>((resolve) =>
    child.on('exit', (code, signal) => {
      exited = true;
      running.delete(child);
      reason = signal ? `killed by ${signal}` : `exit code ${code}`;
      // Only our own pid: a restarted server may have written its pid there already.
      if (fs.existsSync(opts.pidFile) && fs.readFileSync(opts.pidFile, 'utf8').trim() === String(child.pid))
        fs.rmSync(opts.pidFile, { force: true });
      // Exit code 78 (invalid configuration): its one message has been echoed already; nothing to add.
      if (!stopping && code !== 0 && code !== EX_CONFIG) {
        log(`${opts.name} exited (${reason}); its last lines:\n${tail.slice(-30).join('\n')}`);
      }
      // The streams may still hold the last lines; close the log once they are written.
      if (logFd !== null) child.once('close', () => fs.closeSync(logFd));
      resolve(code);
    })
  );
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return {
    name: opts.name,
    child,
    exited: exitPromise,
    closed,
    exitReason: () => reason,
    output: (lines = 200) => tail.slice(-lines).join('\n'),
    stop: async () => {
      if (exited) return;
      stopping = true;
      child.kill(opts.stopSignal ?? 'SIGTERM');
      const killer = setTimeout(() => killWithChildren(child), 20_000);
      await exitPromise;
      clearTimeout(killer);
    },
    kill: () => {
      if (exited) return;
      stopping = true;
      killWithChildren(child);
    }
  };
}

/**
 * Resolves once host:port accepts TCP connections; rejects after `timeoutMs` or if `child` exits. With `child`, the
 * listening socket must be the child's own (read from /proc on Linux): a port taken by another process answers too,
 * while the child fails to bind it.
 */
export async function waitForPort(host: string, port: number, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child && (child.exitCode !== null || child.signalCode !== null)) {
      throw new Error(`server exited (${child.signalCode ?? `code ${child.exitCode}`}) before listening on ${port}`);
    }
    if ((await canConnect(host, port)) && (!child?.pid || listensOn(child.pid, port) !== false)) return;
    await sleep(100);
  }
  throw new Error(`nothing listened on ${host}:${port} within ${timeoutMs} ms`);
}

/** Whether process `pid` holds a socket listening on TCP `port`; undefined where /proc cannot tell. */
export function listensOn(pid: number, port: number): boolean | undefined {
  let inodes: Set<string>;
  try {
    inodes = new Set<string>();
    for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
      if (!fs.existsSync(file)) continue;
      for (const row of fs.readFileSync(file, 'utf8').split('\n').slice(1)) {
        // sl local_address rem_address st ... inode: "0: 0100007F:1F90 00000000:0000 0A ... 12345 ..."
        const cols = row.trim().split(/\s+/);
        if (cols.length < 10 || cols[3] !== '0A') continue;
        if (parseInt(cols[1]!.split(':').pop()!, 16) === port) inodes.add(cols[9]!);
      }
    }
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      let target = '';
      try {
        target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1]!)) return true;
    }
    return false;
  } catch {
    return undefined;
  }
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

/**
 * A loopback port nobody listens on, that the OS will not hand out again for about a minute.
 * Picking a port by listening on port 0 and closing is not enough: Linux may give the same port to the next
 * process that asks for any free port, e.g. the Temporal dev server, which takes several of its own (internal
 * services, HTTP, metrics) after we picked ours, and then one of us fails with "address already in use". So, as
 * the dev server does for its own ports, one connection is made to the port and closed from the listening side
 * first: that connection's TIME_WAIT keeps the port out of the OS's free pool (for bind to port 0) for about 60 s,
 * while an explicit bind to it still works (Node and Go servers set SO_REUSEADDR).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      const done = () => srv.close(() => resolve(port));
      srv.once('connection', (accepted) => {
        // Our side closes first, so the TIME_WAIT is on this port.
        accepted.on('error', () => undefined);
        accepted.end();
        client.once('close', done);
      });
      const client = net.connect({ host: '127.0.0.1', port });
      client.on('error', done);
      // The peer's FIN arrives; answering it completes the close.
      client.on('end', () => client.end());
    });
  });
}

/** True when a server's output says one of its ports was taken (then starting it again may work). */
export function isBindFailure(output: string): boolean {
  return /address already in use/i.test(output);
}
