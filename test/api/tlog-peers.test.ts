/**
 * Two hubs witnessing each other configured only through their peer registries (POST /admin/peers with `tlog`), over
 * real HTTP against the embedded stack; neither has TLOG_WITNESSED_LOGS or TLOG_WITNESSES. Shown:
 *   - the admin routes refuse a missing or forged admin token; a malformed key or URL is a 400 in the error shape
 *     naming the field, and nothing is stored; a witness name pinned for another peer is a 409;
 *   - a probe shows what the peer serves at /tlog/verifier-key and /tlog/witness-key without pinning it;
 *   - pinned both ways, each hub's served checkpoint carries the other's cosignature (checked here and by the Go
 *     verifier under the policy); a second API process of A, started before the pin, applies it within the
 *     registry's refresh bound;
 *   - the peer's witness key removed: its workflow is retired and its cosignature no longer required (k = n = 0);
 *   - the peer removed: add-checkpoint answers 404 for its origin; added back, the hub holds it to what it cosigned
 *     (409 with that size from old 0, 422 checkpoint_fork for another root at that size).
 */
import { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { registerDid } from '../support/credentials';
import { eventually, http as request, startTestService, TestService } from '../support/service';
import { dataDirWithHubKey } from '../tlog/hub-keys';
import { servedCheckpoint } from '../tlog/served-checkpoint';
import { expectWitnessRetired } from '../tlog/witness-workflow';
import { checkpointBody, noteVerifierKey, signNote } from '../../core/tlog/signed-note.node';
import { cosignatureVerifierKey, parseVerifierKey, verifyCosignature } from '../../core/tlog/cosignature.node';
import { tlogWitnessWorkflowId } from '../../contracts/tlog/witness.contract';
import { PEER_WITNESSES_REFRESH_MS } from '../../services/tlog/peer-witnesses';
import { goAvailable, runTlogVerifier, tlogVerifierBinary } from '../support/tlog-verifier';

jest.setTimeout(120_000);

const DID = 'did:example:tlog-peers-writer';

interface Hub {
  name: 'a' | 'b';
  origin: string;
  witnessName: string;
  dir: string;
  privateKey: KeyObject;
  raw: Buffer;
  logKey: string;
  witnessKey: string;
  svc: TestService;
  url: string;
  written: number;
}

/** A DATA_DIR holding a hub key made here, so that each hub's keys are known to the test. */
function hub(name: Hub['name']): Hub {
  const { dir, privateKey, raw } = dataDirWithHubKey(`peers-${name}`);
  const origin = `${name}.peers.test/tlog`;
  const witnessName = `${name}.peers.test/witness`;
  return {
    name,
    origin,
    witnessName,
    dir,
    privateKey,
    raw,
    logKey: noteVerifierKey(origin, raw),
    witnessKey: cosignatureVerifierKey(witnessName, raw),
    svc: undefined as unknown as TestService,
    url: '',
    written: 0
  };
}

const a = hub('a');
const b = hub('b');
const other = (h: Hub) => (h === a ? b : a);
/** A second API process of A, started before any pin. */
let a2: { url: string; stop(): Promise<void> };

const admin = (h: Hub) => ({ authorization: `Bearer ${h.svc.adminToken}` });
const card = (h: Hub) => `${h.url}/a2a/.well-known/agent.json`;
const peerId = (h: Hub) => `hub-${h.name}`;
/** POST /admin/peers on `on` about `peer`, with `tlog` as given (undefined: left out). */
const addPeer = (on: Hub, peer: Hub, tlog?: unknown, headers: Record<string, string> = admin(on)) =>
  request('POST', `${on.url}/admin/peers`, {
    headers,
    body: { name: `Hub ${peer.name}`, agent_card_url: card(peer), ...(tlog === undefined ? {} : { tlog }) }
  });
const pinBoth = (on: Hub, peer: Hub) =>
  addPeer(on, peer, { url: `${peer.url}/tlog`, verifier_key: peer.logKey, witness_key: peer.witnessKey });

async function write(h: Hub, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await request('POST', `${h.url}/api/report/truth`, {
      headers: { 'x-did': DID },
      body: { key: `peers.${h.name}.${h.written}`, value: { i: h.written }, truth_type: 'data' }
    });
    if (res.status !== 200) throw new Error(`write on ${h.name}: ${res.status} ${res.text}`);
    h.written++;
  }
}

const statusAt = async (url: string) => (await request('GET', `${url}/api/status`)).body;

const servedAt = servedCheckpoint;

/** The checkpoint `url` serves once it covers the whole ledger with `lines` signature lines. */
const servedWith = (url: string, lines: number, what: string) =>
  eventually(
    async () => {
      const cp = await servedAt(url);
      return cp.size === (await statusAt(url)).truth_count && cp.lines.length === lines ? cp : undefined;
    },
    60_000,
    what
  ).catch(async (err: Error) => {
    const witnesses = await statusAt(url).then((s) => JSON.stringify(s.tlog.witnesses), String);
    throw new Error(`${err.message}; its witnesses: ${witnesses}`);
  });

beforeAll(async () => {
  await Promise.all(
    [a, b].map(async (h) => {
      h.svc = await startTestService({
        DATA_DIR: h.dir,
        TLOG_ORIGIN: h.origin,
        TLOG_WITNESS_NAME: h.witnessName,
        TLOG_CHECKPOINT_INTERVAL_MS: '500',
        TRUTH_WRITE_TIMEOUT_MS: '60000'
      });
      h.url = h.svc.urls.main;
      await registerDid(h.url, h.svc.adminToken, DID);
    })
  );
  a2 = await a.svc.startSecondApi();
}, 240_000);
afterAll(async () => {
  await a2?.stop();
  await Promise.all([a.svc?.close(), b.svc?.close()]);
});

describe("pinning a peer's transparency keys", () => {
  it('is for administrators only: a missing or forged admin token is refused', async () => {
    const forged = { authorization: 'Bearer adm_forged_0123456789abcdef' };
    for (const headers of [{}, forged]) {
      const added = await addPeer(a, b, { url: `${b.url}/tlog`, verifier_key: b.logKey }, headers);
      expect([added.status, added.body.error]).toEqual([401, 'unauthorized']);
      const removed = await request('POST', `${a.url}/admin/peers/${peerId(b)}/remove`, { headers });
      expect(removed.status).toBe(401);
    }
    expect((await request('GET', `${a.url}/a2a/peers`)).body.count).toBe(0);
  });

  it('refuses a malformed key or URL with a 400 naming the field, and a key of its own with a 409, storing nothing', async () => {
    const wrongId = b.logKey.replace(/\+[0-9a-f]{8}\+/, (m) => (m === '+00000000+' ? '+11111111+' : '+00000000+'));
    const url = `${b.url}/tlog`;
    const cases: [unknown, string][] = [
      [{ url, verifier_key: 'not a key' }, 'body.tlog.verifier_key'],
      [{ url, verifier_key: wrongId }, 'body.tlog.verifier_key'],
      [{ url, verifier_key: b.witnessKey }, 'body.tlog.verifier_key'],
      [{ url, witness_key: b.logKey }, 'body.tlog.witness_key'],
      [{ url: 'ftp://b.peers.test/tlog', witness_key: b.witnessKey }, 'body.tlog.url'],
      [{ url: `${url}?x=1`, witness_key: b.witnessKey }, 'body.tlog.url'],
      [{ verifier_key: b.logKey }, 'body.tlog.url'],
      [{ url, verifier_kee: b.logKey }, 'body.tlog']
    ];
    for (const [tlog, field] of cases) {
      const res = await addPeer(a, b, tlog);
      expect({ tlog, status: res.status }).toEqual({ tlog, status: 400 });
      expect(res.body).toMatchObject({ ok: false, error: 'invalid_request', trace_id: expect.any(String) });
      expect(res.body.fields.map((f: { field: string }) => f.field)).toContain(field);
    }
    // A well-formed key, but this hub's own: a hub does not witness itself.
    for (const tlog of [
      { url, verifier_key: a.logKey },
      { url, witness_key: a.witnessKey }
    ]) {
      const res = await addPeer(a, b, tlog);
      expect({ tlog, status: res.status }).toEqual({ tlog, status: 409 });
      expect(res.body).toMatchObject({
        ok: false,
        error: 'conflict',
        message: expect.stringMatching(/witness itself/)
      });
    }
    expect((await request('GET', `${a.url}/a2a/peers`)).body.count).toBe(0);
  });

  it('shows what the peer serves at its log prefix without pinning it', async () => {
    const res = await addPeer(a, b, { url: `${b.url}/tlog/` });
    expect(res.status).toBe(201);
    expect(res.body.peer).toMatchObject({
      peer_id: peerId(b),
      last_status: 'reachable',
      tlog: { url: `${b.url}/tlog`, verifier_key: null, witness_key: null },
      tlog_offered: { verifier_key: b.logKey, witness_key: b.witnessKey, error: null }
    });
    const status = await statusAt(a.url);
    expect(status.tlog.witnesses).toMatchObject({ k: 0, n: 0, witnesses: [] });
    expect(status.tlog.witness.logs).toEqual([]);
  });
});

describe('two hubs witnessing each other through their registries', () => {
  const saved: Record<string, string> = {};

  it("serves each hub's checkpoint with the other's cosignature; a replica applies the pin within seconds", async () => {
    const pinned = Date.now();
    for (const h of [a, b]) {
      const res = await pinBoth(h, other(h));
      expect(res.status).toBe(h === a ? 200 : 201);
      expect(res.body.peer.tlog).toMatchObject({ verifier_key: other(h).logKey, witness_key: other(h).witnessKey });
    }
    // A's second process, which took no part in the change, reads it within the refresh bound.
    await eventually(
      async () => {
        const s = await statusAt(a2.url);
        return s.tlog.witnesses.n === 1 && s.tlog.witness.logs.includes(b.origin) ? s : undefined;
      },
      PEER_WITNESSES_REFRESH_MS + 10_000,
      "A's second process with B as witness and witnessed log"
    );
    const applied = Date.now() - pinned;
    process.stdout.write(`tlog peers: pins applied by a second API process ${applied} ms after the first pin\n`);
    expect(applied).toBeLessThan(PEER_WITNESSES_REFRESH_MS + 10_000);

    // A witness name another peer has pinned: one workflow per name.
    const taken = await request('POST', `${a.url}/admin/peers`, {
      headers: admin(a),
      body: { name: 'Hub z', agent_card_url: card(b), tlog: { url: `${b.url}/tlog`, witness_key: b.witnessKey } }
    });
    expect([taken.status, taken.body.error, taken.body.peer_id]).toEqual([409, 'conflict', peerId(b)]);

    await Promise.all([write(a, 2), write(b, 2)]);
    for (const h of [a, b]) {
      const cp = await servedWith(h.url, 2, `${h.name}'s checkpoint with ${other(h).name}'s cosignature`);
      expect(cp.lines[0]).toMatch(new RegExp(`^\u2014 ${h.origin} `));
      expect(cp.lines[1]).toMatch(new RegExp(`^\u2014 ${other(h).witnessName} `));
      const blob = Buffer.from(cp.lines[1]!.split(' ')[2]!, 'base64');
      expect(verifyCosignature(cp.text, blob, parseVerifierKey(other(h).witnessKey)!)).not.toBeNull();
      const status = await statusAt(h.url);
      expect(status.tlog.witnesses).toMatchObject({ k: 1, n: 1, witnessed_size: cp.size });
      expect(status.tlog.witnesses.witnesses[0]).toMatchObject({
        name: other(h).witnessName,
        verifier_key: other(h).witnessKey,
        url: `${other(h).url}/tlog`,
        peer_id: peerId(other(h)),
        state: 'cosigned'
      });
      expect(status.tlog.witness.logs).toEqual([other(h).origin]);
      saved[h.name] = cp.note;
    }
    // The replica serves the same policy.
    expect((await servedWith(a2.url, 2, "A's second process's checkpoint")).lines[1]).toMatch(
      new RegExp(`^\u2014 ${b.witnessName} `)
    );
  });

  (goAvailable() ? it : it.skip)(
    "is verified by the Go verifier: each log's key and the other hub's witness key",
    async () => {
      const bin = tlogVerifierBinary();
      for (const h of [a, b]) {
        const file = path.join(fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'peers-cp-')), 'checkpoint');
        fs.writeFileSync(file, saved[h.name]!);
        const ok = await runTlogVerifier(bin, [
          '-cosigned',
          file,
          '-key',
          h.logKey,
          '-witness-key',
          other(h).witnessKey
        ]);
        expect(ok).toMatchObject({ code: 0, stderr: '' });
        expect(ok.stdout).toMatch(new RegExp(`^OK cosigned by ${other(h).witnessName}: ${h.origin}\n`));
        const tiles = await runTlogVerifier(bin, ['-url', `${h.url}/tlog`, '-key', h.logKey]);
        expect(tiles).toMatchObject({ code: 0, stderr: '' });
      }
    },
    180_000
  );

  it("removing the peer's witness key retires its workflow and stops requiring its cosignature", async () => {
    const handle = a.svc.temporal.workflow.getHandle(
      tlogWitnessWorkflowId(a.svc.env.TEMPORAL_TASK_QUEUE!, b.witnessName)
    );
    expect((await handle.describe()).status.name).toBe('RUNNING');
    const res = await addPeer(a, b, { url: `${b.url}/tlog`, verifier_key: b.logKey });
    expect(res.status).toBe(200);
    expect(res.body.peer.tlog).toMatchObject({ verifier_key: b.logKey, witness_key: null });
    await expectWitnessRetired(handle, b.witnessName, "A's workflow for B completed");
    for (const url of [a.url, a2.url])
      await eventually(async () => {
        const s = await statusAt(url);
        return s.tlog.witnesses.n === 0 ? s : undefined;
      }, PEER_WITNESSES_REFRESH_MS + 10_000);
    expect((await statusAt(a.url)).tlog.witnesses).toMatchObject({ k: 0, n: 0, witnessed_size: null });
    // A's newest checkpoint is served without waiting for B.
    await write(a, 1);
    await servedWith(a.url, 1, "A's checkpoint of its whole ledger with its own signature only");
    // A still witnesses B: B's next checkpoint carries A's cosignature.
    await write(b, 1);
    await servedWith(b.url, 2, "B's checkpoint with A's cosignature");
  });

  it('removing the peer stops witnessing its log; added back, it is held to what was cosigned', async () => {
    const latest = await a.svc.db
      .collection<{ _id: string; size: number; root: string }>('tlog_witness')
      .findOne({ _id: `${b.origin} latest` });
    expect(latest).not.toBeNull();
    const cosigned = await eventually(async () => {
      // The last size A cosigned for B (B's newest, once its workflow for A has caught up).
      const s = await statusAt(b.url);
      return s.tlog.witnesses.witnesses[0]?.cosigned_size === s.truth_count ? s.truth_count : undefined;
    }, 30_000);
    const removed = await request('POST', `${a.url}/admin/peers/${peerId(b)}/remove`, { headers: admin(a) });
    expect(removed.body).toEqual({ ok: true, removed: peerId(b) });
    expect((await request('GET', `${a.url}/a2a/peers`)).body.count).toBe(0);

    const { note } = await servedAt(b.url);
    const submit = (url: string, body: string) =>
      request('POST', `${url}/tlog/add-checkpoint`, { headers: { 'content-type': 'text/plain' }, raw: body });
    const gone = await submit(a.url, `old ${cosigned}\n\n${note}`);
    expect([gone.status, gone.body.error, gone.body.origin]).toEqual([404, 'not_found', b.origin]);
    await eventually(async () => {
      const r = await submit(a2.url, `old ${cosigned}\n\n${note}`);
      return r.status === 404 ? r : undefined;
    }, PEER_WITNESSES_REFRESH_MS + 10_000);

    // Added back: the chain A cosigned for B is still there.
    expect((await addPeer(a, b, { url: `${b.url}/tlog`, verifier_key: b.logKey })).status).toBe(201);
    const fromZero = await submit(a.url, `old 0\n\n${note}`);
    expect([fromZero.status, fromZero.text]).toEqual([409, `${cosigned}\n`]);
    // A checkpoint of that size with another root, validly signed by B's key: a fork, refused.
    const forged = signNote(checkpointBody(b.origin, cosigned, 'ab'.repeat(32)), b.origin, b.privateKey, b.raw);
    const fork = await submit(a.url, `old ${cosigned}\n\n${forged}`);
    expect([fork.status, fork.body.error]).toEqual([422, 'checkpoint_fork']);
  });
});
