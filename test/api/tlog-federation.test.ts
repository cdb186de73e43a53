/**
 * A federation of three hubs on one machine, each witnessing the other two (TLOG_WITNESSED_LOGS: the two others'
 * checkpoint keys; TLOG_WITNESSES: the two others as witnesses, k=2 of 2). The topology is the cheapest one on a
 * small machine: three API + worker pairs (test/support/service.ts) sharing the test run's FerretDB and Temporal dev
 * server, each with a database and task queue of its own. Shown:
 *   - a write on every hub is served within a minute in a checkpoint carrying both witnesses' cosignatures, which
 *     the Go verifier accepts under the 2-of-2 policy;
 *   - A's database altered behind its back (an entry changed, the Merkle state recomputed, A's record of what it
 *     signed deleted: A itself cannot tell) → A signs the rewritten tree, and both its witnesses refuse it as a
 *     fork (422 checkpoint_fork, kept as evidence): the witness workflows say `refused` with the witness's answer,
 *     in their search attributes, their query and /api/status; the Go verifier fails it against A's earlier
 *     checkpoint and under the witness policy;
 *   - B's database altered (a seq removed, the entries after it renumbered) → its witnesses answer that they
 *     cosigned a larger tree (409, refused), and once B grows past it, that the proof does not verify from what they
 *     cosigned (422 checkpoint_inconsistent); the Go verifier fails it too;
 *   - a witness removed from a hub's TLOG_WITNESSES: its workflow there ends (`retired`). Its history is saved for
 *     the replay test (RECORD_HISTORIES=1).
 */
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../../scripts/stack/process';
import { registerDid } from '../support/credentials';
import { eventually, http as request, startTestService, TestService } from '../support/service';
import { dataDirWithHubKey } from '../tlog/hub-keys';
import { servedCheckpoint } from '../tlog/served-checkpoint';
import { expectWitnessRetired } from '../tlog/witness-workflow';
import { saveWorkflowHistory } from '../support/history';
import { noteVerifierKey } from '../../core/tlog/signed-note.node';
import { cosignatureVerifierKey, parseVerifierKey, verifyCosignature } from '../../core/tlog/cosignature.node';
import { tlogWitnessStatusQuery, tlogWitnessWorkflowId } from '../../contracts/tlog/witness.contract';
import { goAvailable, runTlogVerifier, tlogVerifierBinary } from '../support/tlog-verifier';
import { changeEntry, removeEntry } from '../tlog/ledger-tamper';

jest.setTimeout(120_000);

const DID = 'did:example:tlog-federation-writer';

interface Member {
  name: 'a' | 'b' | 'c';
  origin: string;
  witnessName: string;
  dir: string;
  port: number;
  logKey: string;
  witnessKey: string;
  svc: TestService;
  /** The URL of the API process writes go to (after an alteration: a process started on the altered database). */
  writeUrl: string;
  written: number;
}

/** A DATA_DIR holding a hub key made here, so that every hub's keys are known before any starts. */
async function member(name: Member['name']): Promise<Member> {
  const { dir, raw } = dataDirWithHubKey(`fed-${name}`);
  const origin = `${name}.federation.test/tlog`;
  const witnessName = `${name}.federation.test/witness`;
  return {
    name,
    origin,
    witnessName,
    dir,
    port: await freePort(),
    logKey: noteVerifierKey(origin, raw),
    witnessKey: cosignatureVerifierKey(witnessName, raw),
    svc: undefined as unknown as TestService,
    writeUrl: '',
    written: 0
  };
}

let hubs: Member[] = [];
let a: Member;
let b: Member;
let c: Member;
const others = (m: Member) => hubs.filter((o) => o !== m);
const mainUrl = (m: Member) => `http://127.0.0.1:${m.port}`;

async function write(m: Member, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await request('POST', `${m.writeUrl}/api/report/truth`, {
      headers: { 'x-did': DID },
      body: { key: `federation.${m.name}.${m.written}`, value: { i: m.written }, truth_type: 'data' }
    });
    if (res.status !== 200) throw new Error(`write on ${m.name}: ${res.status} ${res.text}`);
    m.written++;
  }
}

const status = async (m: Member) => (await request('GET', `${m.writeUrl}/api/status`)).body;
const witnessIn = (s: any, name: string) => s.tlog.witnesses.witnesses.find((w: any) => w.name === name);

/** A hub's served checkpoint: its note, text, size and signature lines. */
const served = (m: Member) => servedCheckpoint(m.writeUrl);

/** The served checkpoint once it covers the whole ledger with both witnesses' cosignatures. */
const cosignedByBoth = (m: Member, timeoutMs: number) =>
  eventually(
    async () => {
      const cp = await served(m);
      return cp.size === (await status(m)).truth_count && cp.lines.length === 3 ? cp : undefined;
    },
    timeoutMs,
    `${m.name}'s checkpoint of its whole ledger with two cosignatures`
  ).catch(async (err: Error) => {
    // What the hub says of its witnesses, to tell a slow machine from a refusal.
    const witnesses = await status(m).then((s) => JSON.stringify(s.tlog.witnesses), String);
    throw new Error(`${err.message}; its witnesses: ${witnesses}`);
  });

/**
 * The witness workflow of `witness` on hub `m`, once its query and search attributes say `refused` with `reason`
 * (a minute: on a loaded machine a witness may first time out, `unreachable`, and be retried after a backoff).
 */
async function refusedBy(m: Member, witness: Member, reason: RegExp) {
  const handle = m.svc.temporal.workflow.getHandle(
    tlogWitnessWorkflowId(m.svc.env.TEMPORAL_TASK_QUEUE!, witness.witnessName)
  );
  let seen = '';
  return eventually(
    async () => {
      const query = await handle.query(tlogWitnessStatusQuery);
      seen = `${query.state}: ${query.reason}`;
      if (query.state !== 'refused' || !reason.test(query.reason ?? '')) return undefined;
      const described = await handle.describe();
      return (described.searchAttributes.WitnessState as string[] | undefined)?.[0] === 'refused'
        ? { query, described }
        : undefined;
    },
    60_000,
    `${m.name}'s workflow of witness ${witness.name} refused with ${reason}`
  ).catch((err: Error) => {
    throw new Error(`${err.message} (last seen ${seen})`);
  });
}

function saveCheckpoint(note: string, name: string): string {
  const file = path.join(fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'fed-cp-')), name);
  fs.writeFileSync(file, note);
  return file;
}

beforeAll(async () => {
  hubs = await Promise.all((['a', 'b', 'c'] as const).map(member));
  [a, b, c] = hubs as [Member, Member, Member];
  await Promise.all(
    hubs.map(async (m) => {
      m.svc = await startTestService({
        DATA_DIR: m.dir,
        PORT: String(m.port),
        PUBLIC_URL: mainUrl(m),
        TLOG_ORIGIN: m.origin,
        TLOG_WITNESS_NAME: m.witnessName,
        TLOG_WITNESSED_LOGS: others(m)
          .map((o) => o.logKey)
          .join(','),
        TLOG_WITNESSES: others(m)
          .map((o) => `${o.witnessKey} ${mainUrl(o)}/tlog`)
          .join(','),
        TLOG_CHECKPOINT_INTERVAL_MS: '500',
        TRUTH_WRITE_TIMEOUT_MS: '60000'
      });
      m.writeUrl = m.svc.urls.main;
      await registerDid(m.writeUrl, m.svc.adminToken, DID);
    })
  );
}, 240_000);
afterAll(async () => {
  await Promise.all(hubs.map((m) => m.svc?.close()));
});

const saved: Record<string, { note: string; size: number }> = {};

describe('three hubs witnessing each other', () => {
  it("serves every hub's checkpoint with both witnesses' cosignatures within a minute of a write", async () => {
    const started = Date.now();
    await Promise.all(hubs.map((m) => write(m, 3)));
    const wrote = Date.now();
    const cps = await Promise.all(hubs.map((m) => cosignedByBoth(m, 60_000)));
    const elapsed = Date.now() - wrote;
    expect(elapsed).toBeLessThan(60_000);
    process.stdout.write(
      `federation: writes ${wrote - started} ms, every checkpoint cosigned by both witnesses ${elapsed} ms later\n`
    );
    for (const [i, m] of hubs.entries()) {
      const cp = cps[i]!;
      saved[m.name] = { note: cp.note, size: cp.size };
      expect(cp.lines[0]).toMatch(new RegExp(`^\u2014 ${m.origin} `));
      for (const o of others(m)) {
        const line = cp.lines.find((l) => l.startsWith(`\u2014 ${o.witnessName} `));
        expect(line).toBeDefined();
        const blob = Buffer.from(line!.split(' ')[2]!, 'base64');
        expect(verifyCosignature(cp.text, blob, parseVerifierKey(o.witnessKey)!)).not.toBeNull();
      }
      expect((await status(m)).tlog.witnesses).toMatchObject({ k: 2, n: 2, witnessed_size: cp.size });
    }
  });

  (goAvailable() ? it : it.skip)(
    'is verified by the Go verifier under each policy: the log key and both witness keys',
    async () => {
      const bin = tlogVerifierBinary();
      for (const m of hubs) {
        const file = saveCheckpoint(saved[m.name]!.note, `${m.name}.checkpoint`);
        const keys = others(m).flatMap((o) => ['-witness-key', o.witnessKey]);
        const ok = await runTlogVerifier(bin, ['-cosigned', file, '-key', m.logKey, ...keys]);
        expect(ok).toMatchObject({ code: 0, stderr: '' });
        const tiles = await runTlogVerifier(bin, ['-url', `${m.writeUrl}/tlog`, '-key', m.logKey]);
        expect(tiles).toMatchObject({ code: 0, stderr: '' });
      }
    },
    180_000
  );
});

describe("a hub's database altered behind its back", () => {
  it('an entry changed on A: A signs the rewritten tree, both witnesses refuse it as a fork and say why', async () => {
    const before = saved.a!;
    // A restored from a doctored backup: the entry's value changed and every hash after it recomputed, A's record
    // of its signed checkpoints gone. A's processes are restarted on it (the worker, and an API process that signs
    // and tells the witness workflows at its start).
    await a.svc.stopWorker();
    await changeEntry(a.svc.db, 2, '{"i":"not what was written"}');
    await a.svc.startWorker();
    const restarted = await a.svc.startSecondApi();
    a.writeUrl = restarted.url;
    const forged = await eventually(
      async () => {
        const cp = await served(a);
        return cp.size === before.size && cp.note.split('\n')[2] !== before.note.split('\n')[2] ? cp : undefined;
      },
      30_000,
      "A's checkpoint of the rewritten tree"
    );
    // Both witnesses refuse: the same size with another root than the one they cosigned.
    await Promise.all(
      [b, c].map(async (w) => {
        const { query } = await refusedBy(a, w, /^422 from .*checkpoint_fork/);
        expect(query).toMatchObject({ name: w.witnessName, cosigned_size: 0, hub_size: before.size });
        expect(query.reason).toContain(`${before.size}`);
        // The witness keeps the signed fork as evidence of the log's misbehaviour.
        const evidence = await w.svc.db
          .collection<{ _id: string }>('tlog_witness')
          .find({ _id: { $regex: `^${a.origin.replace(/\./g, '\\.')} fork:${before.size}:` } })
          .toArray();
        expect(evidence).toHaveLength(1);
      })
    );
    const s = await status(a);
    expect(s.tlog.witnesses.witnessed_size).toBeNull();
    for (const w of [b, c])
      expect(witnessIn(s, w.witnessName)).toMatchObject({
        state: 'refused',
        reason: expect.stringMatching(/checkpoint_fork/)
      });
    // Served without a cosignature: a client holding the 2-of-2 policy refuses it.
    expect(forged.lines).toHaveLength(1);
    saved.aForged = { note: forged.note, size: forged.size };
  }, 180_000);

  (goAvailable() ? it : it.skip)(
    "the Go verifier: A's rewritten log is whole on its own, but not consistent with A's earlier checkpoint nor witnessed",
    async () => {
      const bin = tlogVerifierBinary();
      const old = saveCheckpoint(saved.a!.note, 'a.before');
      const alone = await runTlogVerifier(bin, ['-url', `${a.writeUrl}/tlog`, '-key', a.logKey]);
      expect(alone).toMatchObject({ code: 0, stderr: '' });
      const against = await runTlogVerifier(bin, ['-url', `${a.writeUrl}/tlog`, '-key', a.logKey, '-old', old]);
      expect(against.code).toBe(1);
      expect(against.stderr).toMatch(new RegExp(`^FAIL: consistency ${saved.a!.size} -> ${saved.a!.size}`));
      const forged = saveCheckpoint(saved.aForged!.note, 'a.forged');
      const policy = ['-witness-key', b.witnessKey, '-witness-key', c.witnessKey, '-quorum', '1'];
      const witnessed = await runTlogVerifier(bin, ['-cosigned', forged, '-key', a.logKey, ...policy]);
      expect(witnessed.code).toBe(1);
      expect(witnessed.stderr).toMatch(/^FAIL: /);
    },
    180_000
  );

  it('a seq removed on B: its witnesses say they cosigned more, then that the proof does not hold', async () => {
    const before = saved.b!;
    await b.svc.stopWorker();
    await removeEntry(b.svc.db, 2);
    await b.svc.startWorker();
    const restarted = await b.svc.startSecondApi();
    b.writeUrl = restarted.url;
    // B signs a tree one entry shorter; both witnesses answer 409 with the size they cosigned, larger.
    await Promise.all(
      [a, c].map(async (w) => {
        const { query } = await refusedBy(b, w, /^the witness has cosigned a checkpoint of \d+ entries/);
        expect(query.reason).toContain(`of ${before.size} entries for this log, more than the ${before.size - 1}`);
      })
    );
    // B grows past what they cosigned: the consistency proof from it, computed from B's altered ledger, fails.
    await write(b, 2);
    // (after the backoff of their refusals, which a new checkpoint does not cut short)
    await Promise.all(
      [a, c].map(async (w) => {
        const { query } = await refusedBy(b, w, /^422 from .*checkpoint_inconsistent/);
        expect(query.hub_size).toBe(before.size + 1);
      })
    );
    const s = await status(b);
    expect(s.tlog.witnesses.witnessed_size).toBeNull();
    for (const w of [a, c])
      expect(witnessIn(s, w.witnessName)).toMatchObject({
        state: 'refused',
        witness_size: before.size,
        reason: expect.stringMatching(/checkpoint_inconsistent/)
      });
  }, 180_000);

  (goAvailable() ? it : it.skip)(
    "the Go verifier: B's log is not consistent with B's earlier checkpoint",
    async () => {
      const bin = tlogVerifierBinary();
      const old = saveCheckpoint(saved.b!.note, 'b.before');
      const res = await runTlogVerifier(bin, ['-url', `${b.writeUrl}/tlog`, '-key', b.logKey, '-old', old]);
      expect(res.code).toBe(1);
      expect(res.stderr).toMatch(new RegExp(`^FAIL: consistency ${saved.b!.size} -> ${saved.b!.size + 1}`));
    },
    180_000
  );

  it('leaves the federation otherwise working: C still served with both cosignatures after a write', async () => {
    await write(c, 1);
    const cp = await cosignedByBoth(c, 60_000);
    expect(cp.size).toBeGreaterThan(saved.c!.size);
  });
});

describe('a witness removed from TLOG_WITNESSES', () => {
  it("has its workflow ended: an API process of C configured without B retires C's workflow for B", async () => {
    const queue = c.svc.env.TEMPORAL_TASK_QUEUE!;
    const ofB = c.svc.temporal.workflow.getHandle(tlogWitnessWorkflowId(queue, b.witnessName));
    const ofA = c.svc.temporal.workflow.getHandle(tlogWitnessWorkflowId(queue, a.witnessName));
    expect((await ofB.describe()).status.name).toBe('RUNNING');
    const narrowed = await c.svc.startSecondApi(
      {},
      { TLOG_WITNESSES: `${a.witnessKey} ${mainUrl(a)}/tlog`, TLOG_WITNESS_QUORUM: '1' }
    );
    try {
      await expectWitnessRetired(ofB, b.witnessName, "C's workflow for B completed");
      // The witness still configured goes on.
      expect((await ofA.describe()).status.name).toBe('RUNNING');
    } finally {
      await narrowed.stop();
    }
    if (process.env.RECORD_HISTORIES === '1')
      saveWorkflowHistory(c.svc.env.TEMPORAL_ADDRESS!, ofB.workflowId, 'tlog-witness-retired');
  });
});
