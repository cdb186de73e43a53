/**
 * Test hosts on one machine: each host a Linux network namespace (`ip netns`) with one veth link to a bridge in the
 * root namespace and an address of its own on 10.149.0.0/24 (the bridge, and so the test process, is 10.149.0.1).
 * Every process of a host runs inside its namespace (`ip netns exec`, which execs the command: the pid we hold is the
 * process itself, so SIGKILL and SIGSTOP reach it). A host can be cut off from every other (its link down) or from one
 * other host (a blackhole route on each side), and healed. Needs root (CI is) and iproute2; no iptables or nftables.
 *
 * Everything is named with PREFIX (`zh49-`, the bridge `zh49br`), so another run's namespaces are never touched, and
 * a topology removes everything it made: each namespace's processes (`ip netns pids`, SIGKILL), the namespaces
 * (with their veth pairs) and the bridge. `removeLeftovers` does the same for a run that crashed before its teardown,
 * and `createTopology` calls it first.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { canConnect, ServerHandle, sleep, spawnServer } from '../../scripts/stack/process';

export const PREFIX = 'zh49-';
const BRIDGE = 'zh49br';
const SUBNET = '10.149.0';
export const BRIDGE_IP = `${SUBNET}.1`;

export interface Host {
  name: string;
  /** Its network namespace. */
  ns: string;
  /** Its address on the bridge. */
  ip: string;
  /** The root-side end of its veth pair (a bridge port). */
  link: string;
  /** A process inside the host, as spawnServer runs one (echo off unless ZH_TEST_ECHO=1). */
  spawn(opts: {
    name: string;
    binary: string;
    args: string[];
    pidFile: string;
    env?: NodeJS.ProcessEnv;
    logFile?: string;
  }): ServerHandle;
  /** Runs a command inside the host and waits for it; throws on a non-zero exit. */
  run(binary: string, args: string[]): string;
  /** The processes running inside the host whose command line contains `match` (e.g. a server's binary name). */
  pids(match: string): number[];
}

export interface Topology {
  hosts: Record<string, Host>;
  /** Cuts `host` off from every other host and from the test process (its link down). */
  isolate(host: string): void;
  /** Cuts the traffic between two hosts only (a blackhole route on each side). */
  cut(a: string, b: string): void;
  /** Undoes every cut of `host` (its link up, its blackhole routes gone). */
  heal(host: string): void;
  /** SIGKILL to every process of every host, then the namespaces and the bridge removed. */
  teardown(): Promise<void>;
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Why these hosts cannot be made here, or null where they can. */
export function cannotMakeHosts(): string | null {
  if (!isRoot()) return 'network namespaces need root (CI runs as root)';
  const ip = spawnSync('ip', ['-V'], { encoding: 'utf8' });
  if (ip.status !== 0) return 'iproute2 (`ip`) is not installed: apt-get install -y iproute2';
  return null;
}

function ip(args: string[], tolerate = false): string {
  const res = spawnSync('ip', args, { encoding: 'utf8' });
  if (res.status !== 0 && !tolerate)
    throw new Error(`ip ${args.join(' ')} failed: ${(res.stderr || res.stdout || String(res.error)).trim()}`);
  return res.stdout ?? '';
}

/** Our namespaces left by an earlier run (PREFIX), their processes killed, and our bridge, removed. */
export async function removeLeftovers(): Promise<string[]> {
  const names = ip(['netns', 'list'], true)
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((n) => n.startsWith(PREFIX));
  for (const ns of names) await removeNamespace(ns);
  removeLinks();
  return names;
}

/**
 * Our bridge, and the root-side ends of our veth pairs: a namespace that is deleted while something still refers to it
 * (the kernel frees it later) keeps its pair, whose name the next run needs. Deleting one end deletes both.
 */
function removeLinks(): void {
  for (const line of ip(['-o', 'link', 'show'], true).split('\n')) {
    const name = /^\d+: ([^:@]+)[:@]/.exec(line)?.[1];
    if (name && (name === BRIDGE || /^zh49v\d+$/.test(name))) ip(['link', 'del', name], true);
  }
}

async function removeNamespace(ns: string): Promise<void> {
  // Every process inside, whoever started it (a process of a crashed run has no parent of ours any more).
  for (let round = 0; round < 50; round++) {
    const pids = ip(['netns', 'pids', ns], true).split(/\s+/).filter(Boolean).map(Number);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone meanwhile */
      }
    }
    await sleep(100);
  }
  ip(['netns', 'del', ns], true);
}

/** Makes the hosts (in order, addresses .2, .3, …), after removing any leftovers of an earlier run. */
export async function createTopology(names: string[]): Promise<Topology> {
  const refused = cannotMakeHosts();
  if (refused) throw new Error(refused);
  await removeLeftovers();
  ip(['link', 'add', BRIDGE, 'type', 'bridge']);
  ip(['addr', 'add', `${BRIDGE_IP}/24`, 'dev', BRIDGE]);
  ip(['link', 'set', BRIDGE, 'up']);
  const hosts: Record<string, Host> = {};
  // Killed quietly at teardown (a process killed by its own handle does not report its last lines as a crash).
  const spawned: ServerHandle[] = [];
  const blackholes = new Map<string, Set<string>>();
  const topology: Topology = {
    hosts,
    isolate: (name) => ip(['link', 'set', host(name).link, 'down']),
    cut: (a, b) => {
      for (const [from, to] of [
        [a, b],
        [b, a]
      ] as const) {
        host(from).run('ip', ['route', 'replace', 'blackhole', `${host(to).ip}/32`]);
        (blackholes.get(from) ?? blackholes.set(from, new Set()).get(from)!).add(to);
      }
    },
    heal: (name) => {
      ip(['link', 'set', host(name).link, 'up']);
      for (const [from, tos] of blackholes) {
        for (const to of [...tos]) {
          if (from !== name && to !== name) continue;
          host(from).run('ip', ['route', 'del', 'blackhole', `${host(to).ip}/32`]);
          tos.delete(to);
        }
      }
    },
    // Every namespace of ours, also one made before its host was complete (a step failed).
    teardown: async () => {
      for (const handle of spawned) handle.kill();
      await removeLeftovers();
    }
  };
  const host = (name: string) => {
    const h = hosts[name];
    if (!h) throw new Error(`no host ${name}`);
    return h;
  };
  try {
    names.forEach((name, i) => {
      const ns = `${PREFIX}${name}`;
      const link = `zh49v${i}`;
      const address = `${SUBNET}.${i + 2}`;
      ip(['netns', 'add', ns]);
      ip(['link', 'add', link, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      ip(['link', 'set', link, 'master', BRIDGE]);
      ip(['link', 'set', link, 'up']);
      ip(['-n', ns, 'link', 'set', 'lo', 'up']);
      ip(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
      ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
      hosts[name] = {
        name,
        ns,
        ip: address,
        link,
        spawn: (opts) => {
          const handle = spawnServer({
            name: opts.name,
            binary: 'ip',
            args: ['netns', 'exec', ns, opts.binary, ...opts.args],
            pidFile: opts.pidFile,
            echo: process.env.ZH_TEST_ECHO === '1',
            env: opts.env,
            logFile: opts.logFile
          });
          spawned.push(handle);
          return handle;
        },
        run: (binary, args) => ip(['netns', 'exec', ns, binary, ...args]),
        pids: (match) =>
          ip(['netns', 'pids', ns], true)
            .split(/\s+/)
            .filter(Boolean)
            .map(Number)
            .filter((pid) => {
              try {
                return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(match);
              } catch {
                return false;
              }
            })
      };
    });
  } catch (err) {
    await topology.teardown();
    throw err;
  }
  return topology;
}

/**
 * Resolves once host:port accepts connections from the test process (through the bridge); rejects after `timeoutMs`
 * or when `handle` exits. (scripts/stack/process.ts's waitForPort reads the listening sockets from this process's
 * /proc/net, which shows the root namespace's, not the host's.)
 */
export async function waitForHostPort(
  address: string,
  port: number,
  timeoutMs: number,
  handle?: ServerHandle
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const reason = handle?.exitReason();
    if (reason)
      throw new Error(
        `${handle!.name} exited (${reason}) before listening on ${address}:${port}\n${handle!.output(30)}`
      );
    if (await canConnect(address, port)) return;
    await sleep(200);
  }
  throw new Error(`nothing listened on ${address}:${port} within ${timeoutMs} ms`);
}
