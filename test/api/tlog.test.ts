/**
 * The ledger as a C2SP transparency log over real HTTP: the signed checkpoint and its verifier key, tiles and entry
 * bundles (cache headers, 404 past the tree, 400 for bad paths), writes too large for an entry bundle refused, the
 * Go verifier built on the standard libraries (sumdb/note, sumdb/tlog, transparency-dev) accepting the log and the
 * consistency of two checkpoints and refusing tampered tiles, and the hub refusing to sign over a forked database.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { registerDid } from '../support/credentials';
import { http as request, startTestService, TestService } from '../support/service';
import { noteVerifierKey, parseCheckpoint, verifyNote } from '../../core/tlog/signed-note.node';
import { leafHash } from '../../core/ledger/merkle.node';
import { goAvailable, runTlogVerifier, tlogVerifierBinary } from '../support/tlog-verifier';

let svc: TestService;
const DID = 'did:example:tlog-writer';
let written = 0;

/** Writes `n` truths over HTTP, a few at a time. */
async function writeTruths(n: number): Promise<void> {
  const one = async (i: number) => {
    const res = await request('POST', `${svc.urls.main}/api/report/truth`, {
      headers: { 'x-did': DID },
      body: { key: `tlog.test.${written + i}`, value: { i: written + i, note: 'x'.repeat(i % 50) }, truth_type: 'data' }
    });
    if (res.status !== 200) throw new Error(`write ${i}: ${res.status} ${res.text}`);
  };
  for (let at = 0; at < n; at += 8)
    await Promise.all(Array.from({ length: Math.min(8, n - at) }, (_, k) => one(at + k)));
  written += n;
}

const tlog = () => `${svc.urls.main}/tlog`;
const status = async () => (await request('GET', `${svc.urls.main}/api/status`)).body;
const checkpoint = async () => {
  const res = await fetch(`${tlog()}/checkpoint`);
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
};
const tile = async (p: string) => {
  const res = await fetch(`${tlog()}/tile/${p}`);
  return { status: res.status, cache: res.headers.get('cache-control'), bytes: Buffer.from(await res.arrayBuffer()) };
};

beforeAll(async () => {
  svc = await startTestService({ TRUTH_WRITE_TIMEOUT_MS: '60000' }, { worker: false });
  await registerDid(svc.urls.main, svc.adminToken, DID);
  await writeTruths(300); // a full level-0 tile and a partial one
}, 240_000);
afterAll(async () => {
  await svc?.close();
});

describe('GET /tlog/checkpoint', () => {
  it('is a C2SP checkpoint signed by the key /api/status and /tlog/verifier-key publish', async () => {
    const s = await status();
    const key = (await request('GET', `${tlog()}/verifier-key`)).text.trim();
    expect(s.tlog.verifier_key).toBe(key);
    // PUBLIC_URL's host and path, no scheme, then /tlog.
    expect(s.tlog.origin).toBe(`${new URL(svc.env.PUBLIC_URL ?? svc.urls.main).host}/tlog`);

    // The key id is SHA-256(name || 0x0A || 0x01 || public key)[:4] (C2SP signed-note), computed here independently.
    const publicKey = Buffer.from(s.public_key.base64, 'base64');
    const id = createHash('sha256')
      .update(Buffer.concat([Buffer.from(`${s.tlog.origin}\n\x01`, 'latin1'), publicKey]))
      .digest()
      .subarray(0, 4)
      .toString('hex');
    expect(key).toBe(`${s.tlog.origin}+${id}+${Buffer.concat([Buffer.from([1]), publicKey]).toString('base64')}`);

    const cp = await checkpoint();
    expect(cp.status).toBe(200);
    expect(cp.type).toBe('text/plain; charset=utf-8');
    const text = verifyNote(cp.text, key);
    expect(text).not.toBeNull();
    const parsed = parseCheckpoint(text!);
    expect(parsed.origin).toBe(s.tlog.origin);
    expect(parsed.size).toBeGreaterThanOrEqual(300);
    expect(cp.text).toMatch(new RegExp(`\\n\\n\u2014 ${s.tlog.origin.replace(/[.]/g, '\\.')} [A-Za-z0-9+/=]{92}\\n$`));
    // The same tree gives the same checkpoint (the stored one), and its root is the ledger's.
    expect((await checkpoint()).text).toBe(cp.text);
    const head = await status();
    expect(parsed.size).toBe(head.truth_count);
    expect(parsed.rootHex).toBe(head.merkle_root);
  });
});

describe('GET /tlog/tile/…', () => {
  it('serves full tiles immutable and partial ones briefly, each hash the stored leaf hash', async () => {
    const full = await tile('0/000');
    expect(full.status).toBe(200);
    expect(full.cache).toBe('public, max-age=31536000, immutable');
    expect(full.bytes.length).toBe(256 * 32);
    const entry = (await request('GET', `${svc.urls.main}/api/proof/inclusion?seq=5`)).body;
    expect(full.bytes.subarray(4 * 32, 5 * 32).toString('hex')).toBe(entry.leaf_hash);

    const size = (await status()).truth_count as number;
    const partial = await tile(`0/001.p/${size - 256}`);
    expect(partial.status).toBe(200);
    expect(partial.cache).toBe('public, max-age=1');
    expect(partial.bytes.length).toBe((size - 256) * 32);
    expect((await tile('1/000.p/1')).bytes.length).toBe(32);
  });

  it('serves entry bundles whose entries hash to the leaves of the level-0 tile', async () => {
    const bundle = await tile('entries/000');
    expect(bundle.status).toBe(200);
    expect(bundle.cache).toBe('public, max-age=31536000, immutable');
    const leaves = (await tile('0/000')).bytes;
    let at = 0;
    for (let i = 0; i < 256; i++) {
      const length = bundle.bytes.readUInt16BE(at);
      const bytes = bundle.bytes.subarray(at + 2, at + 2 + length);
      at += 2 + length;
      expect(leafHash(bytes).equals(leaves.subarray(i * 32, (i + 1) * 32))).toBe(true);
      if (i === 0) expect(JSON.parse(bytes.toString('utf8'))).toMatchObject({ seq: 1 });
    }
    expect(at).toBe(bundle.bytes.length);
  });

  it('404 for a tile the tree does not hold yet, 400 for a malformed path', async () => {
    const size = (await status()).truth_count as number;
    for (const p of ['0/002', `0/001.p/${size - 256 + 1}`, '1/000', '2/000.p/1', 'entries/x999/999', '63/000']) {
      const res = await request('GET', `${tlog()}/tile/${p}`);
      expect([p, res.status, res.body?.error]).toEqual([p, 404, 'not_found']);
    }
    for (const p of [
      '0/1',
      '00/000',
      '64/000',
      '0/x001',
      '0/001.p/0',
      '0/001.p/256',
      'entries/001.p/07',
      'foo/000',
      '0/',
      '0/x999/x999/x999/x999/x999/x999/999'
    ]) {
      const res = await request('GET', `${tlog()}/tile/${p}`);
      expect([p, res.status, res.body?.ok, res.body?.error]).toEqual([p, 400, false, 'invalid_request']);
      expect(res.body.trace_id).toEqual(expect.any(String));
    }
  });
});

describe('entry bytes', () => {
  it('413 for a write whose entry would not fit an entry bundle (65,535 bytes)', async () => {
    const res = await request('POST', `${svc.urls.main}/api/report/truth`, {
      headers: { 'x-did': DID },
      body: { key: 'tlog.test.large', value: { blob: 'y'.repeat(65_400) } }
    });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ ok: false, error: 'payload_too_large', limit: 65_535 });
    expect(res.body.message).toMatch(/65535/);
  });
});

/** A proxy to the hub that flips one byte of the responses whose path matches `tamper`. */
async function tamperingProxy(target: string, tamper: RegExp): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    void (async () => {
      const upstream = await fetch(`${target}${req.url}`);
      const body = Buffer.from(await upstream.arrayBuffer());
      if (tamper.test(req.url ?? '') && body.length > 40) body[body.length - 5]! ^= 0x01;
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'text/plain' });
      res.end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const describeGo = goAvailable() ? describe : describe.skip;
if (!goAvailable()) console.warn('tlog.test.ts: `go` is not installed; the Go verifier tests are skipped');

describeGo('the Go verifier (sumdb/note, sumdb/tlog, transparency-dev/formats and merkle)', () => {
  let bin: string;
  let key: string;
  let dir: string;
  beforeAll(async () => {
    bin = tlogVerifierBinary();
    key = (await status()).tlog.verifier_key;
    dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'tlog-'));
  }, 300_000);

  it('verifies the checkpoint, every entry, and consistency with a checkpoint taken before more writes', async () => {
    const first = await runTlogVerifier(bin, ['-url', tlog(), '-key', key, '-save', path.join(dir, 'first')]);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/^OK [\w.]+:\d+\/tlog: \d+ entries, root [0-9a-f]{64}$/m);

    await writeTruths(20);
    const second = await runTlogVerifier(bin, ['-url', tlog(), '-key', key, '-old', path.join(dir, 'first')]);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect(second.stdout).toMatch(/consistent with the checkpoint of \d+ entries/);
  }, 120_000);

  it.each([
    ['entry bundle', /\/tile\/entries\//, /entry \d+ \(seq \d+\): its bytes hash to/],
    ['hash tile', /\/tile\/0\//, /FAIL: .*(tile|tree hash|leaf|inclusion)/i]
  ])(
    'fails with a clear message on a tampered %s',
    async (_what, tamper, message) => {
      const proxy = await tamperingProxy(svc.urls.main, tamper);
      try {
        const res = await runTlogVerifier(bin, ['-url', `${proxy.url}/tlog`, '-key', key]);
        expect(res.code).toBe(1);
        expect(res.stderr).toMatch(message);
      } finally {
        await proxy.close();
      }
    },
    120_000
  );

  it('fails on a checkpoint signed by another key', async () => {
    const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!;
    const other = noteVerifierKey(key.split('+')[0]!, Buffer.from(raw, 'base64url'));
    const res = await runTlogVerifier(bin, ['-url', tlog(), '-key', other]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/FAIL: checkpoint: signature does not verify/);
  }, 60_000);
});

describe('two replicas signing at once', () => {
  it('sign one chain: every checkpoint verifies and no size has two roots', async () => {
    const second = await svc.startSecondApi();
    try {
      const key = (await status()).tlog.verifier_key as string;
      await writeTruths(5);
      const notes = await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          const res = await fetch(`${i % 2 ? second.url : svc.urls.main}/tlog/checkpoint`);
          expect(res.status).toBe(200);
          return res.text();
        })
      );
      const roots = new Map<number, Set<string>>();
      for (const note of notes) {
        const text = verifyNote(note, key);
        expect(text).not.toBeNull();
        const { size, rootHex } = parseCheckpoint(text!);
        roots.set(size, (roots.get(size) ?? new Set()).add(rootHex));
      }
      for (const set of roots.values()) expect(set.size).toBe(1);
    } finally {
      await second.stop();
    }
  }, 120_000);
});

describe('an entry written before the 65,535-byte limit', () => {
  it('makes its bundle 422 entry_too_large naming it, while the hash tiles still cover it', async () => {
    // Such an entry cannot be written any more: put one in place behind the hub's back, and back afterwards.
    const entries = svc.db.collection<{ _id: number; value_json: string }>('ledger');
    const original = (await entries.findOne({ _id: 3 }))!.value_json;
    await entries.updateOne({ _id: 3 }, { $set: { value_json: JSON.stringify({ blob: 'z'.repeat(70_000) }) } });
    // Its bundle was never served whole (no bundle holding it could be): drop what the earlier tests' reads kept.
    const kept = svc.db.collection<{ _id: string }>('tlog_tiles');
    await kept.deleteOne({ _id: 'entries/0' });
    try {
      const res = await request('GET', `${tlog()}/tile/entries/000`);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ ok: false, error: 'entry_too_large', seq: 3 });
      expect(res.body.message).toMatch(/\/api\/proof\/inclusion\?seq=3/);
      expect((await tile('0/000')).status).toBe(200);
      expect(await kept.findOne({ _id: 'entries/0' })).toBeNull();
    } finally {
      await entries.updateOne({ _id: 3 }, { $set: { value_json: original } });
    }
  });
});

// Last: these fork this suite's database.
describe('a forked ledger', () => {
  it('is refused a checkpoint while a stored subtree hash was rewritten, and signed again once it is restored', async () => {
    const entries = svc.db.collection<{ _id: number; completed: string[] }>('ledger');
    const original = (await entries.findOne({ _id: 256 }))!.completed;
    const forged = [...original];
    forged[8] = createHash('sha256').update('another subtree').digest('hex');
    await entries.updateOne({ _id: 256 }, { $set: { completed: forged } });
    await writeTruths(2);
    const res = await request('GET', `${tlog()}/checkpoint`);
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ ok: false, error: 'ledger_fork', fork: { recomputed: expect.any(String) } });
    expect(res.body.message).toMatch(/the stored subtrees of the tree of \d+ hash to/);

    await entries.updateOne({ _id: 256 }, { $set: { completed: original } });
    expect((await checkpoint()).status).toBe(200);
  }, 60_000);

  it('is refused a checkpoint once the root at the signed size changed: 500 ledger_fork naming the signed size and the root found there', async () => {
    const signed = parseCheckpoint((await checkpoint()).text);
    const entries = svc.db.collection<{ _id: number; root: string }>('ledger');
    const forged = createHash('sha256').update('another history').digest('hex');
    // Behind the hub's back: the root at the signed size now says another history was there.
    await entries.updateOne({ _id: signed.size }, { $set: { root: forged } });
    // Not grown: the signed checkpoint is still served as it was.
    expect((await checkpoint()).status).toBe(200);

    await writeTruths(3);
    const res = await request('GET', `${tlog()}/checkpoint`);
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({
      ok: false,
      error: 'ledger_fork',
      fork: { signed_size: signed.size, signed_root: signed.rootHex, stored_root: forged }
    });
    expect(res.body.message).toMatch(new RegExp(`checkpoint ${signed.size} was signed with root`));
    // Still refused on the next request: nothing was signed meanwhile.
    expect((await request('GET', `${tlog()}/checkpoint`)).status).toBe(500);
  }, 60_000);
});
