/**
 * The hub as a C2SP tlog-witness over real HTTP: hub B witnesses hub A's log (configured with A's origin and
 * verifier key from GET /tlog/verifier-key) and a log signed here with a test key. B cosigns A's checkpoints with a
 * cosignature/v1 that verifies (checked here in TypeScript, and by the Go verifier with transparency-dev/formats'
 * NewVerifierForCosignatureV1); answers 409 with its latest size for a stale old size, 422 for a bad proof, 404 for
 * an origin it does not witness, 403 for a forged signature; refuses a fork (same size, other root), also from
 * another API process started afterwards (a restart, a second replica); lets only one of two racing successors win;
 * and refuses hostile bodies with clear 4xx answers.
 */
import { createHash, generateKeyPairSync, verify } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { registerDid } from '../support/credentials';
import { http as request, startTestService, TestService } from '../support/service';
import { rawKey } from '../tlog/hub-keys';
import { checkpointBody, noteVerifierKey, signNote } from '../../core/tlog/signed-note.node';
import { consistencyProof, leafHash, rootOfLeaves, type Hash } from '../../core/ledger/merkle.node';
import { goAvailable, runTlogVerifier, tlogVerifierBinary } from '../support/tlog-verifier';

let a: TestService;
let b: TestService;
let aKey: string;
const DID = 'did:example:tlog-witness-writer';
let written = 0;

async function writeTruths(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await request('POST', `${a.urls.main}/api/report/truth`, {
      headers: { 'x-did': DID },
      body: { key: `witness.test.${written}`, value: { i: written }, truth_type: 'data' }
    });
    if (res.status !== 200) throw new Error(`write: ${res.status} ${res.text}`);
    written++;
  }
}

/** A's checkpoint now, with its size and base64 root. */
async function checkpointOfA(): Promise<{ note: string; size: number; root: string }> {
  const note = await (await fetch(`${a.urls.main}/tlog/checkpoint`)).text();
  const [, size, root] = note.split('\n');
  return { note, size: Number(size), root: root! };
}

/** A's consistency proof, served as hex, as the base64 lines add-checkpoint takes. */
async function proofOfA(first: number, second: number): Promise<string[]> {
  const res = await request('GET', `${a.urls.main}/api/proof/consistency?first=${first}&second=${second}`);
  expect(res.status).toBe(200);
  return (res.body.proof as string[]).map((h) => Buffer.from(h, 'hex').toString('base64'));
}

const body = (old: number, proof: string[], note: string) =>
  `old ${old}\n${proof.map((p) => `${p}\n`).join('')}\n${note}`;

async function addCheckpoint(base: string, text: string | Buffer, type = 'text/plain') {
  const res = await fetch(`${base}/tlog/add-checkpoint`, {
    method: 'POST',
    headers: { 'content-type': type },
    body: text
  });
  const raw = await res.text();
  let json: any;
  try {
    json = JSON.parse(raw);
  } catch {
    json = undefined;
  }
  return { status: res.status, type: res.headers.get('content-type'), text: raw, body: json };
}

/** A log signed here: its origin, key, and leaves `entry <i>`. */
const TEST_LOG = 'witness.test/forklog';
const testLog = generateKeyPairSync('ed25519');
const testLogKey = noteVerifierKey(TEST_LOG, rawKey(testLog.publicKey));
const leaves = (n: number, tag = '') => Array.from({ length: n }, (_, i) => leafHash(`entry ${i}${tag}`));
const perfectOf = (l: Hash[]) => async (level: number, index: number) =>
  rootOfLeaves(l.slice(index * 2 ** level, (index + 1) * 2 ** level));
function testCheckpoint(l: Hash[], origin = TEST_LOG, key = testLog.privateKey, pub = testLog.publicKey): string {
  return signNote(checkpointBody(origin, l.length, rootOfLeaves(l).toString('hex')), origin, key, rawKey(pub));
}
async function testProof(l: Hash[], first: number, second: number): Promise<string[]> {
  return (await consistencyProof(first, second, perfectOf(l))).map((h) => h.toString('base64'));
}

/** Verifies a cosignature/v1 line on `note`'s text independently of the hub's code; its timestamp. */
function verifyCosignatureLine(note: string, line: string, witnessKey: string): number {
  const [, name, id, key64] = /^([^+]+)\+([0-9a-f]{8})\+(.+)$/.exec(witnessKey)!;
  const key = Buffer.from(key64!, 'base64');
  expect(key[0]).toBe(0x04);
  const publicKey = key.subarray(1);
  const expectedId = createHash('sha256')
    .update(Buffer.concat([Buffer.from(`${name}\n`, 'utf8'), Buffer.from([0x04]), publicKey]))
    .digest()
    .subarray(0, 4);
  expect(expectedId.toString('hex')).toBe(id);
  const m = /^\u2014 (\S+) (\S+)$/.exec(line);
  expect(m?.[1]).toBe(name);
  const blob = Buffer.from(m![2]!, 'base64');
  expect(blob.length).toBe(4 + 8 + 64);
  expect(blob.subarray(0, 4).equals(expectedId)).toBe(true);
  const timestamp = Number(blob.readBigUInt64BE(4));
  const text = note.slice(0, note.lastIndexOf('\n\n') + 1);
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), publicKey]);
  const ok = verify(
    null,
    Buffer.from(`cosignature/v1\ntime ${timestamp}\n${text}`, 'utf8'),
    { key: spki, format: 'der', type: 'spki' },
    blob.subarray(12)
  );
  expect(ok).toBe(true);
  return timestamp;
}

let witnessKey: string;
let aOrigin: string;

beforeAll(async () => {
  a = await startTestService({ TRUTH_WRITE_TIMEOUT_MS: '60000' }, { worker: false });
  await registerDid(a.urls.main, a.adminToken, DID);
  await writeTruths(5);
  aKey = (await request('GET', `${a.urls.main}/tlog/verifier-key`)).text.trim();
  aOrigin = aKey.split('+')[0]!;
  b = await startTestService({ TLOG_WITNESSED_LOGS: `${aKey},${TEST_LOG} ${testLogKey}` }, { worker: false });
  witnessKey = (await request('GET', `${b.urls.main}/tlog/witness-key`)).text.trim();
}, 240_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

describe('the witness key', () => {
  it('is published on GET /tlog/witness-key and in /api/status, named after the origin', async () => {
    const status = (await request('GET', `${b.urls.main}/api/status`)).body;
    expect(status.tlog.witness).toEqual({
      name: `${status.tlog.origin}/witness`,
      verifier_key: witnessKey,
      logs: [aOrigin, TEST_LOG]
    });
    // The hub's own Ed25519 key, as a cosignature/v1 key (type 0x04).
    expect(witnessKey.slice(witnessKey.indexOf('+') + 10)).toBe(
      Buffer.concat([Buffer.from([4]), Buffer.from(status.public_key.base64, 'base64')]).toString('base64')
    );
  });
});

describe("POST /tlog/add-checkpoint with hub A's log", () => {
  let first: { note: string; size: number; root: string };
  let cosignedFirst = '';

  it('cosigns the first checkpoint (old 0, no proof) with a cosignature/v1 that verifies', async () => {
    first = await checkpointOfA();
    const res = await addCheckpoint(b.urls.main, body(0, [], first.note));
    expect([res.status, res.type]).toEqual([200, 'text/plain; charset=utf-8']);
    const lines = res.text.split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe('');
    const timestamp = verifyCosignatureLine(first.note, lines[0]!, witnessKey);
    expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(60);
    cosignedFirst = first.note + res.text;
  });

  (goAvailable() ? it : it.skip)(
    'makes a cosigned checkpoint the Go verifier accepts (transparency-dev/formats NewVerifierForCosignatureV1)',
    async () => {
      const bin = tlogVerifierBinary();
      const dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'witness-'));
      const file = path.join(dir, 'cosigned');
      fs.writeFileSync(file, cosignedFirst);
      const ok = await runTlogVerifier(bin, ['-cosigned', file, '-key', aKey, '-witness-key', witnessKey]);
      expect(ok).toMatchObject({ code: 0, stderr: '' });
      expect(ok.stdout).toMatch(new RegExp(`^OK cosigned by ${b.env.PUBLIC_URL!.slice(7)}/tlog/witness: `));
      // A cosignature moved onto another checkpoint does not verify.
      const [, size] = cosignedFirst.split('\n');
      fs.writeFileSync(file, cosignedFirst.replace(`\n${size}\n`, `\n${Number(size) + 1}\n`));
      const bad = await runTlogVerifier(bin, ['-cosigned', file, '-key', aKey, '-witness-key', witnessKey]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/^FAIL: /);
    },
    300_000
  );

  it('cosigns a larger checkpoint with the consistency proof from the last one, and the same one again', async () => {
    await writeTruths(4);
    const next = await checkpointOfA();
    expect(next.size).toBe(first.size + 4);
    const proof = await proofOfA(first.size, next.size);
    const res = await addCheckpoint(b.urls.main, body(first.size, proof, next.note));
    expect(res.status).toBe(200);
    verifyCosignatureLine(next.note, res.text.trimEnd(), witnessKey);
    const again = await addCheckpoint(b.urls.main, body(next.size, [], next.note));
    expect(again.status).toBe(200);
  });

  it('409 with its latest size (text/x.tlog.size) for a stale old size', async () => {
    const now = await checkpointOfA();
    const res = await addCheckpoint(b.urls.main, body(first.size, await proofOfA(first.size, now.size), now.note));
    expect([res.status, res.type, res.text]).toEqual([409, 'text/x.tlog.size', `${now.size}\n`]);
    const zero = await addCheckpoint(b.urls.main, body(0, [], now.note));
    expect([zero.status, zero.text]).toEqual([409, `${now.size}\n`]);
  });

  it('422 checkpoint_inconsistent for a consistency proof that does not verify', async () => {
    const last = await checkpointOfA();
    await writeTruths(3);
    const next = await checkpointOfA();
    const proof = await proofOfA(last.size, next.size);
    const flipped = Buffer.from(proof[0]!, 'base64');
    flipped[0]! ^= 1;
    const res = await addCheckpoint(
      b.urls.main,
      body(last.size, [flipped.toString('base64'), ...proof.slice(1)], next.note)
    );
    expect([res.status, res.body?.error]).toEqual([422, 'checkpoint_inconsistent']);
    expect(res.body.trace_id).toEqual(expect.any(String));
    const short = await addCheckpoint(b.urls.main, body(last.size, proof.slice(1), next.note));
    expect([short.status, short.body?.error]).toEqual([422, 'checkpoint_inconsistent']);
    // The good proof still works: nothing was recorded by the refusals.
    expect((await addCheckpoint(b.urls.main, body(last.size, proof, next.note))).status).toBe(200);
  });

  it('403 for a forged signature, or none of the log key', async () => {
    const cp = await checkpointOfA();
    const at = cp.note.lastIndexOf(' ') + 10;
    const forged = cp.note.slice(0, at) + (cp.note[at] === 'A' ? 'B' : 'A') + cp.note.slice(at + 1);
    const res = await addCheckpoint(b.urls.main, body(cp.size, [], forged));
    expect([res.status, res.body?.error]).toEqual([403, 'forbidden']);
    // Signed with another key under A's origin: no signature of a trusted key.
    const other = generateKeyPairSync('ed25519');
    const text = cp.note.slice(0, cp.note.lastIndexOf('\n\n') + 1);
    const impostor = signNote(text, aOrigin, other.privateKey, rawKey(other.publicKey));
    const none = await addCheckpoint(b.urls.main, body(cp.size, [], impostor));
    expect([none.status, none.body?.error]).toEqual([403, 'forbidden']);
  });

  it('404 for an origin it does not witness', async () => {
    const other = generateKeyPairSync('ed25519');
    const note = testCheckpoint(leaves(2), 'unknown.test/log', other.privateKey, other.publicKey);
    const res = await addCheckpoint(b.urls.main, body(0, [], note));
    expect([res.status, res.body?.error, res.body?.origin]).toEqual([404, 'not_found', 'unknown.test/log']);
  });
});

describe('forks', () => {
  const honest = leaves(8);
  const fork = leaves(8, ' forked');

  it('refuses a checkpoint of the cosigned size with another root (422 checkpoint_fork), and keeps it', async () => {
    expect((await addCheckpoint(b.urls.main, body(0, [], testCheckpoint(honest.slice(0, 3))))).status).toBe(200);
    const res = await addCheckpoint(b.urls.main, body(3, [], testCheckpoint(fork.slice(0, 3))));
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({
      ok: false,
      error: 'checkpoint_fork',
      origin: TEST_LOG,
      size: 3,
      root: rootOfLeaves(fork.slice(0, 3)).toString('hex'),
      cosigned_root: rootOfLeaves(honest.slice(0, 3)).toString('hex')
    });
    const evidence = await b.db
      .collection('tlog_witness')
      .findOne({ _id: `${TEST_LOG} fork:3:${rootOfLeaves(fork.slice(0, 3)).toString('hex')}` as any });
    expect(evidence).toMatchObject({ size: 3, cosigned_root: rootOfLeaves(honest.slice(0, 3)).toString('hex') });
  });

  it('refuses a larger fork: its proof from the forked tree does not verify from the cosigned root', async () => {
    const res = await addCheckpoint(
      b.urls.main,
      body(3, await testProof(fork, 3, 5), testCheckpoint(fork.slice(0, 5)))
    );
    expect([res.status, res.body?.error]).toEqual([422, 'checkpoint_inconsistent']);
  });

  it('still refuses the fork from API processes started afterwards (restart, another replica)', async () => {
    for (let round = 0; round < 2; round++) {
      const replica = await b.startSecondApi();
      try {
        const res = await addCheckpoint(replica.url, body(3, [], testCheckpoint(fork.slice(0, 3))));
        expect([res.status, res.body?.error]).toEqual([422, 'checkpoint_fork']);
        const stale = await addCheckpoint(replica.url, body(0, [], testCheckpoint(fork.slice(0, 3))));
        expect([stale.status, stale.text]).toEqual([409, '3\n']);
      } finally {
        await replica.stop();
      }
    }
  }, 180_000);

  it('lets one of two successors submitted at once to two replicas win; the other gets 409', async () => {
    const replica = await b.startSecondApi();
    try {
      let size = 3;
      for (const [x, y] of [
        [4, 5],
        [6, 7]
      ] as const) {
        const [rx, ry] = await Promise.all([
          addCheckpoint(b.urls.main, body(size, await testProof(honest, size, x), testCheckpoint(honest.slice(0, x)))),
          addCheckpoint(replica.url, body(size, await testProof(honest, size, y), testCheckpoint(honest.slice(0, y))))
        ]);
        const statuses = [rx.status, ry.status].sort();
        expect(statuses).toEqual([200, 409]);
        const won = rx.status === 200 ? x : y;
        expect((rx.status === 409 ? rx : ry).text).toBe(`${won}\n`);
        size = won;
      }
    } finally {
      await replica.stop();
    }
  }, 180_000);
});

describe('hostile bodies', () => {
  const valid = () => testCheckpoint(leaves(1));
  it.each([
    ['no blank line', 'old 0\n'],
    ['no old line', `\n${testCheckpoint(leaves(1))}`],
    ['an old size with a leading zero', `old 01\n\n${testCheckpoint(leaves(1))}`],
    ['a proof line that is not a hash', `old 0\nnot-a-hash\n\n${testCheckpoint(leaves(1))}`],
    ['64 proof lines', `old 0\n${`${Buffer.alloc(32).toString('base64')}\n`.repeat(64)}\n${testCheckpoint(leaves(1))}`],
    ['a checkpoint that is not a signed note', 'old 0\n\nwitness.test/forklog\n1\n'],
    ['a size that is not a number', `old 0\n\n${testCheckpoint(leaves(1)).replace('\n1\n', '\none\n')}`],
    ['a control character', `old 0\n\n${testCheckpoint(leaves(1)).replace('\n1\n', '\n1\r\n')}`]
  ])('400 invalid_request for %s', async (_what, text) => {
    const res = await addCheckpoint(b.urls.main, text);
    expect([res.status, res.body?.ok, res.body?.error]).toEqual([400, false, 'invalid_request']);
    expect(res.body.message).toEqual(expect.any(String));
  });

  it('400 for an old size above the checkpoint size', async () => {
    const res = await addCheckpoint(b.urls.main, body(2, [], valid()));
    expect([res.status, res.body?.error]).toEqual([400, 'invalid_request']);
  });

  it('413 for a huge body, 415 for another media type, 400 for invalid UTF-8', async () => {
    const huge = await addCheckpoint(b.urls.main, `old 0\n${'A'.repeat(256 * 1024)}`);
    expect([huge.status, huge.body?.error]).toEqual([413, 'payload_too_large']);
    const json = await addCheckpoint(b.urls.main, JSON.stringify({ old: 0 }), 'application/json');
    expect([json.status, json.body?.error]).toEqual([415, 'unsupported_media_type']);
    const bytes = Buffer.concat([Buffer.from('old 0\n\n'), Buffer.from([0xff, 0xfe]), Buffer.from(valid())]);
    const utf8 = await addCheckpoint(b.urls.main, bytes);
    expect([utf8.status, utf8.body?.error]).toEqual([400, 'invalid_utf8']);
  });
});
