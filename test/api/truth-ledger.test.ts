/**
 * The truth ledger over real HTTP: every write error code, append-only writes with gapless seq, idempotent
 * retries, the daily quota, reads, verification (including tampering directly in MongoDB), proofs checked by the
 * offline verifier, the seed chain, and the L0 subscription.
 */
import { registerDid } from '../support/credentials';
import { eventually, http, startTestService, TestService } from '../support/service';
import {
  entryLeafHash,
  SignedTreeHead,
  verifyEntryInTreeHead,
  verifyTreeHead,
  verifyTreeHeadsConsistent
} from '../../core/ledger/tree-head.node';

let svc: TestService;
const DID = 'did:example:writer';
const write = (body: unknown, headers: Record<string, string> = {}, url = svc.urls.main) =>
  http('POST', `${url}/api/report/truth`, { headers: { 'x-did': DID, ...headers }, body });

beforeAll(async () => {
  // A long write deadline: the burst below is about correctness under contention on a shared, busy FerretDB,
  // not latency (the bounded 503 has its own suite, truth-mongo-down.test.ts).
  // The bursts below test exactness, not shedding (test/api/truth-overload.test.ts): every write is admitted.
  svc = await startTestService(
    {
      TRUTH_DAILY_QUOTA: '60',
      TRUTH_MAX_VALUE_BYTES: '2048',
      TRUTH_WRITE_TIMEOUT_MS: '120000',
      TRUTH_MAX_IN_FLIGHT: '1000'
    },
    { worker: false }
  );
  await registerDid(svc.urls.main, svc.adminToken, DID);
});
afterAll(async () => {
  await svc?.close();
});

describe('POST /api/report/truth errors', () => {
  it('401 without X-DID or with an unknown DID', async () => {
    const body = { key: 'sys.event.1', value: { a: 1 } };
    const none = await http('POST', `${svc.urls.main}/api/report/truth`, { body });
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ ok: false, error: 'unauthorized' });
    expect((await write(body, { 'x-did': 'did:example:stranger' })).status).toBe(401);
  });

  it.each([
    ['a string', 'hello'],
    ['an array', [1, 2]],
    ['null', null],
    ['a number', 7]
  ])('400 value_must_be_object when value is %s', async (_what, value) => {
    const res = await write({ key: 'sys.event.1', value });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('value_must_be_object');
  });

  it('400 empty_value_rejected for the old top-level content / truth_value form', async () => {
    for (const old of [{ content: 'x' }, { truth_value: { a: 1 } }]) {
      const res = await write({ key: 'sys.event.1', ...old });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('empty_value_rejected');
    }
  });

  it.each([
    ['no namespace', 'justakey', /<namespace>\.<key>/],
    ['the truth- prefix', 'truth-abc.def', /truth-/],
    ['spaces', 'sys.bad key', /<namespace>\.<key>/],
    ['the reserved hub namespace', 'hub.admin.x', /reserved/]
  ])('400 invalid_key for %s', async (_what, key, message) => {
    const res = await write({ key, value: { a: 1 } });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_key');
    expect(res.body.message).toMatch(message);
  });

  it('400 naming the field for a bad truth_type or a body did that differs from X-DID', async () => {
    const badType = await write({ key: 'sys.e.1', value: {}, truth_type: 'gossip' });
    expect(badType.status).toBe(400);
    expect(badType.body.fields[0].field).toBe('body.truth_type');
    const otherDid = await write({ key: 'sys.e.1', value: {}, did: 'did:example:other' });
    expect(otherDid.status).toBe(400);
    expect(otherDid.body.fields[0].field).toBe('body.did');
  });

  it('404 for the path with a trailing slash', async () => {
    const res = await http('POST', `${svc.urls.main}/api/report/truth/`, {
      headers: { 'x-did': DID },
      body: { key: 'sys.e.1', value: {} }
    });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe('not_found');
  });

  it('413 for an over-large value, and nothing is written by any rejected request', async () => {
    const before = (await http('GET', `${svc.urls.main}/api/status`)).body.truth_count;
    const res = await write({ key: 'sys.big.1', value: { blob: 'x'.repeat(3000) } });
    expect(res.status).toBe(413);
    expect(res.body.error).toBe('payload_too_large');
    expect((await http('GET', `${svc.urls.main}/api/status`)).body.truth_count).toBe(before);
  });
});

describe('appending', () => {
  it('answers the success shape and keeps the value byte-for-byte in canonical form', async () => {
    const value = { 'dotted.key': { $dollar: [[1, 2], []] }, nul: 'a\u0000b', n: 1.5, z: 'last', a: 'first' };
    const res = await write({ key: 'sys.canonical.20261120T101500Z', value, truth_type: 'data' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, message: 'truth recorded' });
    expect(res.body.event_id).toMatch(/^truth-[a-z0-9]+$/);
    expect(res.body.truth_count).toBe(res.body.seq);
    const found = await http('GET', `${svc.urls.main}/api/truth?key=sys.canonical.&limit=5`);
    expect(found.body.results[0].value).toEqual(value);
    expect(found.body.results[0]).toMatchObject({
      seq: res.body.seq,
      key: 'sys.canonical.20261120T101500Z',
      truth_type: 'data',
      did: DID,
      event_id: res.body.event_id
    });
  });

  it('is served by the backup listener too, which has the short status form', async () => {
    const res = await write({ key: 'sys.backup.1', value: { via: 'backup' } }, {}, svc.urls.backup);
    expect(res.status).toBe(200);
    const status = await http('GET', `${svc.urls.backup}/api/status`);
    expect(status.body).toEqual({ truth_count: res.body.seq, status: 'online' });
  });

  it('status-data: sync gives the last entry time from the head record, metrics counts appends from the marks', async () => {
    const res = await write({ key: 'sys.status.sync.1', value: { n: 1 } });
    expect(res.status).toBe(200);
    const entry = (await http('GET', `${svc.urls.main}/api/truth?key=sys.status.sync.1&limit=1`)).body.results[0];
    const sync = await http('GET', `${svc.urls.main}/api/status-data/sync`);
    expect(sync.status).toBe(200);
    expect(sync.body.ledger_head).toEqual({
      size: res.body.seq,
      root: expect.any(String),
      last_entry_at: entry.created_at
    });
    // A mark two hours old stands for a ledger that was already written then: the hour is counted from the marks.
    const now = Date.now();
    await svc.db.collection('ledger_marks').insertOne({
      _id: Math.floor((now - 7_200_000) / 5000) as never,
      size: 0,
      at: new Date(now - 7_200_000).toISOString()
    });
    const metrics = await http('GET', `${svc.urls.main}/api/status-data/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body.ledger.size).toBeGreaterThanOrEqual(res.body.seq);
    expect(metrics.body.appends.last_hour).toBeGreaterThan(0);
    expect(metrics.body.appends.last_hour).toBeLessThanOrEqual(metrics.body.ledger.size);
    expect(metrics.body.appends.last_minute).toBeLessThanOrEqual(metrics.body.appends.last_hour);
  });

  it('returns the first result for a retry with the same Idempotency-Key', async () => {
    const headers = { 'idempotency-key': 'retry-me-1' };
    const first = await write({ key: 'sys.idem.1', value: { n: 1 } }, headers);
    const again = await write({ key: 'sys.idem.1', value: { n: 1 } }, headers);
    expect(again.status).toBe(200);
    expect(again.body.seq).toBe(first.body.seq);
    expect(again.body.event_id).toBe(first.body.event_id);
    expect(again.body.duplicate).toBe(true);
    const found = await http('GET', `${svc.urls.main}/api/truth?key=sys.idem.1`);
    expect(found.body.count).toBe(1);
  });

  it('still returns the first result when the fast idempotency record is missing (a writer stopped between inserts)', async () => {
    const headers = { 'idempotency-key': 'retry-me-2' };
    const first = await write({ key: 'sys.idem.2', value: { n: 2 } }, headers);
    expect(first.status).toBe(200);
    const removed = await svc.db.collection('ledger_idempotency').deleteMany({ seq: first.body.seq });
    expect(removed.deletedCount).toBe(1);
    const again = await write({ key: 'sys.idem.2', value: { n: 2 } }, headers);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ seq: first.body.seq, event_id: first.body.event_id, duplicate: true });
    expect((await http('GET', `${svc.urls.main}/api/truth?key=sys.idem.2`)).body.count).toBe(1);
    expect((await http('GET', `${svc.urls.main}/api/verify`)).body.consistent).toBe(true);
  });

  it('publishes entries whose head record is missing (a writer stopped before recording it) with the next write', async () => {
    for (let i = 0; i < 3; i++) expect((await write({ key: `sys.trail.${i}`, value: { i } })).status).toBe(200);
    const current = await http('GET', `${svc.urls.main}/api/status`);
    const older = await svc.db.collection('ledger').findOne({ _id: current.body.truth_count - 3 } as object);
    // (Head records follow the answers within a few ms: store/ledger/commit-engine.ts, publishHead.)
    await eventually(
      async () =>
        (await svc.db.collection('ledger_head').countDocuments({ size: current.body.truth_count })) === 1
          ? true
          : undefined,
      10000,
      'the head record of the last write'
    );
    // The last three batches' head records never written: the published head is the older one, a valid prefix.
    // (Writers prune the records older than theirs, so the older one is written back, without its frontier: the
    // entries do not store theirs, and a writer then rebuilds the tail from the entries.)
    const heads = svc.db.collection<Record<string, unknown> & { _id: string }>('ledger_head');
    await heads.deleteMany({});
    await heads.insertOne({
      _id: String(older!.seq).padStart(16, '0'),
      size: older!.seq,
      root: older!.root,
      last_entry_at: older!.created_at,
      tally: older!.tally,
      updated_at: new Date().toISOString()
    });
    const trailing = await http('GET', `${svc.urls.main}/api/status`);
    expect(trailing.body).toMatchObject({ truth_count: older!.seq, merkle_root: older!.root });
    expect((await http('GET', `${svc.urls.main}/api/verify`)).body).toMatchObject({
      consistent: true,
      ledger_lines: current.body.truth_count
    });
    // Another process (which has not written before, so it reads the tail) appends after the newest entry and
    // publishes everything.
    const second = await svc.startSecondApi();
    try {
      const next = await write({ key: 'sys.trail.next', value: {} }, {}, second.url);
      expect(next.body.seq).toBe(current.body.truth_count + 1);
    } finally {
      await second.stop();
    }
    const status = await http('GET', `${svc.urls.main}/api/status`);
    expect(status.body.truth_count).toBe(current.body.truth_count + 1);
    expect((await http('GET', `${svc.urls.main}/api/verify`)).body).toMatchObject({
      consistent: true,
      stored: status.body.merkle_root
    });
  });
});

describe('quota', () => {
  it('gives 429 with Retry-After once a DID used its daily quota', async () => {
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:busy');
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++)
      statuses.push((await write({ key: `busy.w.${i}`, value: { i } }, { 'x-did': did })).status);
    expect(statuses.slice(0, 60).every((s) => s === 200)).toBe(true);
    const over = await write({ key: 'busy.w.over', value: {} }, { 'x-did': did });
    expect(over.status).toBe(429);
    expect(over.body.error).toBe('quota_exceeded');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('is exact under a concurrent burst from two API processes', async () => {
    const second = await svc.startSecondApi();
    try {
      const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:crowd');
      const results = await Promise.all(
        Array.from({ length: 90 }, (_, i) =>
          write({ key: `crowd.w.${i}`, value: { i } }, { 'x-did': did }, i % 2 ? second.url : svc.urls.main)
        )
      );
      const statuses = results.map((r) => r.status);
      // Never more than the quota. Fewer is possible while one process still holds slots it leased ahead and the
      // other's writes are refused (store/ledger/quota.ts: bounded, until the lease is given back).
      const accepted = statuses.filter((s) => s === 200).length;
      expect(accepted).toBeLessThanOrEqual(60);
      expect(statuses.filter((s) => s === 429).length).toBe(90 - accepted);
      // Once both processes are idle, their unused slots are given back: writing on until both refuse uses exactly
      // the rest of the quota.
      await new Promise((r) => setTimeout(r, 2500));
      for (let i = 0, refusedBoth = false; !refusedBoth && i < 100; i++) {
        const [a, b] = [
          await write({ key: `crowd.w.more.a${i}`, value: {} }, { 'x-did': did }),
          await write({ key: `crowd.w.more.b${i}`, value: {} }, { 'x-did': did }, second.url)
        ];
        expect([200, 429]).toContain(a.status);
        expect([200, 429]).toContain(b.status);
        refusedBoth = a.status === 429 && b.status === 429;
      }
      expect((await http('GET', `${svc.urls.main}/api/truth?key=crowd.w.&limit=200`)).body.count).toBe(60);
      expect(await svc.db.collection('quota_uses').countDocuments({ scope: `truth:${did}` })).toBe(60);
    } finally {
      await second.stop();
    }
  });
});

describe('X-DID from memory', () => {
  it('refuses a DID revoked through another API process once TRUTH_DID_CACHE_MS has passed, and at once when revoked here', async () => {
    const did = await registerDid(svc.urls.main, svc.adminToken, 'did:example:remembered');
    expect((await write({ key: 'remembered.1', value: {} }, { 'x-did': did })).status).toBe(200);
    const second = await svc.startSecondApi();
    try {
      // Revoked through the other process: this one still remembers the DID as active for at most the cache time.
      expect(
        (
          await http('POST', `${second.url}/admin/dids/${encodeURIComponent(did)}/revoke`, {
            headers: { authorization: `Bearer ${svc.adminToken}` }
          })
        ).status
      ).toBe(200);
      await eventually(
        async () =>
          (await write({ key: 'remembered.2', value: {} }, { 'x-did': did })).status === 401 ? true : undefined,
        10000,
        'the revocation to count here'
      );
    } finally {
      await second.stop();
    }
    // Revoked through this process: refused at the very next write.
    const here = await registerDid(svc.urls.main, svc.adminToken, 'did:example:remembered-here');
    expect((await write({ key: 'remembered.3', value: {} }, { 'x-did': here })).status).toBe(200);
    expect(
      (
        await http('POST', `${svc.urls.main}/admin/dids/${encodeURIComponent(here)}/revoke`, {
          headers: { authorization: `Bearer ${svc.adminToken}` }
        })
      ).status
    ).toBe(200);
    expect((await write({ key: 'remembered.4', value: {} }, { 'x-did': here })).status).toBe(401);
  });
});

describe('concurrency', () => {
  it('keeps seq contiguous and the root equal to the recomputed root under a burst from two API processes', async () => {
    const second = await svc.startSecondApi();
    const dids = await Promise.all(
      Array.from({ length: 10 }, (_, i) => registerDid(svc.urls.main, svc.adminToken, `did:example:burst${i}`))
    );
    const before = (await http('GET', `${svc.urls.main}/api/status`)).body.truth_count;
    const writes = Array.from({ length: 400 }, (_, i) =>
      http('POST', `${i % 2 ? second.url : svc.urls.main}/api/report/truth`, {
        headers: { 'x-did': dids[i % 10]! },
        body: { key: `burst.w.${i}`, value: { i } }
      })
    );
    const results = await Promise.all(writes);
    expect(results.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
    const seqs = results.map((r) => r.body.seq).sort((a, b) => a - b);
    expect(new Set(seqs).size).toBe(400);
    const all = await svc.db
      .collection('ledger')
      .find({}, { projection: { _id: 1 } })
      .sort({ _id: 1 })
      .toArray();
    expect(all.map((d) => d._id)).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
    expect(all.length).toBeGreaterThanOrEqual(before + 400);
    const verify = await http('GET', `${svc.urls.main}/api/verify`);
    expect(verify.body).toMatchObject({ ok: true, consistent: true, ledger_lines: all.length, first_bad_seq: null });
    expect(verify.body.computed).toBe(verify.body.stored);
    // The published head is the newest one, whichever process wrote last (it never moves back).
    for (const url of [svc.urls.main, second.url]) {
      expect((await http('GET', `${url}/api/status`)).body).toMatchObject({
        truth_count: all.length,
        merkle_root: verify.body.computed
      });
    }
    await second.stop();
  });
});

describe('reads', () => {
  it('status carries the spec fields and a signed tree head verifiable with the published key', async () => {
    const status = await http('GET', `${svc.urls.main}/api/status`);
    expect(status.body).toMatchObject({
      status: 'online',
      service: 'zhongshu-hub',
      did: 'did:zhongshu:hub',
      version: 'V3.0',
      hub_version: '2.3.0'
    });
    expect(status.body.tree_head.root_hash).toBe(status.body.merkle_root);
    expect(status.body.tree_head.tree_size).toBe(status.body.truth_count);
    expect(verifyTreeHead(status.body.tree_head, status.body.public_key.base64)).toBe(true);
    const forged: SignedTreeHead = { ...status.body.tree_head, tree_size: status.body.tree_head.tree_size + 1 };
    expect(verifyTreeHead(forged, status.body.public_key.base64)).toBe(false);
  });

  it('limits /api/truth to 200 entries and lists the ledger newest first with its root', async () => {
    expect((await http('GET', `${svc.urls.main}/api/truth?limit=201`)).status).toBe(400);
    const ledger = await http('GET', `${svc.urls.main}/api/ledger?limit=3`);
    const status = await http('GET', `${svc.urls.main}/api/status`);
    expect(ledger.body.entries.map((e: { seq: number }) => e.seq)).toEqual([
      ledger.body.size,
      ledger.body.size - 1,
      ledger.body.size - 2
    ]);
    expect(ledger.body.root).toBe(status.body.merkle_root);
    const list = await http('GET', `${svc.urls.main}/api/report/truths/list?limit=2`);
    expect(list.body.truths[0]).toHaveProperty('truth_value');
    const pub = await http('GET', `${svc.urls.main}/api/truth/public`);
    expect(pub.body.results.every((e: { truth_type: string }) => pub.body.truth_types.includes(e.truth_type))).toBe(
      true
    );
    expect(pub.body.results.length).toBeGreaterThan(0);
  });

  it('proves inclusion and consistency, checked offline by the core verifier', async () => {
    const w = await write({ key: 'sys.proof.1', value: { p: 1 } });
    const status1 = await http('GET', `${svc.urls.main}/api/status`);
    await write({ key: 'sys.proof.2', value: { p: 2 } });
    const status2 = await http('GET', `${svc.urls.main}/api/status`);
    const key = status2.body.public_key.base64;
    const proof = await http(
      'GET',
      `${svc.urls.main}/api/proof/inclusion?seq=${w.body.seq}&tree_size=${status2.body.truth_count}`
    );
    expect(proof.status).toBe(200);
    expect(entryLeafHash(proof.body.entry)).toBe(proof.body.leaf_hash);
    expect(verifyEntryInTreeHead(proof.body.entry, proof.body.audit_path, status2.body.tree_head, key)).toBe(true);
    expect(
      verifyEntryInTreeHead(
        { ...proof.body.entry, value: { p: 999 } },
        proof.body.audit_path,
        status2.body.tree_head,
        key
      )
    ).toBe(false);
    const cons = await http(
      'GET',
      `${svc.urls.main}/api/proof/consistency?first=${status1.body.truth_count}&second=${status2.body.truth_count}`
    );
    expect(verifyTreeHeadsConsistent(status1.body.tree_head, status2.body.tree_head, cons.body.proof)).toBe(true);
    expect((await http('GET', `${svc.urls.main}/api/proof/inclusion?seq=1&tree_size=999999`)).status).toBe(404);
  });

  it('reports an empty execution-seed chain as intact (seed writes need approval: see truth-approval.test.ts)', async () => {
    const res = await http('GET', `${svc.urls.main}/api/verify-seed`);
    expect(res.body).toMatchObject({ ok: true, chain_length: 0, head_hash: null, first_break: null });
  });

  it('serves the status-data family', async () => {
    for (const r of ['metrics', 'nodes', 'sync', 'assets']) {
      const res = await http('GET', `${svc.urls.main}/api/status-data/${r}`);
      expect({ r, status: res.status, resource: res.body.resource }).toEqual({ r, status: 200, resource: r });
    }
    // assets counts from the tally the head carries: the same as counting the entries themselves.
    await write({ key: 'sys.assets.typed', value: { n: 1 }, truth_type: 'risk' });
    const entries = await svc.db
      .collection('ledger')
      .find({}, { projection: { kind: 1, truth_type: 1 } })
      .toArray();
    const assets = (await http('GET', `${svc.urls.main}/api/status-data/assets`)).body;
    const truths = entries.filter((e) => e.kind === 'truth');
    expect(assets.hub_records).toBe(entries.length - truths.length);
    expect(assets.truths_by_type.risk).toBe(truths.filter((e) => e.truth_type === 'risk').length);
    expect(assets.truths_by_type.untyped).toBe(truths.filter((e) => e.truth_type === null).length);
    expect(Object.values(assets.truths_by_type as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(
      truths.length
    );
    const instr = await http('GET', `${svc.urls.main}/api/instructions/ext-node-000001`, { headers: { 'x-did': DID } });
    expect(instr.body).toMatchObject({ ok: true, node_id: 'ext-node-000001', count: 0 });
    expect((await http('GET', `${svc.urls.main}/api/instructions/ext-node-000001`)).status).toBe(401);
  });
});

describe('L0 subscription', () => {
  it('pages entries after a cursor as JSON', async () => {
    const res = await http('GET', `${svc.urls.main}/api/sub-l0?after=2&limit=3`);
    expect(res.body.entries.map((e: { seq: number }) => e.seq)).toEqual([3, 4, 5]);
    expect(res.body.next_cursor).toBe(5);
  });

  it('streams existing and newly appended entries over SSE', async () => {
    const head = (await http('GET', `${svc.urls.main}/api/status`)).body.truth_count;
    const controller = new AbortController();
    const res = await fetch(`${svc.urls.main}/api/sub-l0?after=${head - 1}`, {
      headers: { accept: 'text/event-stream' },
      signal: controller.signal
    });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    let text = '';
    const appended = await write({ key: 'sys.stream.1', value: { live: true } });
    await eventually(
      async () => {
        const { value } = await reader.read();
        text += Buffer.from(value ?? new Uint8Array()).toString();
        return text.includes(`id: ${appended.body.seq}\n`) ? true : undefined;
      },
      10000,
      'the streamed entry'
    );
    expect(text).toContain(`id: ${head}\n`);
    expect(text).toContain('"key":"sys.stream.1"');
    controller.abort();
  });
});

describe('tamper detection', () => {
  // Runs last: it edits the ledger directly in MongoDB, as an attacker with database access would.
  it('names the first bad seq after an update, a swap or a delete made directly in the database', async () => {
    const ledger = svc.db.collection<{ _id: number; value_json: string; key: string }>('ledger');
    expect((await http('GET', `${svc.urls.main}/api/verify`)).body.consistent).toBe(true);

    const original = (await ledger.findOne({ _id: 7 }))!;
    await ledger.updateOne({ _id: 7 }, { $set: { value_json: '{"tampered":true}' } });
    let v = (await http('GET', `${svc.urls.main}/api/verify`)).body;
    expect(v).toMatchObject({ ok: false, consistent: false, first_bad_seq: 7 });
    await ledger.updateOne({ _id: 7 }, { $set: { value_json: original.value_json } });
    expect((await http('GET', `${svc.urls.main}/api/verify`)).body.consistent).toBe(true);

    const [a, b] = [(await ledger.findOne({ _id: 9 }))!, (await ledger.findOne({ _id: 12 }))!];
    await ledger.updateOne({ _id: 9 }, { $set: { key: b.key, value_json: b.value_json } });
    await ledger.updateOne({ _id: 12 }, { $set: { key: a.key, value_json: a.value_json } });
    v = (await http('GET', `${svc.urls.main}/api/verify`)).body;
    expect(v).toMatchObject({ consistent: false, first_bad_seq: 9 });
    await ledger.updateOne({ _id: 9 }, { $set: { key: a.key, value_json: a.value_json } });
    await ledger.updateOne({ _id: 12 }, { $set: { key: b.key, value_json: b.value_json } });

    // The tally (what /api/status-data/assets reads) is checked too.
    const tallies = svc.db.collection<{ _id: number; tally: Record<string, number> }>('ledger');
    const tallied = (await tallies.findOne({ _id: 10 }))!;
    await tallies.updateOne(
      { _id: 10 },
      { $set: { tally: { ...tallied.tally, event: (tallied.tally.event ?? 0) + 5 } } }
    );
    v = (await http('GET', `${svc.urls.main}/api/verify`)).body;
    expect(v).toMatchObject({ consistent: false, first_bad_seq: 10 });
    expect(v.problem).toMatch(/tally/);
    await tallies.updateOne({ _id: 10 }, { $set: { tally: tallied.tally } });
    expect((await http('GET', `${svc.urls.main}/api/verify`)).body.consistent).toBe(true);
    // And the head record's, which assets serves.
    const heads = svc.db.collection<{ _id: string; size: number; tally: Record<string, number> }>('ledger_head');
    const newest = (await heads.find({}).sort({ size: -1 }).limit(1).next())!;
    await heads.updateOne({ _id: newest._id }, { $set: { tally: { ...newest.tally, risk: 1000 } } });
    v = (await http('GET', `${svc.urls.main}/api/verify`)).body;
    expect(v).toMatchObject({ consistent: false, first_bad_seq: newest.size });
    expect(v.problem).toMatch(/tally of the head record/);
    await heads.updateOne({ _id: newest._id }, { $set: { tally: newest.tally } });
    expect((await http('GET', `${svc.urls.main}/api/verify`)).body.consistent).toBe(true);

    await ledger.deleteOne({ _id: 5 });
    v = (await http('GET', `${svc.urls.main}/api/verify`)).body;
    expect(v).toMatchObject({ consistent: false, first_bad_seq: 5 });
    expect(v.problem).toMatch(/missing/);
  });
});
