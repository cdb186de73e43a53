/**
 * The ledger writer lease across API replicas (LEDGER_FORWARD_SECRET;
 * docs/ledger.md#one-writer-across-hosts-the-writer-lease), over real HTTP on the
 * embedded stack. Two replicas with the secret (B started first, then C) and the service's own API process (A),
 * which has no secret and appends directly, as a replica of an older configuration would:
 *   - B holds the lease and C forwards its appends to B (their GET /health says so, with the counts); writes
 *     through all three at once are all answered, with contiguous seqs, and the ledger verifies;
 *   - the daily quota stays exact: 1,040 writes of one DID through both against a quota of 1,000 are 1,000 answered
 *     200 and 40 answered 429, and exactly slots 1…1000 are spent once the unused blocks are given back (C's writes
 *     take their slots at B with their appends); a retry through C spends no slot;
 *   - the forwarding endpoint refuses a missing or forged secret (and answers 401 on a replica without one) before
 *     reading the body, refuses a value that is not canonical JSON of an object, and writes nothing for any of them;
 *   - B stopping gives the lease up: C takes it, and writes through C go on being answered throughout;
 *   - C killed (no give-up): D, forwarding to it, appends itself from the next write on and takes the lease once it
 *     expires; at most the one write in flight at the kill is answered 503;
 *   - a worker with the secret appends the hub's own events (a registration's) through the holder;
 *   - a holder of an older version (no counted-appends route: 404) keeps being forwarded to, a truth write's slot
 *     claimed apart from its append; one without the batch route is sent a counted append per request;
 *   - a holder cut off by the network (a relay that goes silent and refuses new connections) while it keeps the
 *     lease: the replica probes it, gives up the writes in flight (503 within seconds) and appends every later one
 *     itself, then forwards again once healed.
 */
import { randomBytes } from 'node:crypto';
import http_ from 'node:http';
import net from 'node:net';
import { registerDid } from '../support/credentials';
import { registerNode } from '../support/federation';
import { eventually, http, startTestService, TestService } from '../support/service';

let svc: TestService;
const DID = 'did:example:replicas';
const SECRET = `lfs_${randomBytes(24).toString('hex')}`;
const REPLICA_ENV = { LEDGER_FORWARD_SECRET: SECRET, LEDGER_WRITER_LEASE_S: '3' };
const APPENDS = '/internal/ledger/appends';
const COUNTED_APPENDS = '/internal/ledger/counted-appends';
const COUNTED_APPEND_BATCHES = '/internal/ledger/counted-append-batches';
const today = () => new Date().toISOString().slice(0, 10);

const write = (url: string, n: number) =>
  http('POST', `${url}/api/report/truth`, {
    headers: { 'x-did': DID },
    body: { key: `replicas.write.${n}`, value: { n } }
  });
const writerHealth = async (url: string) => (await http('GET', `${url}/health`)).body.ledger_writer;
/**
 * The ledger's size in `url`'s /api/status: by default A's, which sees the holder's appends once the holder's head
 * record is in (shortly after its answers); the holder itself answers with its own acknowledged tail at once.
 */
const ledgerSize = async (url = svc.urls.main) => (await http('GET', `${url}/api/status`)).body.truth_count as number;

beforeAll(async () => {
  svc = await startTestService(
    { TRUTH_DAILY_QUOTA: '1000', TRUTH_MAX_IN_FLIGHT: '1000', TRUTH_WRITE_TIMEOUT_MS: '60000' },
    { worker: false }
  );
  await registerDid(svc.urls.main, svc.adminToken, DID);
});
afterAll(async () => {
  await svc?.close();
});

let b: { url: string; stop(): Promise<void>; kill(): Promise<void> };
let c: { url: string; stop(): Promise<void>; kill(): Promise<void> };
let d: { url: string; stop(): Promise<void>; kill(): Promise<void> };

it('one replica holds the lease, the other forwards to it, and writes through every process are exact', async () => {
  b = await svc.startSecondApi({}, REPLICA_ENV);
  await eventually(
    async () => ((await writerHealth(b.url))?.holds_lease ? true : undefined),
    10_000,
    'B holding the lease'
  );
  c = await svc.startSecondApi({}, REPLICA_ENV);
  expect(await writerHealth(c.url)).toEqual({
    holds_lease: false,
    writer_url: b.url,
    forwarded: 0,
    forward_requests: 0,
    served: 0
  });
  // A replica without the secret takes no part.
  expect(await writerHealth(svc.urls.main)).toBeUndefined();

  const before = await ledgerSize();
  const answers = await Promise.all([
    ...Array.from({ length: 20 }, (_, i) => write(b.url, i)),
    ...Array.from({ length: 20 }, (_, i) => write(c.url, 100 + i)),
    ...Array.from({ length: 10 }, (_, i) => write(svc.urls.main, 200 + i))
  ]);
  expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
  const seqs = answers.map((r) => r.body.seq as number).sort((x, y) => x - y);
  expect(seqs).toEqual(Array.from({ length: 50 }, (_, i) => before + 1 + i));

  expect(await writerHealth(c.url)).toMatchObject({ holds_lease: false, writer_url: b.url, forwarded: 20, served: 0 });
  expect(await writerHealth(b.url)).toMatchObject({ holds_lease: true, writer_url: b.url, forwarded: 0, served: 20 });
  const verify = await http('GET', `${svc.urls.main}/api/verify`);
  expect(verify.body).toMatchObject({ consistent: true, ledger_lines: before + 50 });
  for (const url of [b.url, c.url]) expect((await http('GET', `${url}/api/status`)).body.truth_count).toBe(before + 50);
});

it('the daily quota is exact across the replicas: the holder hands out every slot', async () => {
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:quota-replicas');
  const before = await ledgerSize();
  const { forwarded: forwardedBefore, forward_requests: requestsBefore } = await writerHealth(c.url);
  // 1,040 writes against a quota of 1,000, 32 at a time, alternating between the holder (B) and the forwarder (C).
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      for (let i = next++; i < 1040; i = next++) {
        const url = i % 2 === 0 ? b.url : c.url;
        statuses.push(
          (
            await http('POST', `${url}/api/report/truth`, {
              headers: { 'x-did': did },
              body: { key: `quota.write.${i}`, value: { i } }
            })
          ).status
        );
      }
    })
  );
  expect(statuses.filter((s) => s === 200).length).toBe(1000);
  expect(statuses.filter((s) => s === 429).length).toBe(40);
  // (Another process's /api/status sees the holder's head record, published within ~20 ms of its answers.)
  await eventually(
    async () => ((await ledgerSize()) === before + 1000 ? true : undefined),
    5000,
    'the ledger 1,000 entries longer'
  );
  const { forwarded, forward_requests: requests } = await writerHealth(c.url);
  expect(forwarded - forwardedBefore).toBeGreaterThanOrEqual(480);
  // C's writes waiting behind the ones on their way went to B together: fewer requests than writes.
  expect(requests - requestsBefore).toBeLessThan(forwarded - forwardedBefore);
  // Every slot used once, none left over once the unused blocks are given back.
  const day = new Date().toISOString().slice(0, 10);
  const slots = await eventually(
    async () => {
      const docs = await svc.db
        .collection('quota_uses')
        .find({ scope: `truth:${did}`, day })
        .toArray();
      return docs.length === 1000 ? docs : undefined;
    },
    10_000,
    'exactly 1,000 quota slots'
  );
  expect(new Set(slots.map((d) => d.n)).size).toBe(1000);
  expect(Math.max(...slots.map((d) => d.n as number))).toBe(1000);
});

it('a retry through a forwarding replica is answered with the first entry and spends no slot', async () => {
  const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:retry-replicas');
  const keyed = () =>
    http('POST', `${c.url}/api/report/truth`, {
      headers: { 'x-did': did, 'idempotency-key': 'retry-through-c' },
      body: { key: 'replicas.retry', value: { n: 1 } }
    });
  const first = await keyed();
  expect(first.status).toBe(200);
  expect(first.body.duplicate).toBe(false);
  const again = await keyed();
  expect(again.status).toBe(200);
  expect(again.body).toMatchObject({ duplicate: true, seq: first.body.seq, event_id: first.body.event_id });
  // The retry's slot was taken at the holder and given back there.
  await eventually(
    async () =>
      (await svc.db.collection('quota_uses').countDocuments({ scope: `truth:${did}`, day: today() })) === 1
        ? true
        : undefined,
    10_000,
    'one slot spent'
  );
});

it('the forwarding endpoints refuse missing and forged secrets and non-canonical values, writing nothing', async () => {
  const valid = {
    kind: 'truth',
    key: 'replicas.direct.1',
    value_json: '{"a":1,"b":[true,null]}',
    truth_type: null,
    did: DID,
    idempotency_key: null
  };
  const post = (url: string, body: unknown, authorization?: string) =>
    http('POST', `${url}${APPENDS}`, { headers: authorization ? { authorization } : {}, body });
  // Sizes as the holder (B) sees them: what it appended is in its status at once, while A's waits for B's head record
  // (and publishing it took longer than these few requests under load).
  const holderSize = () => ledgerSize(b.url);
  const before = await holderSize();

  for (const [authorization, message] of [
    [undefined, /secret is required/],
    [`Bearer ${SECRET}x`, /secret is required/],
    [`Bearer ${svc.adminToken}`, /secret is required/]
  ] as const) {
    const refused = await post(b.url, valid, authorization);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ ok: false, error: 'unauthorized', message: expect.stringMatching(message) });
  }
  // A replica without a secret has forwarding off: nothing it could be sent is accepted.
  const off = await post(svc.urls.main, valid, `Bearer ${SECRET}`);
  expect(off.status).toBe(401);
  expect(off.body.message).toMatch(/not enabled/);

  for (const value_json of ['{"b":1,"a":2}', '[1,2]', '{"a":1', '{ "a": 1 }', 'null']) {
    const bad = await post(b.url, { ...valid, value_json }, `Bearer ${SECRET}`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ ok: false, error: 'invalid_request' });
  }
  const unknownKind = await post(b.url, { ...valid, kind: 'rumour' }, `Bearer ${SECRET}`);
  expect(unknownKind.status).toBe(400);
  expect(unknownKind.body.fields[0].field).toMatch(/kind/);
  expect(await holderSize()).toBe(before);

  // The one the holder's peers would send: appended, and the entry's value is the canonical text sent.
  const ok = await post(b.url, valid, `Bearer ${SECRET}`);
  expect(ok.status).toBe(200);
  expect(ok.body).toMatchObject({
    withdrawn: false,
    duplicate: false,
    entry: { seq: before + 1, key: 'replicas.direct.1', value_json: valid.value_json, did: DID }
  });

  // A truth write's append with its quota slot: the same refusals, then over_quota (nothing written) or appended.
  const postCounted = (body: unknown, authorization?: string) =>
    http('POST', `${b.url}${COUNTED_APPENDS}`, { headers: authorization ? { authorization } : {}, body });
  // A counter of its own with a limit of one: the first takes its slot and is appended, the second is refused.
  const scope = 'truth:did:example:counted-limit';
  const slotsOf = () => svc.db.collection('quota_uses').countDocuments({ scope, day: today() });
  const counted = { ...valid, key: 'replicas.counted.1', quota: { scope, day: today(), limit: 1 } };
  expect((await postCounted(counted)).status).toBe(401);
  expect((await postCounted(counted, `Bearer ${SECRET}x`)).status).toBe(401);
  expect((await postCounted({ ...counted, value_json: '{"b":1,"a":2}' }, `Bearer ${SECRET}`)).status).toBe(400);
  const noQuota = await postCounted({ ...valid, key: 'replicas.counted.1' }, `Bearer ${SECRET}`);
  expect(noQuota.status).toBe(400);
  expect(noQuota.body.fields[0].field).toMatch(/quota/);
  expect(await holderSize()).toBe(before + 1);
  expect(await slotsOf()).toBe(0);
  const appended = await postCounted(counted, `Bearer ${SECRET}`);
  expect(appended.status).toBe(200);
  expect(appended.body).toMatchObject({
    outcome: 'appended',
    duplicate: false,
    entry: { seq: before + 2, key: 'replicas.counted.1', value_json: valid.value_json }
  });
  expect(await slotsOf()).toBe(1);
  const over = await postCounted({ ...counted, key: 'replicas.counted.2' }, `Bearer ${SECRET}`);
  expect(over.status).toBe(200);
  expect(over.body).toEqual({ outcome: 'over_quota' });
  expect(await holderSize()).toBe(before + 2);

  // Several counted appends in one request (what a replica's writes waiting behind its earlier ones send): the same
  // refusals, one value that is not canonical refuses the whole batch before anything is done, and each write is
  // answered in its place.
  const postBatch = (body: unknown, authorization?: string) =>
    http('POST', `${b.url}${COUNTED_APPEND_BATCHES}`, { headers: authorization ? { authorization } : {}, body });
  const batchScope = 'truth:did:example:batch-limit';
  const inBatch = (i: number) => ({
    ...valid,
    key: `replicas.batch.${i}`,
    quota: { scope: batchScope, day: today(), limit: 2 }
  });
  expect((await postBatch({ writes: [inBatch(1)] })).status).toBe(401);
  expect((await postBatch({ writes: [inBatch(1)] }, `Bearer ${SECRET}x`)).status).toBe(401);
  const oneBad = await postBatch({ writes: [inBatch(1), { ...inBatch(2), value_json: '[1]' }] }, `Bearer ${SECRET}`);
  expect(oneBad.status).toBe(400);
  expect(oneBad.body).toMatchObject({
    ok: false,
    error: 'invalid_request',
    fields: [{ field: 'body.writes.1.value_json' }]
  });
  expect((await postBatch({ writes: [] }, `Bearer ${SECRET}`)).status).toBe(400);
  expect(
    (await postBatch({ writes: Array.from({ length: 65 }, (_, i) => inBatch(i)) }, `Bearer ${SECRET}`)).status
  ).toBe(400);
  expect(await holderSize()).toBe(before + 2);
  const batch = await postBatch({ writes: [inBatch(1), inBatch(2), inBatch(3)] }, `Bearer ${SECRET}`);
  expect(batch.status).toBe(200);
  const answers = batch.body.answers as { outcome: string; entry?: { key: string; value_json: string } }[];
  expect(answers.map((a) => a.outcome).sort()).toEqual(['appended', 'appended', 'over_quota']);
  answers.forEach((a, i) => {
    if (a.outcome === 'appended')
      expect(a.entry).toMatchObject({ key: `replicas.batch.${i + 1}`, value_json: valid.value_json });
  });
  // (A's /api/status sees the holder's head record, published within ~20 ms of its answer.)
  await eventually(
    async () => ((await ledgerSize()) === before + 4 ? true : undefined),
    5000,
    'the ledger 4 entries longer'
  );
  expect((await http('GET', `${svc.urls.main}/api/verify`)).body).toMatchObject({
    consistent: true,
    ledger_lines: before + 4
  });
});

/** Writes through `url` one after another until `until` settles and `after` more have been answered. */
async function writeThrough(url: string, until: Promise<unknown>, after: number, from: number): Promise<number[]> {
  let done = false;
  void until.then(() => (done = true));
  const statuses: number[] = [];
  for (let i = 0, left = after; left > 0; i++) {
    statuses.push((await write(url, from + i)).status);
    if (done) left--;
  }
  return statuses;
}

it('a holder that stops gives the lease up; the other replica takes it and its writes are answered throughout', async () => {
  const before = await ledgerSize();
  const stopping = new Promise((r) => setTimeout(r, 100)).then(() => b.stop());
  const statuses = await writeThrough(c.url, stopping, 20, 1000);
  expect(statuses.length).toBeGreaterThan(20);
  expect(statuses).toEqual(statuses.map(() => 200));
  await eventually(
    async () => ((await writerHealth(c.url))?.holds_lease ? true : undefined),
    10_000,
    'C holding the lease'
  );
  expect(await writerHealth(c.url)).toMatchObject({ holds_lease: true, writer_url: c.url });
  expect((await http('GET', `${svc.urls.main}/api/verify`)).body).toMatchObject({
    consistent: true,
    ledger_lines: before + statuses.length
  });
});

it('a holder killed mid-write: the other replica appends itself at once, then takes the expired lease', async () => {
  d = await svc.startSecondApi({}, REPLICA_ENV);
  expect(await writerHealth(d.url)).toMatchObject({ holds_lease: false, writer_url: c.url });
  const before = await ledgerSize();
  const killed = new Promise((r) => setTimeout(r, 100)).then(() => c.kill());
  const statuses = await writeThrough(d.url, killed, 20, 2000);
  // A write forwarded at the moment of the kill has no answer (503: retry with its Idempotency-Key); none after.
  expect(statuses.filter((s) => s !== 200).length).toBeLessThanOrEqual(1);
  expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
  // (The write in flight when the kill completed is the first counted after it.)
  expect(statuses.slice(-19)).toEqual(Array.from({ length: 19 }, () => 200));
  // The killed holder never gave the lease up: D takes it once it expires (LEDGER_WRITER_LEASE_S=3).
  await eventually(
    async () => ((await writerHealth(d.url))?.holds_lease ? true : undefined),
    10_000,
    'D holding the lease'
  );
  const verify = (await http('GET', `${svc.urls.main}/api/verify`)).body;
  expect(verify.consistent).toBe(true);
  // Every write answered 200 is in; one answered 503 may or may not be.
  expect(verify.ledger_lines - before).toBeGreaterThanOrEqual(statuses.filter((s) => s === 200).length);
  expect(verify.ledger_lines - before).toBeLessThanOrEqual(statuses.length);
});

it("the worker forwards the hub's own events to the holder (it never holds the lease)", async () => {
  const holder = d.url; // (it took the lease when C was killed)
  expect(await writerHealth(holder)).toMatchObject({ holds_lease: true });
  const served = (await writerHealth(holder)).served;
  await svc.startWorker(REPLICA_ENV);
  // A registration's state change is appended by the worker (the node lifecycle), through the holder.
  const node = await registerNode(holder, 'worker-forwards');
  await eventually(
    async () => ((await writerHealth(holder)).served > served ? true : undefined),
    30_000,
    "the worker's event served by the holder"
  );
  const entries = await svc.db
    .collection('ledger')
    .find({ kind: 'event', key: { $regex: '^hub\\.node' } })
    .toArray();
  expect(entries.some((e) => String(e.value_json).includes(node.node_id))).toBe(true);
  expect((await http('GET', `${svc.urls.main}/api/verify`)).body.consistent).toBe(true);
});

let dStopped: Promise<void> | null = null;

it.each([
  { lacks: 'counted appends', missing: [COUNTED_APPEND_BATCHES, COUNTED_APPENDS], goes: 'a claim and an append' },
  { lacks: 'batches of counted appends', missing: [COUNTED_APPEND_BATCHES], goes: 'a counted append each' }
])(
  'a holder of an older version without $lacks: truth writes go as $goes, forwarding stays on',
  async ({ missing }) => {
    // E holds the lease behind a façade that answers 404 to the routes a holder of an older version lacks
    // (LEDGER_WRITER_URL names the façade, so the others reach E through it); F forwards to it.
    const asked = new Map<string, number>();
    const facade = http_.createServer((req, res) => {
      asked.set(req.url!, (asked.get(req.url!) ?? 0) + 1);
      if (missing.includes(req.url!)) {
        req.resume();
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ ok: false, error: 'not_found', message: 'no such route' }));
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        fetch(`${e!.url}${req.url}`, {
          method: req.method,
          headers: { authorization: String(req.headers.authorization ?? ''), 'content-type': 'application/json' },
          body: Buffer.concat(chunks)
        })
          .then(async (answer) =>
            res
              .writeHead(answer.status, { 'content-type': 'application/json' })
              .end(Buffer.from(await answer.arrayBuffer()))
          )
          .catch(() => res.writeHead(502).end());
      });
    });
    await new Promise<void>((r) => facade.listen(0, '127.0.0.1', () => r()));
    const facadeUrl = `http://127.0.0.1:${(facade.address() as { port: number }).port}`;
    let e: Awaited<ReturnType<TestService['startSecondApi']>> | null = null;
    try {
      await (dStopped ??= d.stop()); // (gives the lease up)
      e = await svc.startSecondApi({}, { ...REPLICA_ENV, LEDGER_WRITER_URL: facadeUrl });
      await eventually(
        async () => ((await writerHealth(e!.url))?.holds_lease ? true : undefined),
        10_000,
        'E holding the lease'
      );
      const f = await svc.startSecondApi({}, REPLICA_ENV);
      expect(await writerHealth(f.url)).toMatchObject({ holds_lease: false, writer_url: facadeUrl });
      const did = await registerDid(svc.urls.main, svc.adminToken, `did:example:older-holder-${missing.length}`);
      const before = await ledgerSize();
      const writeOne = (i: number) =>
        http('POST', `${f.url}/api/report/truth`, {
          headers: { 'x-did': did },
          body: { key: `older.write.${i}`, value: { i } }
        });
      const answers = [await writeOne(0), ...(await Promise.all(Array.from({ length: 9 }, (_, i) => writeOne(i + 1))))];
      expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
      // The missing routes asked once (the first write; then not for a minute); every write still went to the holder,
      // none appended by F.
      for (const path of missing) expect(asked.get(path)).toBe(1);
      if (!missing.includes(COUNTED_APPENDS)) expect(asked.get(COUNTED_APPENDS)).toBe(10);
      expect(await writerHealth(f.url)).toMatchObject({ holds_lease: false, writer_url: facadeUrl });
      expect((await writerHealth(e.url)).served).toBe(10);
      expect((await http('GET', `${svc.urls.main}/api/verify`)).body).toMatchObject({
        consistent: true,
        ledger_lines: before + 10
      });
      await f.stop();
    } finally {
      await e?.stop();
      facade.close();
    }
  }
);

it('a holder cut off by the network: the replica probes it, appends itself within seconds, and forwards again once healed', async () => {
  // G holds the lease behind a TCP relay (LEDGER_WRITER_URL names it) and H forwards to it. Cutting the relay is what
  // a partition looks like from H: its kept-alive connections carry nothing further and new ones are refused, while G
  // still reaches the database and renews the lease.
  const relay = new CuttableRelay();
  const relayUrl = await relay.listen();
  let g: Awaited<ReturnType<TestService['startSecondApi']>> | null = null;
  let h: Awaited<ReturnType<TestService['startSecondApi']>> | null = null;
  try {
    await (dStopped ??= d.stop());
    g = await svc.startSecondApi({}, { ...REPLICA_ENV, LEDGER_WRITER_URL: relayUrl });
    relay.target = g.url;
    await eventually(
      async () => ((await writerHealth(g!.url))?.holds_lease ? true : undefined),
      10_000,
      'G holding the lease'
    );
    h = await svc.startSecondApi({}, REPLICA_ENV);
    expect(await writerHealth(h.url)).toMatchObject({ holds_lease: false, writer_url: relayUrl });
    const before = await ledgerSize();
    // Two writers through H, each write waiting for its answer (the test's 60 s write deadline: without the probe, a
    // write in flight at the cut would wait it out, and every write queued behind it too).
    let stop = false;
    let n = 0;
    const answered: { status: number; at: number; ms: number }[] = [];
    const writer = async () => {
      while (!stop) {
        const at = Date.now();
        const res = await write(h!.url, 3000 + n++);
        answered.push({ status: res.status, at, ms: Date.now() - at });
      }
    };
    const writers = [writer(), writer()];
    await new Promise((r) => setTimeout(r, 1500));
    const forwardedBefore = (await writerHealth(h.url)).forwarded as number;
    expect(forwardedBefore).toBeGreaterThan(0);
    relay.cut();
    const cutAt = Date.now();
    await new Promise((r) => setTimeout(r, 8000));
    // G kept the lease all along (it reaches the database); H appended itself.
    expect(await writerHealth(g.url)).toMatchObject({ holds_lease: true });
    relay.heal();
    const healedAt = Date.now();
    // H skips G for a lease period (3 s here), then forwards to it again.
    await eventually(
      async () => (((await writerHealth(h!.url)).forwarded as number) > forwardedBefore + 5 ? true : undefined),
      15_000,
      'H forwarding to G again'
    );
    stop = true;
    await Promise.all(writers);

    const during = answered.filter((a) => a.at >= cutAt && a.at < healedAt);
    const refused = answered.filter((a) => a.status !== 200);
    // Only what was on its way at the cut is refused (503: retry with the Idempotency-Key), answered within
    // seconds; every write after it is appended by H.
    expect(refused.map((a) => a.status)).toEqual(refused.map(() => 503));
    expect(refused.length).toBeLessThanOrEqual(2);
    expect(Math.max(...refused.map((a) => a.ms), 0)).toBeLessThan(10_000);
    expect(during.filter((a) => a.status === 200).length).toBeGreaterThan(10);
    const verify = (await http('GET', `${svc.urls.main}/api/verify`)).body;
    expect(verify.consistent).toBe(true);
    const ok = answered.filter((a) => a.status === 200).length;
    expect(verify.ledger_lines - before).toBeGreaterThanOrEqual(ok);
    expect(verify.ledger_lines - before).toBeLessThanOrEqual(answered.length);
  } finally {
    await h?.stop();
    await g?.stop();
    relay.close();
  }
});

/** A TCP relay to `target` that can be cut (open connections carry nothing further, new ones are refused) and healed. */
class CuttableRelay {
  target = '';
  private server: net.Server | null = null;
  private port = 0;
  private readonly sockets = new Set<net.Socket>();
  private isCut = false;

  async listen(): Promise<string> {
    this.server = net.createServer((client) => {
      const { hostname, port } = new URL(this.target);
      const upstream = net.connect(Number(port), hostname);
      for (const [from, to] of [
        [client, upstream],
        [upstream, client]
      ] as const) {
        from.on('data', (chunk: Buffer) => {
          if (!this.isCut) to.write(chunk);
        });
        from.on('error', () => to.destroy());
        from.on('close', () => to.destroy());
        this.sockets.add(from);
        from.on('close', () => this.sockets.delete(from));
      }
    });
    await new Promise<void>((r) => this.server!.listen(this.port, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return `http://127.0.0.1:${this.port}`;
  }

  cut(): void {
    this.isCut = true;
    this.server?.close(); // new connections refused; open ones stay, silent
  }

  heal(): void {
    this.isCut = false;
    this.sockets.forEach((s) => s.destroy()); // what the cut left half-sent is gone, as after a real partition
    void this.listen();
  }

  close(): void {
    this.server?.close();
    this.sockets.forEach((s) => s.destroy());
  }
}
