/**
 * The memory gateway (MEMORY_PORT) over real HTTP: upserts append versions to the ledger (never update one), the
 * latest version with its seq, leaf hash and version count, the history newest first, the truth report's value
 * rules and X-DID on writes; and the commercial gateway's proxy to it at its default address.
 */
import fs from 'node:fs';
import { registerDid } from '../support/credentials';
import { http, startTestService, TestService } from '../support/service';

let svc: TestService;
const DID = 'did:example:memory-writer';
const upsert = (body: unknown, headers: Record<string, string> = { 'x-did': DID }) =>
  http('POST', `${svc.urls.memory}/upsert`, { headers, body });

beforeAll(async () => {
  // HOST=0.0.0.0: the memory gateway must still bind to loopback (MEMORY_HOST's default).
  svc = await startTestService({ HOST: '0.0.0.0', TRUTH_MAX_VALUE_BYTES: '2048' }, { worker: false });
  await registerDid(svc.urls.main, svc.adminToken, DID);
});
afterAll(async () => {
  await svc?.close();
});

describe('memory gateway', () => {
  it('binds to 127.0.0.1 by default even when HOST says 0.0.0.0', () => {
    const listening = fs
      .readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .slice(1)
      .filter((l) => / 0A /.test(l))
      .map((l) => l.trim().split(/\s+/)[1]!);
    const hex = (port: string) => Number(port).toString(16).toUpperCase().padStart(4, '0');
    expect(listening.filter((a) => a.endsWith(`:${hex(svc.env.MEMORY_PORT!)}`))).toEqual([
      `0100007F:${hex(svc.env.MEMORY_PORT!)}`
    ]);
    expect(listening).toContain(`00000000:${hex(svc.env.COMMERCIAL_PORT!)}`);
  });

  it('upserts append versions; the latest and the history come from the ledger', async () => {
    const first = await upsert({ key: 'crm.customer.42', truth_value: { tier: 'gold' } });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ ok: true, key: 'crm.customer.42', version: 1 });
    expect(first.body.event_id).toMatch(/^truth-/);
    const second = await upsert({ key: 'crm.customer.42', truth_value: { tier: 'platinum', since: 2026 } });
    expect(second.body).toMatchObject({ version: 2 });
    expect(second.body.seq).toBeGreaterThan(first.body.seq);
    const other = await upsert({ key: 'crm.customer.43', truth_value: { tier: 'silver' } });
    expect(other.body.version).toBe(1);

    const latest = await http('GET', `${svc.urls.memory}/truth/crm.customer.42`);
    expect(latest.status).toBe(200);
    expect(latest.body).toMatchObject({
      ok: true,
      key: 'crm.customer.42',
      versions: 2,
      version: 2,
      seq: second.body.seq,
      event_id: second.body.event_id,
      value: { tier: 'platinum', since: 2026 },
      did: DID
    });
    expect(latest.body.leaf_hash).toMatch(/^[0-9a-f]{64}$/);

    // Both versions are ledger entries; the first one is untouched.
    const entries = await svc.db.collection('ledger').find({ key: 'crm.customer.42' }).sort({ _id: 1 }).toArray();
    expect(entries.map((e) => e.value_json)).toEqual(['{"tier":"gold"}', '{"since":2026,"tier":"platinum"}']);
    expect(entries[1]!.leaf_hash).toBe(latest.body.leaf_hash);
    // The leaf hash covers what the main listener's ledger read serves.
    const read = await http('GET', `${svc.urls.main}/api/truth?key=crm.customer.42`);
    expect(read.body.results.map((r: { leaf_hash: string }) => r.leaf_hash)).toContain(latest.body.leaf_hash);

    const history = await http('GET', `${svc.urls.memory}/truth/crm.customer.42/history`);
    expect(history.status).toBe(200);
    expect(history.body).toMatchObject({ ok: true, key: 'crm.customer.42', versions: 2, count: 2, next_before: null });
    expect(history.body.history.map((v: { version: number; value: unknown }) => [v.version, v.value])).toEqual([
      [2, { tier: 'platinum', since: 2026 }],
      [1, { tier: 'gold' }]
    ]);
    const page = await http('GET', `${svc.urls.memory}/truth/crm.customer.42/history?limit=1`);
    expect(page.body.history.map((v: { version: number }) => v.version)).toEqual([2]);
    expect(page.body.next_before).toBe(second.body.seq);
    const older = await http(
      'GET',
      `${svc.urls.memory}/truth/crm.customer.42/history?limit=1&before=${page.body.next_before}`
    );
    expect(older.body.history.map((v: { version: number }) => v.version)).toEqual([1]);
    expect(older.body.next_before).toBeNull();
  });

  it('404 for a key with no version; 400 invalid_key for a malformed key', async () => {
    const missing = await http('GET', `${svc.urls.memory}/truth/crm.nobody`);
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ ok: false, error: 'not_found' });
    expect((await http('GET', `${svc.urls.memory}/truth/crm.nobody/history`)).status).toBe(404);
    const bad = await http('GET', `${svc.urls.memory}/truth/nodots`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_key');
  });

  it('writes need X-DID of a registered DID', async () => {
    const body = { key: 'crm.customer.1', truth_value: { a: 1 } };
    expect((await upsert(body, {})).status).toBe(401);
    const stranger = await upsert(body, { 'x-did': 'did:example:stranger' });
    expect(stranger.status).toBe(401);
    expect(stranger.body).toMatchObject({ ok: false, error: 'unauthorized' });
  });

  it.each([
    ['a string', 'hello'],
    ['an array', [1]],
    ['null', null]
  ])('400 value_must_be_object when truth_value is %s', async (_what, truth_value) => {
    const res = await upsert({ key: 'crm.customer.1', truth_value });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ok: false, error: 'value_must_be_object' });
    expect(res.body.fields[0].field).toBe('body.truth_value');
  });

  it('400 empty_value_rejected for the old content / value forms; 400 invalid_key; 413 over the value limit', async () => {
    for (const old of [{ content: 'x' }, { value: { a: 1 } }]) {
      const res = await upsert({ key: 'crm.customer.1', ...old });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('empty_value_rejected');
    }
    for (const key of ['truth-1.a', 'hub.mine', 'nodots', '']) {
      const res = await upsert({ key, truth_value: { a: 1 } });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_key');
    }
    const big = await upsert({ key: 'crm.customer.1', truth_value: { blob: 'x'.repeat(3000) } });
    expect(big.status).toBe(413);
  });

  it('403 for a high-risk key: those wait for a human through the truth report', async () => {
    const res = await upsert({ key: 'KERNEL.EVOLUTION.DIRECTIVE.1', truth_value: { a: 1 } });
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/api\/report\/truth/);
  });

  it('the commercial gateway proxies reads and writes to this memory gateway by default', async () => {
    const health = await http('GET', `${svc.urls.commercial}/api/v1/health`);
    expect(health.body.memory_gateway).toBe(svc.urls.memory);
    const written = await http('POST', `${svc.urls.commercial}/api/v1/memory/upsert`, {
      headers: { 'x-did': DID },
      body: { key: 'crm.proxy.1', truth_value: { via: 'commercial' } }
    });
    expect(written.status).toBe(200);
    expect(written.body).toMatchObject({ ok: true, key: 'crm.proxy.1', version: 1 });
    const entry = await svc.db.collection('ledger').findOne({ _id: written.body.seq });
    expect(entry).toMatchObject({ key: 'crm.proxy.1', did: DID });
    const read = await http('GET', `${svc.urls.commercial}/api/v1/memory/truth/crm.proxy.1`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      key: 'crm.proxy.1',
      version: 1,
      versions: 1,
      value: { via: 'commercial' },
      seq: written.body.seq
    });
  });
});
