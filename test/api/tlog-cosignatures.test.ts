/**
 * Hub A collects cosignatures from the witnesses of its log (TLOG_WITNESSES), over real HTTP against real hubs:
 * hub B witnesses A (TLOG_WITNESSED_LOGS) and A has it as a witness with its right key; hub C witnesses A too but
 * A is configured with a wrong key for it; the quorum is 1 of 2. Entries appended on A → A's GET /tlog/checkpoint
 * carries B's cosignature (verified here and by the Go verifier), never C's (refused, and said so in /api/status);
 * B down → A keeps signing and serving the last witnessed checkpoint, and catches up when B is back, with no
 * operator; A having lost its record of B's progress follows B's 409. With k=2 of B, C and D (never met: C's key
 * is wrong, D answers 404) A serves its newest checkpoint with the cosignature it has. The witness workflow also continues as new
 * with its totals. Its histories are saved for the replay
 * test (RECORD_HISTORIES=1).
 */
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../../scripts/stack/process';
import { registerDid } from '../support/credentials';
import { eventually, http as request, startTestService, TestService } from '../support/service';
import { dataDirWithHubKey, rawKey } from '../tlog/hub-keys';
import { servedCheckpoint } from '../tlog/served-checkpoint';
import { saveWorkflowHistory } from '../support/history';
import { noteVerifierKey } from '../../core/tlog/signed-note.node';
import { cosignatureVerifierKey, parseVerifierKey, verifyCosignature } from '../../core/tlog/cosignature.node';
import { tlogWitnessStatusQuery, tlogWitnessWorkflowId } from '../../contracts/tlog/witness.contract';
import { tlogWitnessWorkflow } from '../../workflows/tlog/witness';
import { goAvailable, runTlogVerifier, tlogVerifierBinary } from '../support/tlog-verifier';

jest.setTimeout(120_000);

const A_ORIGIN = 'a.cosign.test/tlog';
const B_NAME = 'b.cosign.test/witness';
const C_NAME = 'c.cosign.test/witness';
const DID = 'did:example:tlog-cosign-writer';

// Each hub's keys are made here, so that they are known before any hub starts.
const aData = dataDirWithHubKey('a');
const bData = dataDirWithHubKey('b');
const cData = dataDirWithHubKey('c');
const aLogKey = noteVerifierKey(A_ORIGIN, aData.raw);
const bWitnessKey = cosignatureVerifierKey(B_NAME, bData.raw);
/** C's name with a key that is not C's. */
const cWrongKey = cosignatureVerifierKey(C_NAME, rawKey(generateKeyPairSync('ed25519').publicKey));

let a: TestService;
let b: TestService;
let c: TestService;
/** B's witness endpoint: a second API process of B on a fixed port, stopped and started again by the tests. */
let bPort: number;
let bWitness: { stop(): Promise<void> } | null = null;
let written = 0;

async function writeTruths(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await request('POST', `${a.urls.main}/api/report/truth`, {
      headers: { 'x-did': DID },
      body: { key: `cosign.test.${written}`, value: { i: written }, truth_type: 'data' }
    });
    if (res.status !== 200) throw new Error(`write: ${res.status} ${res.text}`);
    written++;
  }
}

/** A's served checkpoint: its text, size, and signature lines (after the blank line). */
const servedOfA = () => servedCheckpoint(a.urls.main);

const statusOfA = async () => (await request('GET', `${a.urls.main}/api/status`)).body;
/** The ledger's size (the writes here, and the hub's own events). */
const headOfA = async (): Promise<number> => (await statusOfA()).truth_count;
const witnessOf = (status: any, name: string) => status.tlog.witnesses.witnesses.find((w: any) => w.name === name);

beforeAll(async () => {
  bPort = await freePort();
  [b, c] = await Promise.all([
    startTestService(
      { DATA_DIR: bData.dir, TLOG_WITNESSED_LOGS: aLogKey, TLOG_WITNESS_NAME: B_NAME },
      { worker: false }
    ),
    startTestService(
      { DATA_DIR: cData.dir, TLOG_WITNESSED_LOGS: aLogKey, TLOG_WITNESS_NAME: C_NAME },
      { worker: false }
    )
  ]);
  bWitness = await b.startSecondApi({ PORT: String(bPort) });
  a = await startTestService({
    DATA_DIR: aData.dir,
    TLOG_ORIGIN: A_ORIGIN,
    TLOG_WITNESSES: `${bWitnessKey} http://127.0.0.1:${bPort}/tlog,\n${cWrongKey} ${c.urls.main}/tlog`,
    TLOG_WITNESS_QUORUM: '1',
    TLOG_CHECKPOINT_INTERVAL_MS: '300',
    TRUTH_WRITE_TIMEOUT_MS: '60000'
  });
  await registerDid(a.urls.main, a.adminToken, DID);
}, 240_000);
afterAll(async () => {
  await bWitness?.stop();
  await Promise.all([a?.close(), b?.close(), c?.close()]);
});

describe("A's checkpoint with its witnesses' cosignatures (1 of 2)", () => {
  let cosigned: Awaited<ReturnType<typeof servedOfA>>;

  it("carries B's cosignature once entries are appended, and never C's (wrong key)", async () => {
    expect((await request('GET', `${a.urls.main}/tlog/verifier-key`)).text.trim()).toBe(aLogKey);
    await writeTruths(3);
    cosigned = await eventually(
      async () => {
        const cp = await servedOfA();
        return cp.size === (await headOfA()) && cp.lines.length === 2 ? cp : undefined;
      },
      30_000,
      "A's checkpoint of every entry with B's cosignature"
    );
    expect(cosigned.lines[0]).toMatch(new RegExp(`^\u2014 ${A_ORIGIN} `));
    expect(cosigned.lines[1]).toMatch(new RegExp(`^\u2014 ${B_NAME} `));
    const blob = Buffer.from(cosigned.lines[1]!.split(' ')[2]!, 'base64');
    const timestamp = verifyCosignature(cosigned.text, blob, parseVerifierKey(bWitnessKey)!);
    expect(Math.abs(timestamp! - Date.now() / 1000)).toBeLessThan(120);
  });

  it('says so in /api/status: the policy, the size a quorum cosigned, and C refused for its key', async () => {
    const status = await eventually(async () => {
      const s = await statusOfA();
      return witnessOf(s, C_NAME)?.state === 'refused' ? s : undefined;
    }, 30_000);
    expect(status.tlog.witnesses).toMatchObject({ k: 1, n: 2, witnessed_size: cosigned.size });
    expect(witnessOf(status, B_NAME)).toMatchObject({
      verifier_key: bWitnessKey,
      url: `http://127.0.0.1:${bPort}/tlog`,
      state: 'cosigned',
      cosigned_size: cosigned.size,
      reason: null
    });
    expect(witnessOf(status, C_NAME)).toMatchObject({
      verifier_key: cWrongKey,
      state: 'refused',
      cosigned_size: 0,
      reason: expect.stringMatching(/does not verify with the configured key/)
    });
    // C did cosign (it witnesses A): A refused its cosignature, it is not served.
    expect((await servedOfA()).note).not.toContain(C_NAME);
  });

  (goAvailable() ? it : it.skip)(
    "is verified by the Go verifier: the log's signature, B's cosignature, the tiles and every entry",
    async () => {
      const bin = tlogVerifierBinary();
      const dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'cosigned-'));
      const file = path.join(dir, 'checkpoint');
      fs.writeFileSync(file, cosigned.note);
      const ok = await runTlogVerifier(bin, ['-cosigned', file, '-key', aLogKey, '-witness-key', bWitnessKey]);
      expect(ok).toMatchObject({ code: 0, stderr: '' });
      expect(ok.stdout).toMatch(new RegExp(`^OK cosigned by ${B_NAME}: ${A_ORIGIN}\n${cosigned.size}\n`));
      // C's key (the wrong one configured) finds no cosignature of C on it.
      const none = await runTlogVerifier(bin, ['-cosigned', file, '-key', aLogKey, '-witness-key', cWrongKey]);
      expect([none.code, none.stderr]).toEqual([1, `FAIL: no verified signature of ${C_NAME}\n`]);
      // A's policy, 1 of B and C: met; 2 of 2 is not.
      const both = ['-cosigned', file, '-key', aLogKey, '-witness-key', bWitnessKey, '-witness-key', cWrongKey];
      const oneOfTwo = await runTlogVerifier(bin, [...both, '-quorum', '1']);
      expect(oneOfTwo).toMatchObject({ code: 0, stderr: '' });
      expect(oneOfTwo.stdout).toMatch(new RegExp(`^OK cosigned by ${B_NAME}: `));
      const twoOfTwo = await runTlogVerifier(bin, both);
      expect([twoOfTwo.code, twoOfTwo.stderr]).toEqual([1, `FAIL: no verified signature of ${C_NAME}\n`]);
      const quorum2 = await runTlogVerifier(bin, [...both, '-quorum', '2']);
      expect(quorum2.code).toBe(1);
      const served = await runTlogVerifier(bin, ['-url', `${a.urls.main}/tlog`, '-key', aLogKey]);
      expect(served).toMatchObject({ code: 0, stderr: '' });
    },
    300_000
  );

  it('runs one workflow per witness, with its state and cosigned size as search attributes', async () => {
    const handle = a.temporal.workflow.getHandle(tlogWitnessWorkflowId(a.env.TEMPORAL_TASK_QUEUE!, B_NAME));
    const described = await eventually(async () => {
      const d = await handle.describe();
      return (d.searchAttributes.WitnessCosignedSize as number[] | undefined)?.[0] === cosigned.size ? d : undefined;
    });
    expect(described.status.name).toBe('RUNNING');
    expect(described.searchAttributes).toMatchObject({ WitnessState: ['cosigned'] });
  });
});

describe('a witness down, then up', () => {
  it('never blocks signing or serving: A serves the last witnessed checkpoint and says B is unreachable', async () => {
    const before = await servedOfA();
    expect(before.lines).toHaveLength(2);
    await bWitness!.stop();
    bWitness = null;
    await writeTruths(4);
    const status = await eventually(
      async () => {
        const s = await statusOfA();
        return witnessOf(s, B_NAME)?.state === 'unreachable' ? s : undefined;
      },
      30_000,
      'B unreachable'
    );
    expect(witnessOf(status, B_NAME)).toMatchObject({
      cosigned_size: before.size,
      reason: expect.stringMatching(/^no answer from /)
    });
    expect(status.tlog.witnesses.witnessed_size).toBe(before.size);
    // Signing goes on (the newest checkpoint is signed: its size is the whole ledger); the witnessed one is served.
    expect(status.truth_count).toBeGreaterThanOrEqual(before.size + 4);
    const latest = () =>
      a.db.collection<{ _id: string; size: number }>('tlog_checkpoints').findOne({ _id: `${A_ORIGIN} latest` });
    await eventually(async () => ((await latest())?.size === status.truth_count ? true : undefined), 10_000, 'signed');
    // The same checkpoint with the same stored cosignature: the same bytes.
    expect((await servedOfA()).note).toBe(before.note);
  });

  it('catches up once B is back, with no operator', async () => {
    bWitness = await b.startSecondApi({ PORT: String(bPort) });
    const caughtUp = await eventually(
      async () => {
        const cp = await servedOfA();
        return cp.size === (await headOfA()) && cp.lines.length === 2 ? cp : undefined;
      },
      60_000,
      "A's checkpoint of every entry cosigned by B again"
    );
    const blob = Buffer.from(caughtUp.lines[1]!.split(' ')[2]!, 'base64');
    expect(verifyCosignature(caughtUp.text, blob, parseVerifierKey(bWitnessKey)!)).not.toBeNull();
    expect(witnessOf(await statusOfA(), B_NAME)).toMatchObject({ state: 'cosigned', cosigned_size: caughtUp.size });
  });

  it("follows the witness's 409 when A lost its record of what B cosigned (a database restored)", async () => {
    const docs = a.db.collection<{ _id: string }>('tlog_cosignatures');
    expect((await docs.deleteOne({ _id: `${A_ORIGIN} state:${B_NAME}` })).deletedCount).toBe(1);
    await writeTruths(2);
    // A submits from old 0; B answers 409 with the size it cosigned last; A sends again from it, with the proof.
    const cp = await eventually(
      async () => {
        const served = await servedOfA();
        return served.size === (await headOfA()) && served.lines.length === 2 ? served : undefined;
      },
      30_000,
      "A's checkpoint cosigned by B after the 409"
    );
    expect(witnessOf(await statusOfA(), B_NAME)).toMatchObject({
      state: 'cosigned',
      cosigned_size: cp.size,
      witness_size: cp.size
    });
  });

  it('saves the workflow history for the replay test (RECORD_HISTORIES=1)', async () => {
    if (process.env.RECORD_HISTORIES !== '1') return;
    const workflowId = tlogWitnessWorkflowId(a.env.TEMPORAL_TASK_QUEUE!, B_NAME);
    await a.temporal.workflow.getHandle(workflowId).terminate('history recorded');
    saveWorkflowHistory(a.env.TEMPORAL_ADDRESS!, workflowId, 'tlog-witness-down-and-up');
  });
});

describe('a quorum not met', () => {
  it('serves the newest signed checkpoint with the cosignatures it has (k=2 of 3); a 404 is a refusal', async () => {
    // Another API process of A with k=2 and a third witness D at A's own prefix (A does not witness itself: 404):
    // only B's cosignature can ever count.
    const dName = 'd.cosign.test/witness';
    const dKey = cosignatureVerifierKey(dName, rawKey(generateKeyPairSync('ed25519').publicKey));
    const strict = await a.startSecondApi(
      {},
      { TLOG_WITNESSES: `${a.env.TLOG_WITNESSES},${dKey} ${a.urls.main}/tlog`, TLOG_WITNESS_QUORUM: '2' }
    );
    try {
      await writeTruths(1);
      const cp = await eventually(
        async () => {
          const res = await fetch(`${strict.url}/tlog/checkpoint`);
          const note = await res.text();
          const lines = note.slice(note.lastIndexOf('\n\n') + 2, -1).split('\n');
          const size = Number(note.split('\n')[1]);
          return size === (await headOfA()) && lines.length === 2 ? { size, lines } : undefined;
        },
        30_000,
        "the strict replica's checkpoint of every entry with B's cosignature"
      );
      expect(cp.lines[1]).toMatch(new RegExp(`^\u2014 ${B_NAME} `));
      const status = await eventually(async () => {
        const s = (await request('GET', `${strict.url}/api/status`)).body;
        return witnessOf(s, dName)?.state === 'refused' ? s : undefined;
      }, 30_000);
      expect(status.tlog.witnesses).toMatchObject({ k: 2, n: 3, witnessed_size: null });
      expect(witnessOf(status, dName)).toMatchObject({
        cosigned_size: 0,
        reason: expect.stringMatching(/^404 from http:\/\/127\.0\.0\.1:\d+\/tlog\/add-checkpoint: .*not_found/)
      });
    } finally {
      await strict.stop();
    }
  });
});

describe('the workflow on its own', () => {
  it('backs off a refusing witness and continues as new once its history limit is reached', async () => {
    const handle = await a.temporal.workflow.start(tlogWitnessWorkflow, {
      workflowId: `witness-can/${a.env.TEMPORAL_TASK_QUEUE}`,
      taskQueue: a.env.TEMPORAL_TASK_QUEUE!,
      args: [
        {
          version: 1,
          origin: A_ORIGIN,
          name: C_NAME,
          verifier_key: cWrongKey,
          url: `${c.urls.main}/tlog`,
          poll_ms: 60_000,
          backoff_ms: 100,
          max_backoff_ms: 400,
          history_limit: 20
        }
      ]
    });
    const status = await eventually(async () => {
      const s = await handle.query(tlogWitnessStatusQuery);
      return s.runs >= 1 && s.rounds >= 1 ? s : undefined;
    }, 30_000);
    expect(status).toMatchObject({ name: C_NAME, state: 'refused', cosigned_size: 0 });
    expect(status.failures).toBeGreaterThan(1);
    await handle.terminate('test done');
    if (process.env.RECORD_HISTORIES === '1')
      saveWorkflowHistory(
        a.env.TEMPORAL_ADDRESS!,
        handle.workflowId,
        'tlog-witness-refused-continued-as-new',
        handle.firstExecutionRunId
      );
  });
});
