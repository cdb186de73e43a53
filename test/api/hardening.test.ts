/**
 * Hostile and unusual input, as an outside client sends it, over real HTTP:
 *   - what the ledger accepts it serves back exactly, through every read endpoint and the SSE stream, at the limits
 *     (depth, size, unicode, numbers); what it cannot carry exactly is refused at parse time with a precise code;
 *   - I-JSON: duplicate member names, invalid UTF-8, lone surrogates, a BOM, a foreign charset;
 *   - one error shape with X-Trace also for the framework's errors (bad URL, long parameter, big headers, 405);
 *   - identifiers accepted at creation are accepted wherever they are used;
 *   - credentials are checked before anything else; heartbeats are tolerant.
 */
import { createHash } from 'node:crypto';
import net from 'node:net';
import { canonicalJson } from '../../core/ledger/canonical-json';
import { ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import { leafBytesBound, MAX_TLOG_ENTRY_BYTES } from '../../core/tlog/tiles';
import { eventually, http, startTestService, TestService } from '../support/service';
import { heartbeat, nodeHeaders, registerNode } from '../support/federation';
import { issueHomologousToken } from '../support/credentials';

let svc: TestService;
const DID = 'did:example:hardening';
const admin = () => ({ authorization: `Bearer ${svc.adminToken}` });
const writer = () => ({ 'x-did': DID });

beforeAll(async () => {
  svc = await startTestService({ TRUTH_DAILY_QUOTA: '100000' }, { worker: false });
  expect((await http('POST', `${svc.urls.main}/admin/dids`, { headers: admin(), body: { did: DID } })).status).toBe(
    201
  );
});
afterAll(async () => {
  await svc?.close();
});

/** POST raw bytes as JSON. */
async function postRaw(url: string, body: string | Uint8Array, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, body: json, text, headers: res.headers };
}

const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
let keyCounter = 0;
const truthBody = (valueText: string, key = `hardening.k${keyCounter++}`) =>
  `{"key":"${key}","value":${valueText},"truth_type":"data"}`;
/** Key of the value written at a limit. */
const limitKey = (name: string) => `hardening.limit.${name}`;
/**
 * The largest value an entry takes (`extra` 0) or one byte more: the entry, with its key, DID and metadata, fills a
 * transparency-log entry bundle's 65,535 bytes (docs/transparency.md#entry-bytes), which is below the 64 KiB of
 * value the body limit alone would let through.
 */
const blobFilling = (extra: number) => {
  const text = (n: number) => JSON.stringify({ blob: 'x'.repeat(n) });
  const fields = { kind: 'truth' as const, key: limitKey('size'), truth_type: 'data', did: DID };
  return text(MAX_TLOG_ENTRY_BYTES - leafBytesBound(fields, text(0)) + extra);
};

describe('the ledger serves back everything it accepts', () => {
  // The body is level 1, so its value may nest JSON_MAX_DEPTH - 1 (63) levels.
  const atLimits: Record<string, string> = {
    depth: nested(63),
    size: blobFilling(0),
    unicode: JSON.stringify({
      'a.b': { $where: 'x\u0000y' },
      rtl: 'שלום\u200f',
      astral: '😀𝄞',
      nested: [[[]], [{}]],
      '': 'empty key',
      esc: '"\\\n\t'
    }),
    numbers:
      '{"max":9007199254740991,"min":-9007199254740991,"tiny":5e-324,"huge":1.7976931348623157e308,"neg0":-0,"exp":1E2,"frac":1.50,"third":0.30000000000000004}'
  };
  const written: Record<string, { seq: number; value: unknown; key: string }> = {};

  beforeAll(async () => {
    for (const [name, text] of Object.entries(atLimits)) {
      const body = truthBody(text, limitKey(name));
      const res = await postRaw(`${svc.urls.main}/api/report/truth`, body, writer());
      expect({ name, status: res.status, body: res.body }).toMatchObject({ name, status: 200 });
      // What a reader gets back is the canonical form (RFC 8785): the same value; -0 is written 0, 1.50 is 1.5.
      written[name] = {
        seq: res.body.seq,
        value: JSON.parse(canonicalJson(JSON.parse(text))),
        key: JSON.parse(body).key
      };
    }
  });

  it('refuses a value one byte longer than an entry holds with 413, writing nothing', async () => {
    const before = (await http('GET', `${svc.urls.main}/api/status`)).body.truth_count;
    const res = await postRaw(
      `${svc.urls.main}/api/report/truth`,
      truthBody(blobFilling(1), limitKey('size')),
      writer()
    );
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ ok: false, error: 'payload_too_large' });
    expect((await http('GET', `${svc.urls.main}/api/status`)).body.truth_count).toBe(before);
  });

  const expectEntry = (name: string, entry: any) => {
    const w = written[name]!;
    expect(entry.value).toEqual(w.value);
    // The leaf hash a reader recomputes from what it was served matches the stored one.
    const leaf = createHash('sha256')
      .update(Buffer.concat([Buffer.from([0]), ledgerLeafBytes(entry, canonicalJson(entry.value))]))
      .digest('hex');
    expect(leaf).toBe(entry.leaf_hash);
  };

  it.each(Object.keys(atLimits))(
    '%s: through /api/ledger, /api/truth, /api/report/truths/list, /api/sub-l0 and /api/proof/inclusion',
    async (name) => {
      const w = written[name]!;
      const ledger = await http('GET', `${svc.urls.main}/api/ledger?limit=200`);
      expect(ledger.status).toBe(200);
      expectEntry(
        name,
        ledger.body.entries.find((e: any) => e.seq === w.seq)
      );

      const truth = await http('GET', `${svc.urls.main}/api/truth?key=${w.key}`);
      expect(truth.status).toBe(200);
      expectEntry(name, truth.body.results[0]);

      const list = await http('GET', `${svc.urls.main}/api/report/truths/list?limit=200`);
      expect(list.status).toBe(200);
      expect(list.body.truths.find((t: any) => t.seq === w.seq).truth_value).toEqual(w.value);

      const page = await http('GET', `${svc.urls.main}/api/sub-l0?after=${w.seq - 1}&limit=1`);
      expect(page.status).toBe(200);
      expectEntry(name, page.body.entries[0]);

      const proof = await http('GET', `${svc.urls.main}/api/proof/inclusion?seq=${w.seq}`);
      expect(proof.status).toBe(200);
      expectEntry(name, proof.body.entry);
    }
  );

  it('streams every one of them over SSE', async () => {
    const controller = new AbortController();
    const res = await fetch(`${svc.urls.main}/api/sub-l0?after=0`, {
      headers: { accept: 'text/event-stream' },
      signal: controller.signal
    });
    const reader = res.body!.getReader();
    const want = new Set(Object.values(written).map((w) => w.seq));
    const seen = new Map<number, any>();
    let buffer = '';
    const decoder = new TextDecoder();
    while ([...want].some((s) => !seen.has(s))) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.split('\n').find((l) => l.startsWith('data: '));
        if (data) {
          const entry = JSON.parse(data.slice(6));
          seen.set(entry.seq, entry);
        }
      }
    }
    controller.abort();
    for (const [name, w] of Object.entries(written)) expectEntry(name, seen.get(w.seq));
  });

  it('verifies the whole ledger', async () => {
    const verify = await http('GET', `${svc.urls.main}/api/verify`);
    expect(verify.body).toMatchObject({ ok: true, consistent: true });
  });
});

describe('what the ledger cannot carry exactly is refused at parse time', () => {
  const refused: [string, string, number, string][] = [
    ['nested one level past the limit', nested(64), 400, 'json_too_deep'],
    ['nested 5,000 levels', nested(5000), 400, 'json_too_deep'],
    ['nested 10,000 levels', nested(10_000), 400, 'json_too_deep'],
    ['1e400', '{"n":1e400}', 400, 'number_out_of_range'],
    ['-1e400', '{"n":-1e400}', 400, 'number_out_of_range'],
    ['1e-400', '{"n":1e-400}', 400, 'number_out_of_range'],
    ['an integer past 2^53', '{"n":18446744073709551617}', 400, 'number_out_of_range'],
    ['2^53', '{"n":9007199254740992}', 400, 'number_out_of_range'],
    ['more precision than a double', '{"n":3.141592653589793238}', 400, 'number_too_precise'],
    ['a lone high surrogate in a name', '{"\\ud800":1}', 400, 'lone_surrogate'],
    ['a lone low surrogate in a string', '{"s":"\\udc00"}', 400, 'lone_surrogate']
  ];

  it.each(refused)('%s: %#', async (_what, value, status, code) => {
    for (const url of [svc.urls.main, svc.urls.backup]) {
      const before = (await http('GET', `${svc.urls.main}/api/status`)).body.truth_count;
      const res = await postRaw(`${url}/api/report/truth`, truthBody(value), writer());
      expect({ status: res.status, error: res.body?.error }).toEqual({ status, error: code });
      expect(res.body.trace_id).toBe(res.headers.get('x-trace'));
      expect(res.text).not.toMatch(/node_modules|\.ts:\d+/);
      expect((await http('GET', `${svc.urls.main}/api/status`)).body.truth_count).toBe(before);
    }
  });

  it('names where the problem is', async () => {
    const res = await postRaw(`${svc.urls.main}/api/report/truth`, truthBody('{"a":{"b":[1,2,1e400]}}'), writer());
    expect(res.body.fields).toEqual([{ field: 'body.value.a.b.2', message: expect.stringContaining('1e400') }]);
  });
});

describe('I-JSON on every JSON route', () => {
  const routes = () => [
    { url: `${svc.urls.main}/api/report/truth`, headers: writer() },
    { url: `${svc.urls.main}/a2a/register`, headers: {} },
    { url: `${svc.urls.main}/admin/dids`, headers: admin() }
  ];

  it('refuses duplicate member names instead of keeping the last', async () => {
    for (const { url, headers } of routes()) {
      const res = await postRaw(url, '{"key":"a.first","key":"a.second","value":{}}', headers);
      expect({ url, status: res.status, error: res.body.error }).toEqual({
        url,
        status: 400,
        error: 'duplicate_member'
      });
      expect(res.body.message).toContain('"key"');
    }
  });

  it('refuses invalid UTF-8 instead of storing U+FFFD', async () => {
    for (const { url, headers } of routes()) {
      const bytes = Buffer.concat([
        Buffer.from('{"key":"a.b","value":{"s":"'),
        Buffer.from([0xc3, 0x28]),
        Buffer.from('"}}')
      ]);
      const res = await postRaw(url, bytes, headers);
      expect({ url, status: res.status, error: res.body.error }).toEqual({ url, status: 400, error: 'invalid_utf8' });
    }
  });

  it('refuses a byte order mark and a charset other than UTF-8; accepts charset=utf-8', async () => {
    const body = truthBody('{"x":1}');
    const bom = await postRaw(
      `${svc.urls.main}/api/report/truth`,
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body)]),
      writer()
    );
    expect({ status: bom.status, error: bom.body.error }).toEqual({ status: 400, error: 'invalid_json' });
    const utf16 = await postRaw(`${svc.urls.main}/api/report/truth`, body, {
      ...writer(),
      'content-type': 'application/json; charset=utf-16'
    });
    expect({ status: utf16.status, error: utf16.body.error }).toEqual({ status: 415, error: 'unsupported_media_type' });
    const utf8 = await postRaw(`${svc.urls.main}/api/report/truth`, body, {
      ...writer(),
      'content-type': 'application/json; charset=UTF-8'
    });
    expect(utf8.status).toBe(200);
  });

  it('refuses control characters and bidirectional overrides in human-readable fields', async () => {
    for (const name of ['evil\u202Egnp.exe', 'bell\u0007', 'two\nlines', 'iso\u2066late']) {
      const res = await http('POST', `${svc.urls.main}/a2a/register`, { body: { name, brand: { code: 'custom' } } });
      expect({ name, status: res.status, field: res.body.fields?.[0]?.field }).toEqual({
        name,
        status: 400,
        field: 'body.name'
      });
    }
    const label = await http('POST', `${svc.urls.main}/admin/dids`, {
      headers: admin(),
      body: { did: 'did:example:label', label: 'x\u202Ey' }
    });
    expect(label.status).toBe(400);
    const fine = await http('POST', `${svc.urls.main}/a2a/register`, {
      body: { name: 'ノード 東京 – שלום', brand: { code: 'custom' } }
    });
    expect(fine.status).toBe(201);
  });
});

describe('one error shape for the framework errors too', () => {
  const expectShape = (res: { status: number; body: any; headers: Headers }, status: number, error: string) => {
    expect({ status: res.status, error: res.body?.error, ok: res.body?.ok }).toEqual({ status, error, ok: false });
    expect(res.headers.get('x-trace')).toBeTruthy();
    expect(res.body.trace_id).toBe(res.headers.get('x-trace'));
  };

  it('a path parameter over the router limit: 414', async () => {
    expectShape(await http('GET', `${svc.urls.main}/a2a/nodes/${'x'.repeat(600)}`), 414, 'uri_too_long');
  });

  it('a malformed URL: 400', async () => {
    expectShape(await http('GET', `${svc.urls.main}/%`), 400, 'invalid_request');
    expectShape(await http('GET', `${svc.urls.main}/a2a/nodes/%zz`), 400, 'invalid_request');
  });

  it('a 20 KB header: 431', async () => {
    expectShape(
      await http('GET', `${svc.urls.main}/health`, { headers: { 'x-big': 'y'.repeat(20 * 1024) } }),
      431,
      'headers_too_large'
    );
  });

  it('a malformed request line: 400 in the shape', async () => {
    const port = Number(new URL(svc.urls.main).port);
    const raw = await new Promise<string>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write('GARBAGE\r\n\r\n'));
      let text = '';
      socket.on('data', (d) => (text += d));
      socket.on('close', () => resolve(text));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toMatch(/X-Trace: [0-9a-f]+/);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({ ok: false, error: 'invalid_request' });
  });

  it('a known path with another method: 405 with Allow', async () => {
    const res = await http('DELETE', `${svc.urls.main}/api/status`);
    expectShape(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    const post = await http('GET', `${svc.urls.main}/api/report/truth`);
    expectShape(post, 405, 'method_not_allowed');
    expect(post.headers.get('allow')).toBe('POST');
    expectShape(await http('GET', `${svc.urls.main}/no/such/path`), 404, 'not_found');
  });
});

describe('integer query parameters', () => {
  it('accept every value the OpenAPI document allows, up to 2^53-1, and refuse one past it', async () => {
    const token = await issueHomologousToken(svc.urls.main, svc.adminToken, 'big-offsets');
    const largest = String(Number.MAX_SAFE_INTEGER);
    for (const [path, headers] of [
      [`/a2a/nodes?offset=${largest}`, {}],
      [`/a2a/review/queue?offset=${largest}`, { 'x-zr-token': token }],
      [`/api/sub-l0?after=${largest}`, {}]
    ] as const) {
      const res = await http('GET', `${svc.urls.main}${path}`, { headers });
      expect([path, res.status]).toEqual([path, 200]);
    }
    expect((await http('GET', `${svc.urls.main}/api/proof/inclusion?seq=${largest}`)).status).toBe(404);
    const past = await http('GET', `${svc.urls.main}/a2a/nodes?offset=9007199254740992`);
    expect(past.status).toBe(400);
    expect(past.body.fields[0].field).toBe('querystring.offset');
  });
});

describe('identifier lengths agree across routes', () => {
  it('a DID of the longest accepted length can be registered, used and revoked; one longer is refused at creation', async () => {
    const longest = `did:example:${'a'.repeat(256 - 12)}`;
    expect(longest).toHaveLength(256);
    expect(
      (await http('POST', `${svc.urls.main}/admin/dids`, { headers: admin(), body: { did: longest } })).status
    ).toBe(201);
    expect(
      (
        await http('POST', `${svc.urls.main}/api/report/truth`, {
          headers: { 'x-did': longest },
          body: { key: 'hardening.long', value: { a: 1 } }
        })
      ).status
    ).toBe(200);
    const revoked = await http('POST', `${svc.urls.main}/admin/dids/${encodeURIComponent(longest)}/revoke`, {
      headers: admin()
    });
    expect(revoked.status).toBe(200);
    expect(
      (
        await http('POST', `${svc.urls.main}/api/report/truth`, {
          headers: { 'x-did': longest },
          body: { key: 'hardening.long2', value: { a: 1 } }
        })
      ).status
    ).toBe(401);

    const tooLong = await http('POST', `${svc.urls.main}/admin/dids`, {
      headers: admin(),
      body: { did: `${longest}b` }
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.fields[0]).toMatchObject({ field: 'body.did', message: expect.stringContaining('256') });
  });

  it('a DID holding percent-encoded characters is revoked by its path segment with the % escaped', async () => {
    for (const did of ['did:web:example.com%3A3000', 'did:example:%0A1']) {
      expect((await http('POST', `${svc.urls.main}/admin/dids`, { headers: admin(), body: { did } })).status).toBe(201);
      // The % sent unescaped is read as an escape: another DID (not registered) or no DID at all (a line feed).
      const unescaped = await http('POST', `${svc.urls.main}/admin/dids/${did.replaceAll(':', '%3A')}/revoke`, {
        headers: admin()
      });
      expect([404, 400]).toContain(unescaped.status);
      const revoked = await http('POST', `${svc.urls.main}/admin/dids/${encodeURIComponent(did)}/revoke`, {
        headers: admin()
      });
      expect(revoked.status).toBe(200);
      expect(
        (
          await http('POST', `${svc.urls.main}/api/report/truth`, {
            headers: { 'x-did': did },
            body: { key: 'hardening.pct', value: { a: 1 } }
          })
        ).status
      ).toBe(401);
    }
  });
});

describe('credentials before anything else', () => {
  it('a heartbeat with wrong credentials and a bad body is 401, not 400', async () => {
    const res = await http('POST', `${svc.urls.main}/a2a/heartbeat`, {
      headers: { 'x-external-node': 'ext-custom-000999', 'x-external-key': 'nk_forged' },
      body: { resources: { cpu_percent: 'lots' } }
    });
    expect(res.status).toBe(401);
    const malformed = await postRaw(`${svc.urls.main}/a2a/heartbeat`, '{"resources":', {});
    expect(malformed.status).toBe(401);
  });

  it('anonymous callers learn nothing about which identifiers are well formed', async () => {
    for (const [method, path] of [
      ['POST', '/admin/dids/not-a-did/revoke'],
      ['POST', '/admin/api-keys/zz/revoke'],
      ['POST', '/admin/api-keys/zz/regenerate'],
      ['POST', '/admin/peers'],
      ['GET', '/api/truth/approvals/bad'],
      ['POST', '/api/truth/approvals/bad/approve'],
      ['POST', '/api/truth/approvals/bad/reject']
    ] as const) {
      const res = await http(method, `${svc.urls.main}${path}`, method === 'POST' ? { body: { nonsense: true } } : {});
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
    }
  });

  it('every operation in /openapi.json that is not public refuses missing and forged credentials', async () => {
    const doc = (await http('GET', `${svc.urls.main}/openapi.json`)).body;
    const forged = {
      'x-did': 'did:example:forged',
      'x-zr-token': 'zr_forged',
      'x-capture-token': 'cap_forged',
      authorization: 'Bearer forged',
      'x-external-node': 'ext-custom-000001',
      'x-external-key': 'nk_forged'
    };
    const publicPaths = new Set(
      (
        (await http('GET', `${svc.urls.main}/a2a/endpoints`)).body.endpoints as {
          method: string;
          path: string;
          auth: string;
        }[]
      )
        .filter((e) => e.auth === 'none')
        .map((e) => `${e.method} ${e.path}`)
    );
    let checked = 0;
    for (const [template, operations] of Object.entries<Record<string, { security?: unknown[] }>>(doc.paths)) {
      for (const [method, op] of Object.entries(operations)) {
        const fastifyPath = template.replace(/\{(\w+)\}/g, ':$1');
        const declaredPublic = op.security
          ? op.security.length === 0 || op.security.some((s) => Object.keys(s as object).length === 0)
          : undefined;
        if (declaredPublic ?? publicPaths.has(`${method.toUpperCase()} ${fastifyPath}`)) continue;
        if (declaredPublic === undefined && !(await looksProtected(method, template))) continue;
        const url = `${svc.urls.main}${template.replace(/\{\w+\}/g, 'x')}`;
        for (const headers of [{}, forged]) {
          const res = await http(method.toUpperCase(), url, {
            headers,
            ...(method === 'get' ? {} : { body: { bad: ['body'] } })
          });
          expect({
            op: `${method} ${template}`,
            forged: headers !== undefined && Object.keys(headers).length > 0,
            status: [401, 403].includes(res.status)
          }).toEqual({
            op: `${method} ${template}`,
            forged: Object.keys(headers).length > 0,
            status: true
          });
        }
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(10);
  });

  /** Without a declared security list, an operation counts as protected when the directory does not call it public. */
  async function looksProtected(method: string, template: string): Promise<boolean> {
    const res = await http(
      method.toUpperCase(),
      `${svc.urls.main}${template.replace(/\{\w+\}/g, 'x')}`,
      method === 'get' ? {} : { body: {} }
    );
    return res.status === 401 || res.status === 403;
  }
});

describe('heartbeats are liveness first', () => {
  it('counts a heartbeat with no body, and with figures the hub does not know', async () => {
    const node = await registerNode(svc.urls.main, 'tolerant');
    const bare = await fetch(`${svc.urls.main}/a2a/heartbeat`, { method: 'POST', headers: nodeHeaders(node) });
    expect(bare.status).toBe(200);
    const emptyJson = await postRaw(`${svc.urls.main}/a2a/heartbeat`, '', nodeHeaders(node));
    expect(emptyJson.status).toBe(200);
    // White space alone is not an empty body but malformed JSON (RFC 8259 §2), as schemathesis expects.
    const blank = await postRaw(`${svc.urls.main}/a2a/heartbeat`, '\n', nodeHeaders(node));
    expect({ status: blank.status, error: blank.body.error }).toEqual({ status: 400, error: 'invalid_json' });

    const res = await heartbeat(svc.urls.main, node, {
      resources: { cpu_percent: 5, npu_count: 2, npu_util_percent: 40 },
      performance: { latency_ms: 9, tokens_per_s: 310.5 },
      uptime_s: 1234,
      firmware: 'v2',
      nested: { not: 'a scalar' },
      extra: { queue_depth: 3 }
    });
    expect(res.status).toBe(200);
    expect(res.body.ignored_fields).toEqual(['nested']);
    // A node's figures reach the directory with its shard's next samples write (at most PRESENCE_SAMPLES_MS, 5 s,
    // after the earlier beats' samples: docs/federation.md#how-a-heartbeat-stays-cheap).
    const latest = await eventually(
      async () => {
        const shown = (await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`)).body.node.latest;
        return shown?.resources?.cpu_percent === 5 ? shown : undefined;
      },
      15000,
      'the heartbeat figures in the directory'
    );
    expect(latest).toMatchObject({
      resources: { cpu_percent: 5 },
      performance: { latency_ms: 9 },
      extra: {
        'resources.npu_count': 2,
        'resources.npu_util_percent': 40,
        'performance.tokens_per_s': 310.5,
        uptime_s: 1234,
        firmware: 'v2',
        queue_depth: 3
      }
    });
    expect(latest.resources).not.toHaveProperty('npu_count');

    // Known figures are still validated.
    expect((await heartbeat(svc.urls.main, node, { resources: { cpu_percent: 140 } })).status).toBe(400);
  });

  it('bounds every figure the dashboard adds up, so its totals stay finite', async () => {
    // Two nodes reporting 1e308 used to make the dashboard's sums Infinity, and the dashboard answered 500.
    const nodes = [await registerNode(svc.urls.main, 'huge-a'), await registerNode(svc.urls.main, 'huge-b')];
    for (const node of nodes) {
      const refused = await heartbeat(svc.urls.main, node, {
        resources: { memory_used_gb: 1.7e308 },
        performance: { latency_ms: 1.7e308 }
      });
      expect(refused.status).toBe(400);
      expect(JSON.stringify(refused.body)).toMatch(/memory_used_gb|latency_ms/);
      expect(
        (
          await heartbeat(svc.urls.main, node, {
            resources: { memory_used_gb: 1_000_000 },
            performance: { latency_ms: 3_600_000 }
          })
        ).status
      ).toBe(200);
    }
    const dashboard = await http('GET', `${svc.urls.main}/a2a/dashboard`);
    expect(dashboard.status).toBe(200);
    expect(Number.isFinite(dashboard.body.resources.memory_used_gb_total)).toBe(true);
  });

  it('keeps the extra figures bounded', async () => {
    const node = await registerNode(svc.urls.main, 'chatty');
    const many = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`figure_${i}`, i]));
    const res = await heartbeat(svc.urls.main, node, many);
    expect(res.status).toBe(200);
    expect(res.body.ignored_fields).toHaveLength(50 - 32);
    const latest = await eventually(
      async () => (await http('GET', `${svc.urls.main}/a2a/nodes/${node.node_id}`)).body.node.latest ?? undefined
    );
    expect(Object.keys(latest.extra)).toHaveLength(32);
  });
});
