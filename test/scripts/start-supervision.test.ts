/**
 * The launcher supervises its processes: `kill -9` of the worker and then of the API, while writers hammer the
 * truth ledger (each write retried with its Idempotency-Key until acknowledged) and high-risk writes wait for
 * approval. Each dead process is restarted, with the reason in the log; afterwards no acknowledged write is lost, no
 * seq appears twice, /api/verify is consistent, every acknowledged write reads back by its key and from the memory
 * gateway (both through the key tree, whose indexer the API kill interrupts), and the approvals are still pending
 * and can be decided. A process that keeps dying makes the launcher give up and stop everything, saying so.
 */
import { issueHomologousToken, registerDid } from '../support/credentials';
import { eventually, http } from '../support/service';
import { RESTART_POLICY } from '../../scripts/stack/supervisor';
import { alive, killLeftovers, launch, recordedPids, readLedger, startWriters } from './launcher';

const seen = new Set<number>();
afterEach(() => killLeftovers(seen));

/** Waits for the launcher to record a new pid for `name` (a restart) and returns it. */
async function restartedPid(dataDir: string, name: string, old: number): Promise<number> {
  const pid = await eventually(
    async () => {
      const now = recordedPids(dataDir)[name];
      return now && now !== old && alive(now) ? now : undefined;
    },
    60_000,
    `${name} to be restarted`
  );
  seen.add(pid);
  return pid;
}

it('restarts a killed worker and API; acknowledged writes, seqs, the ledger root and pending approvals survive', async () => {
  const stack = await launch('node');
  await stack.ready;
  const first = recordedPids(stack.dataDir);
  Object.values(first).forEach((p) => seen.add(p));
  const did = await registerDid(stack.base, stack.adminToken, 'did:example:supervised');
  const approver = await issueHomologousToken(stack.base, stack.adminToken);
  const writers = startWriters(stack.base, did, 16, 'supervised.load', 20);
  const progress = (acks: number, held: number) =>
    eventually(
      async () => (writers.acknowledged.length >= acks && writers.held.length >= held ? true : undefined),
      90_000,
      `${acks} acknowledged writes`
    );
  await progress(60, 2);

  process.kill(first.worker!, 'SIGKILL');
  const worker = await restartedPid(stack.dataDir, 'worker', first.worker!);
  expect(stack.output()).toMatch(
    /worker died \(killed by SIGKILL: kill -9 or the out-of-memory killer\); restarting it in [\d.]+ s/
  );
  await progress(writers.acknowledged.length + 60, writers.held.length + 1);

  process.kill(first.api!, 'SIGKILL');
  await restartedPid(stack.dataDir, 'api', first.api!);
  expect(stack.output()).toMatch(
    /api died \(killed by SIGKILL: kill -9 or the out-of-memory killer\); restarting it in [\d.]+ s/
  );
  // Writes go on through the restarted API.
  await progress(writers.acknowledged.length + 60, writers.held.length + 1);
  await writers.stop();
  expect(writers.unexpected).toEqual([]);

  // Every acknowledged write is in the ledger under the seq and event id it was answered with; no seq twice, no
  // write twice (a retry after a lost answer found the first entry).
  const entries = await readLedger(stack.base);
  const bySeq = new Map(entries.map((e) => [e.seq, e]));
  expect(bySeq.size).toBe(entries.length);
  expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
  const missing = writers.acknowledged.filter(
    (a) => bySeq.get(a.seq)?.key !== a.key || bySeq.get(a.seq)?.event_id !== a.event_id
  );
  expect(missing).toEqual([]);
  const loadKeys = entries.filter((e) => e.key.startsWith('supervised.load.')).map((e) => e.key);
  expect(new Set(loadKeys).size).toBe(loadKeys.length);
  const verify = await http('GET', `${stack.base}/api/verify`);
  expect(verify.body).toMatchObject({ ok: true, consistent: true, ledger_lines: entries.length });

  // Every acknowledged write also reads back through the key tree, whose indexer ran in the killed API: by its key
  // (a prefix read: its entry and those of the keys it prefixes, `…n1` of `…n10`, oldest first) and as the memory
  // gateway's newest version of its key (its only one).
  const loads = entries.filter((e) => e.key.startsWith('supervised.load.'));
  const memory = `http://127.0.0.1:${stack.env.MEMORY_PORT}`;
  for (const a of writers.acknowledged) {
    const byKey = await http('GET', `${stack.base}/api/truth?key=${encodeURIComponent(a.key)}&limit=200`);
    const want = loads.filter((e) => e.key.startsWith(a.key)).slice(0, 200);
    expect([a.key, byKey.body.results?.map((e: { seq: number }) => e.seq)]).toEqual([a.key, want.map((e) => e.seq)]);
    const latest = await http('GET', `${memory}/truth/${a.key}`);
    expect([a.key, latest.status, latest.body.seq, latest.body.version]).toEqual([a.key, 200, a.seq, 1]);
  }

  // The approvals held before and during the restarts still wait for a human, and a decision goes through.
  const headers = { 'x-zr-token': approver };
  for (const h of writers.held) {
    const status = await http('GET', `${stack.base}/api/truth/approvals/${h.approval_id}`, { headers });
    expect([h.key, status.status, status.body.approval?.state]).toEqual([h.key, 200, 'pending']);
  }
  const [approve, reject] = writers.held;
  const approved = await http('POST', `${stack.base}/api/truth/approvals/${approve!.approval_id}/approve`, {
    headers,
    body: { reason: 'checked after the restarts' }
  });
  expect(approved.body.approval).toMatchObject({ state: 'approved' });
  const rejected = await http('POST', `${stack.base}/api/truth/approvals/${reject!.approval_id}/reject`, {
    headers,
    body: { reason: 'not this one' }
  });
  expect(rejected.body.approval).toMatchObject({ state: 'rejected' });
  const appended = (await readLedger(stack.base)).find((e) => e.key === approve!.key);
  expect(appended?.seq).toBe(approved.body.approval.seq);
  expect((await http('GET', `${stack.base}/api/verify`)).body.consistent).toBe(true);

  // Still one stack: a Ctrl-C stops it, including the restarted processes.
  stack.child.kill('SIGINT');
  expect(await stack.exited).toEqual([0, null]);
  expect(alive(worker)).toBe(false);
  expect(recordedPids(stack.dataDir)).toEqual({});
}, 240_000);

it(`gives up and stops everything when the API dies more than ${RESTART_POLICY.maxRestarts} times in ${RESTART_POLICY.windowMs / 1000} s`, async () => {
  const stack = await launch('node');
  await stack.ready;
  const servers = recordedPids(stack.dataDir);
  Object.values(servers).forEach((p) => seen.add(p));

  // Kill every API process as soon as it is started.
  let api = servers.api!;
  for (let death = 1; death <= RESTART_POLICY.maxRestarts + 1; death++) {
    process.kill(api, 'SIGKILL');
    if (death <= RESTART_POLICY.maxRestarts) api = await restartedPid(stack.dataDir, 'api', api);
  }
  const [code] = await stack.exited;

  expect(code).toBe(1);
  expect(stack.output()).toMatch(
    new RegExp(
      `api died ${RESTART_POLICY.maxRestarts + 1} times within ${RESTART_POLICY.windowMs / 1000} s \\(last: killed by SIGKILL[^)]*\\); giving up`
    )
  );
  expect(stack.output()).toMatch(/\[stack\] stopped\n/);
  expect([...seen].filter(alive)).toEqual([]);
  expect(recordedPids(stack.dataDir)).toEqual({});
}, 180_000);
