/**
 * The commercial gateway (COMMERCIAL_PORT, base /api/v1) over real HTTP: health with the simulation marker, the
 * decision scores against hand-computed cases (core/commercial/decision.ts), every 400, X-DID and X-Trace on every
 * answer (404s included), recorded decisions, the product matrix, and the proxy to a real memory gateway: reads and
 * writes, its 4xx passed through, and 502 when it is stopped, hangs or fails, then recovery when it is back.
 *
 * The service's MEMORY_GATEWAY_URL points at a port this suite controls: a second API process serves the memory
 * gateway there (same database), and is stopped and started again; a hanging socket and a 500 server stand in for
 * a memory gateway that is slow or broken.
 */
import http_ from 'node:http';
import net from 'node:net';
import { registerDid } from '../support/credentials';
import { http, startTestService, TestService } from '../support/service';
import { freePort } from '../../scripts/stack/process';

let svc: TestService;
let memoryPort: string;
let memoryApi: { url: string; stop(): Promise<void> } | null = null;
const DID = 'did:example:commercial';
const HUB_DID = 'did:zhongshu:hub';
const api = (path: string) => `${svc.urls.commercial}/api/v1${path}`;
const decide = (body: unknown, headers: Record<string, string> = {}) =>
  http('POST', api('/decision'), { headers, body });
const startMemoryGateway = async () => {
  memoryApi = await svc.startSecondApi({ MEMORY_PORT: memoryPort });
};
const stopMemoryGateway = async () => {
  await memoryApi?.stop();
  memoryApi = null;
};

beforeAll(async () => {
  memoryPort = String(await freePort());
  svc = await startTestService(
    { MEMORY_GATEWAY_URL: `http://127.0.0.1:${memoryPort}`, MEMORY_GATEWAY_TIMEOUT_MS: '1000' },
    { worker: false }
  );
  await registerDid(svc.urls.main, svc.adminToken, DID);
  await startMemoryGateway();
});
afterAll(async () => {
  await stopMemoryGateway();
  await svc?.close();
});

function expectGatewayHeaders(res: { headers: Headers }) {
  expect(res.headers.get('x-did')).toBe(HUB_DID);
  expect(res.headers.get('x-trace')).toMatch(/^[A-Za-z0-9._:-]{8,64}$/);
}

describe('commercial gateway', () => {
  it('GET /health: status, service, version V1.0 and the simulation marker', async () => {
    const res = await http('GET', api('/health'));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ok: true,
      status: 'up',
      version: 'V1.0',
      simulation: true,
      listener: 'commercial',
      did: HUB_DID
    });
    expect(typeof res.body.service).toBe('string');
    expectGatewayHeaders(res);
  });

  it('POST /decision scores as computed by hand, best first', async () => {
    // benefit 60..100: A 1, B 0, C 0.5 · risk 10..40: A 2/3, B 1, C 0 · cost 30..70: A 0.5, B 1, C 0
    // A = 40 + 23.333… + 12.5 = 75.83 · B = 35 + 25 = 60 · C = 20
    const res = await decide({
      options: [
        { name: 'B', benefit: 60, risk: 10, cost: 30 },
        { name: 'C', benefit: 80, risk: 40, cost: 70 },
        { name: 'A', benefit: 100, risk: 20, cost: 50 }
      ]
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ok: true,
      recommended: 'A',
      weights: { benefit: 0.4, risk: 0.35, cost: 0.25 },
      recorded: null
    });
    expect(res.body.decision).toEqual([
      { name: 'A', benefit: 100, risk: 20, cost: 50, score: 75.83 },
      { name: 'B', benefit: 60, risk: 10, cost: 30, score: 60 },
      { name: 'C', benefit: 80, risk: 40, cost: 70, score: 20 }
    ]);
    expectGatewayHeaders(res);
  });

  it('POST /decision: equal options score 100 in the order given; a single option scores 100', async () => {
    const equal = await decide({
      options: [
        { name: 'x', benefit: 2, risk: 2, cost: 2 },
        { name: 'y', benefit: 2, risk: 2, cost: 2 }
      ]
    });
    expect(equal.body.decision.map((o: { name: string; score: number }) => [o.name, o.score])).toEqual([
      ['x', 100],
      ['y', 100]
    ]);
    expect(equal.body.recommended).toBe('x');
    const single = await decide({ options: [{ name: 'solo', benefit: 0, risk: 0, cost: 0 }] });
    expect(single.body).toMatchObject({ recommended: 'solo', decision: [{ name: 'solo', score: 100 }] });
  });

  const option = { name: 'a', benefit: 1, risk: 1, cost: 1 };
  it.each([
    ['options missing', {}, 'body.options'],
    ['options empty', { options: [] }, 'body.options'],
    ['options not an array', { options: 'a' }, 'body.options'],
    ['a missing name', { options: [{ benefit: 1, risk: 1, cost: 1 }] }, 'body.options.0.name'],
    ['an empty name', { options: [{ ...option, name: '  ' }] }, 'body.options.0.name'],
    ['duplicate names', { options: [option, { ...option, benefit: 2 }] }, 'body.options.1.name'],
    ['a negative benefit', { options: [{ ...option, benefit: -1 }] }, 'body.options.0.benefit'],
    ['a negative risk', { options: [{ ...option, risk: -0.5 }] }, 'body.options.0.risk'],
    ['a negative cost', { options: [{ ...option, cost: -3 }] }, 'body.options.0.cost'],
    ['a missing cost', { options: [{ name: 'a', benefit: 1, risk: 1 }] }, 'body.options.0.cost'],
    ['a string number', { options: [{ ...option, risk: '1' }] }, 'body.options.0.risk'],
    ['a number above the maximum', { options: [{ ...option, benefit: 1e13 }] }, 'body.options.0.benefit'],
    [
      'more than 100 options',
      { options: Array.from({ length: 101 }, (_, i) => ({ ...option, name: `o${i}` })) },
      'body.options'
    ],
    ['record not a boolean', { options: [option], record: 'yes' }, 'body.record']
  ])('400 naming the field for %s', async (_what, body, field) => {
    const res = await decide(body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ok: false, error: 'invalid_request' });
    expect(res.body.fields.map((f: { field: string }) => f.field)).toContain(field);
    expectGatewayHeaders(res);
  });

  it('400 for non-finite numbers (JSON cannot carry them: 1e400 is refused by the parser) and malformed bodies', async () => {
    const huge = await http('POST', api('/decision'), {
      headers: { 'content-type': 'application/json' },
      raw: '{"options":[{"name":"a","benefit":1e400,"risk":1,"cost":1}]}'
    });
    expect(huge.status).toBe(400);
    expect(huge.body.error).toBe('number_out_of_range');
    for (const raw of [
      '{"options":[{"name":"a","benefit":NaN,"risk":1,"cost":1}]}',
      '{"options":[{"name":"a","benefit":Infinity,"risk":1,"cost":1}]}',
      '{"options":',
      'not json'
    ]) {
      const res = await http('POST', api('/decision'), { headers: { 'content-type': 'application/json' }, raw });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ ok: false, error: 'invalid_json' });
      expectGatewayHeaders(res);
    }
  });

  it('record: true appends the decision to the ledger, and needs X-DID of a registered DID', async () => {
    const body = { options: [option, { name: 'b', benefit: 2, risk: 1, cost: 1 }], record: true };
    const anonymous = await decide(body);
    expect(anonymous.status).toBe(401);
    expectGatewayHeaders(anonymous);
    expect((await decide(body, { 'x-did': 'did:example:stranger' })).status).toBe(401);
    const res = await decide(body, { 'x-did': DID });
    expect(res.status).toBe(200);
    expect(res.body.recommended).toBe('b');
    expect(res.body.recorded.key).toMatch(/^commercial\.decision\./);
    const entry = await svc.db.collection('ledger').findOne({ _id: res.body.recorded.seq });
    expect(entry).toMatchObject({
      key: res.body.recorded.key,
      event_id: res.body.recorded.event_id,
      truth_type: 'decision',
      did: DID
    });
    expect(JSON.parse(entry!.value_json)).toMatchObject({ recommended: 'b', decision: res.body.decision });
  });

  it('GET /products: the product matrix shipped by default', async () => {
    const res = await http('GET', api('/products'));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, version: 'V1.0' });
    expect(typeof res.body.matrix_name).toBe('string');
    expect(res.body.products.length).toBeGreaterThan(0);
    expectGatewayHeaders(res);
  });

  it('404 JSON with X-DID and X-Trace for unknown paths; 405 for a known path with another method', async () => {
    for (const path of ['/api/v1/nope', '/api/v1/health/', '/health', '/']) {
      const res = await http('GET', `${svc.urls.commercial}${path}`);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ ok: false, error: 'not_found' });
      expect(res.body.trace_id).toBe(res.headers.get('x-trace'));
      expectGatewayHeaders(res);
    }
    const badUrl = await http('GET', `${svc.urls.commercial}/api/v1/%`);
    expect(badUrl.status).toBe(400);
    expectGatewayHeaders(badUrl);
    const wrong = await http('GET', api('/decision'));
    expect(wrong.status).toBe(405);
    expectGatewayHeaders(wrong);
  });

  describe('memory proxy', () => {
    it('writes with the caller X-DID and reads back through the memory gateway', async () => {
      const w1 = await http('POST', api('/memory/upsert'), {
        headers: { 'x-did': DID },
        body: { key: 'shop.cart.7', truth_value: { items: 1 } }
      });
      expect(w1.status).toBe(200);
      expect(w1.body).toMatchObject({ ok: true, key: 'shop.cart.7', version: 1 });
      expectGatewayHeaders(w1);
      const w2 = await http('POST', api('/memory/upsert'), {
        headers: { 'x-did': DID, 'x-trace': 'trace-commercial-1' },
        body: { key: 'shop.cart.7', truth_value: { items: 2 } }
      });
      expect(w2.body.version).toBe(2);
      expect(w2.headers.get('x-trace')).toBe('trace-commercial-1');
      expect(await svc.db.collection('ledger').findOne({ _id: w2.body.seq })).toMatchObject({
        did: DID,
        key: 'shop.cart.7'
      });
      const r = await http('GET', api('/memory/truth/shop.cart.7'));
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        ok: true,
        key: 'shop.cart.7',
        version: 2,
        versions: 2,
        value: { items: 2 },
        seq: w2.body.seq
      });
      expectGatewayHeaders(r);
    });

    it('400 before proxying for a bad key or value; 401 without X-DID', async () => {
      const badKey = await http('GET', api('/memory/truth/nodots'));
      expect(badKey.status).toBe(400);
      expect(badKey.body.error).toBe('invalid_key');
      for (const [body, code] of [
        [{ truth_value: { a: 1 } }, 'invalid_request'],
        [{ key: 'shop.x', truth_value: 'text' }, 'value_must_be_object'],
        [{ key: 'shop.x', content: 'old' }, 'empty_value_rejected'],
        [{ key: 'truth-1.x', truth_value: { a: 1 } }, 'invalid_key']
      ] as const) {
        const res = await http('POST', api('/memory/upsert'), { headers: { 'x-did': DID }, body });
        expect(res.status).toBe(400);
        expect(res.body.error).toBe(code);
        expectGatewayHeaders(res);
      }
      expect(
        (await http('POST', api('/memory/upsert'), { body: { key: 'shop.x', truth_value: { a: 1 } } })).status
      ).toBe(401);
    });

    it("the memory gateway's 4xx pass through", async () => {
      const missing = await http('GET', api('/memory/truth/shop.none'));
      expect(missing.status).toBe(404);
      expect(missing.body).toMatchObject({ ok: false, error: 'not_found' });
      expect(missing.body.message).toMatch(/shop\.none/);
      expectGatewayHeaders(missing);
      const highRisk = await http('POST', api('/memory/upsert'), {
        headers: { 'x-did': DID },
        body: { key: 'KERNEL.EVOLUTION.DIRECTIVE.9', truth_value: { a: 1 } }
      });
      expect(highRisk.status).toBe(403);
      expect(highRisk.body.error).toBe('forbidden');
    });

    it('502 while the memory gateway is stopped, and recovery when it is back', async () => {
      await stopMemoryGateway();
      const read = await http('GET', api('/memory/truth/shop.cart.7'));
      expect(read.status).toBe(502);
      expect(read.body).toMatchObject({ ok: false, error: 'upstream_failed' });
      expect(read.body.trace_id).toBe(read.headers.get('x-trace'));
      expectGatewayHeaders(read);
      const write = await http('POST', api('/memory/upsert'), {
        headers: { 'x-did': DID },
        body: { key: 'shop.cart.7', truth_value: { items: 3 } }
      });
      expect(write.status).toBe(502);
      expect(write.body.error).toBe('upstream_failed');

      await startMemoryGateway();
      const again = await http('GET', api('/memory/truth/shop.cart.7'));
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ version: 2, value: { items: 2 } });
    });

    it('502 when the memory gateway does not answer in time or answers 5xx', async () => {
      await stopMemoryGateway();
      const held: net.Socket[] = [];
      const hanging = net.createServer((socket) => held.push(socket));
      await new Promise<void>((resolve) => hanging.listen(Number(memoryPort), '127.0.0.1', resolve));
      try {
        const res = await http('GET', api('/memory/truth/shop.cart.7'));
        expect(res.status).toBe(502);
        expect(res.body).toMatchObject({ ok: false, error: 'upstream_failed' });
        expect(res.body.message).toMatch(/did not answer within 1000 ms/);
        expectGatewayHeaders(res);
      } finally {
        held.forEach((socket) => socket.destroy());
        await new Promise((resolve) => hanging.close(resolve));
      }

      const failing = http_.createServer((_req, res) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"ok":false,"error":"internal_error","message":"boom","trace_id":"x"}');
      });
      await new Promise<void>((resolve) => failing.listen(Number(memoryPort), '127.0.0.1', resolve));
      try {
        const res = await http('POST', api('/memory/upsert'), {
          headers: { 'x-did': DID },
          body: { key: 'shop.cart.7', truth_value: { items: 4 } }
        });
        expect(res.status).toBe(502);
        expect(res.body).toMatchObject({ ok: false, error: 'upstream_failed' });
        expect(res.body.message).toMatch(/answered 500/);
      } finally {
        failing.closeAllConnections();
        await new Promise((resolve) => failing.close(resolve));
      }
      await startMemoryGateway();
      expect((await http('GET', api('/memory/truth/shop.cart.7'))).status).toBe(200);
    });
  });
});
