/**
 * Ctrl-C on `npm start`, as a terminal sends it: SIGINT to the whole process group of npm (npm, its shell, the
 * launcher; with bash as npm's script shell the launcher gets that SIGINT twice, from the terminal and from npm).
 * One Ctrl-C while writers hammer the API stops every process in order; a second Ctrl-C while the
 * stop waits for a drain that does not come (a frozen worker) kills everything at once. Either way no server is
 * left running and no pid file is left behind.
 */
import { registerDid } from '../support/credentials';
import { eventually } from '../support/service';
import { SIGNAL_ECHO_MS } from '../../scripts/stack/supervisor';
import { findNginx } from '../../scripts/stack/nginx';
import { childPids } from '../../scripts/stack/process';
import { alive, killLeftovers, launch, Launched, recordedPids, startWriters } from './launcher';

const seen = new Set<number>();
afterEach(() => killLeftovers(seen));

async function startUnderLoad(
  scriptShell?: string
): Promise<{ stack: Launched; servers: Record<string, number>; stopWriters: () => Promise<void> }> {
  const stack = await launch('npm', {}, scriptShell);
  await stack.ready;
  const servers = recordedPids(stack.dataDir);
  Object.values(servers).forEach((p) => seen.add(p));
  // nginx serves deployment arbitration where it is installed (CI installs it).
  expect(Object.keys(servers).sort()).toEqual([
    'api',
    'ferretdb',
    ...(findNginx('/usr/sbin/nginx') ? ['nginx'] : []),
    'postgres',
    'temporal',
    'worker'
  ]);
  const did = await registerDid(stack.base, stack.adminToken, 'did:example:signals');
  const writers = startWriters(stack.base, did, 32, 'signals.load', 10);
  await eventually(
    async () => (writers.acknowledged.length >= 100 && writers.held.length >= 5 ? true : undefined),
    60_000,
    'the writers to be under way'
  );
  return { stack, servers, stopWriters: writers.stop };
}

// With bash the launcher receives the one Ctrl-C twice (see launch()): that must still be one orderly stop.
it.each(['/bin/sh', '/bin/bash'])(
  'one Ctrl-C under load stops every process in order (npm script shell %s)',
  async (shell) => {
    const { stack, servers, stopWriters } = await startUnderLoad(shell);

    process.kill(-stack.child.pid!, 'SIGINT');
    await stack.exited;
    await stopWriters();

    expect(Object.entries(servers).filter(([, pid]) => alive(pid))).toEqual([]);
    expect(recordedPids(stack.dataDir)).toEqual({});
    expect(stack.output()).toMatch(/SIGINT: stopping everything in order/);
    expect(stack.output()).toMatch(/\[stack\] stopped\n/);
    expect(stack.output()).not.toMatch(/killing every process/);
  },
  180_000
);

it('a second Ctrl-C kills every process at once when the orderly stop hangs', async () => {
  const { stack, servers, stopWriters } = await startUnderLoad();
  // nginx's workers (children of its master): killed with it, not left serving its ports.
  const nginxWorkers = servers.nginx ? childPids(servers.nginx) : [];
  nginxWorkers.forEach((p) => seen.add(p));
  if (servers.nginx) expect(nginxWorkers.length).toBeGreaterThan(0);
  // A worker that never finishes draining (frozen): the orderly stop waits for it.
  process.kill(servers.worker!, 'SIGSTOP');

  process.kill(-stack.child.pid!, 'SIGINT');
  await eventually(
    async () => (/stopping: api, worker/.test(stack.output()) ? true : undefined),
    30_000,
    'the orderly stop to begin'
  );
  // A second press, not the same one forwarded by npm.
  await new Promise((r) => setTimeout(r, SIGNAL_ECHO_MS + 500));
  expect(stack.output()).not.toMatch(/\[stack\] stopped\n/);
  process.kill(-stack.child.pid!, 'SIGINT');
  await stack.exited;
  await stopWriters();

  expect(Object.entries(servers).filter(([, pid]) => alive(pid))).toEqual([]);
  expect(nginxWorkers.filter(alive)).toEqual([]);
  expect(recordedPids(stack.dataDir)).toEqual({});
  expect(stack.output()).toMatch(/killing every process at once/);
  expect(stack.output()).toMatch(/\[stack\] killed\n/);
}, 180_000);
