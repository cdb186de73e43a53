/**
 * An independent witness: torchwood's litewitness (v0.6.1, built from the Go module proxy, its key in an
 * ssh-agent) witnesses a hub, and the hub collects its cosignature like any other witness's (TLOG_WITNESSES, the
 * witness workflow): the formats the hub speaks (signed note, checkpoint, tlog-witness request, consistency proofs,
 * cosignature/v1) are the ones another implementation reads and writes, not our reading of them. Shown: the hub's
 * checkpoint served with litewitness's cosignature (checked here and by the Go verifier); litewitness's own record
 * of the hub's tree following it through real consistency proofs; a hub whose database was altered behind its back
 * refused by litewitness (422), which the hub's witness workflow reports. Skipped with a message where Go, openssh's
 * agent tools or sqlite3 are missing.
 */
import fs from 'node:fs';
import path from 'node:path';
import { registerDid } from '../support/credentials';
import { eventually, http as request, startTestService, TestService } from '../support/service';
import { dataDirWithHubKey } from '../tlog/hub-keys';
import { servedCheckpoint } from '../tlog/served-checkpoint';
import { noteVerifierKey } from '../../core/tlog/signed-note.node';
import { parseVerifierKey, verifyCosignature } from '../../core/tlog/cosignature.node';
import { tlogWitnessStatusQuery, tlogWitnessWorkflowId } from '../../contracts/tlog/witness.contract';
import { runTlogVerifier, tlogVerifierBinary } from '../support/tlog-verifier';
import { Litewitness, litewitnessBinary, litewitnessPrerequisites, startLitewitness } from '../tlog/litewitness';
import { changeEntry } from '../tlog/ledger-tamper';

jest.setTimeout(120_000);

const ORIGIN = 'hub.litewitness.test/tlog';
const WITNESS = 'litewitness.test/witness';
const DID = 'did:example:tlog-litewitness-writer';
const missing = litewitnessPrerequisites();
if (missing.length > 0) console.warn(`skipping the litewitness suite: ${missing.join(', ')} not found`);
const describeIf = missing.length === 0 ? describe : describe.skip;

let hub: TestService;
let lw: Litewitness;
let logKey: string;
let mainUrl: string;
let written = 0;

async function write(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await request('POST', `${mainUrl}/api/report/truth`, {
      headers: { 'x-did': DID },
      body: { key: `litewitness.${written}`, value: { i: written }, truth_type: 'data' }
    });
    if (res.status !== 200) throw new Error(`write: ${res.status} ${res.text}`);
    written++;
  }
}

const served = () => servedCheckpoint(mainUrl);
const status = async () => (await request('GET', `${mainUrl}/api/status`)).body;
const cosigned = () =>
  eventually(
    async () => {
      const cp = await served();
      return cp.size === (await status()).truth_count && cp.lines.length === 2 ? cp : undefined;
    },
    30_000,
    "the hub's checkpoint of its whole ledger with litewitness's cosignature"
  );

describeIf('litewitness (torchwood v0.6.1) as a witness of a hub', () => {
  beforeAll(async () => {
    const started = Date.now();
    litewitnessBinary();
    process.stdout.write(`litewitness: binary ready in ${Date.now() - started} ms\n`);
    const { dir, raw } = dataDirWithHubKey('lw-hub');
    logKey = noteVerifierKey(ORIGIN, raw);
    lw = await startLitewitness(process.env.ZH_TEST_DATA_DIR!, WITNESS);
    // witnessctl add-log -origin <origin>; witnessctl add-key -origin <origin> -key <the hub's verifier key>
    lw.addLog(ORIGIN, logKey);
    hub = await startTestService({
      DATA_DIR: dir,
      TLOG_ORIGIN: ORIGIN,
      TLOG_WITNESSES: `${lw.verifierKey} ${lw.url}`,
      TLOG_CHECKPOINT_INTERVAL_MS: '500',
      TRUTH_WRITE_TIMEOUT_MS: '60000'
    });
    mainUrl = hub.urls.main;
    await registerDid(mainUrl, hub.adminToken, DID);
  }, 420_000);
  afterAll(async () => {
    await hub?.close();
    await lw?.stop();
  });

  let first: Awaited<ReturnType<typeof served>>;

  it('publishes the cosignature verifier key computed from the public key in its ssh-agent', () => {
    expect(lw.loggedVerifierKey).toBe(lw.verifierKey);
    expect(lw.verifierKey).toMatch(new RegExp(`^${WITNESS}\\+[0-9a-f]{8}\\+`));
  });

  it("cosigns the hub's checkpoint: served with its cosignature, which verifies, and /api/status says so", async () => {
    await write(3);
    first = await cosigned();
    expect(first.lines[1]).toMatch(new RegExp(`^\u2014 ${WITNESS} `));
    const blob = Buffer.from(first.lines[1]!.split(' ')[2]!, 'base64');
    const time = verifyCosignature(first.text, blob, parseVerifierKey(lw.verifierKey)!);
    expect(Math.abs(time! - Date.now() / 1000)).toBeLessThan(120);
    expect((await status()).tlog.witnesses).toMatchObject({
      k: 1,
      n: 1,
      witnessed_size: first.size,
      witnesses: [{ name: WITNESS, state: 'cosigned', cosigned_size: first.size, reason: null }]
    });
    expect(lw.treeOf(ORIGIN)).toEqual({ size: first.size, hash: first.root });
  });

  it('follows the hub through consistency proofs that litewitness checks (sumdb/tlog), and the Go verifier agrees', async () => {
    await write(5);
    const next = await cosigned();
    expect(next.size).toBeGreaterThan(first.size);
    // litewitness moved from the first size only after checking the hub's proof from it.
    expect(lw.treeOf(ORIGIN)).toEqual({ size: next.size, hash: next.root });
    const bin = tlogVerifierBinary();
    const dir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'lw-cp-'));
    fs.writeFileSync(path.join(dir, 'first'), first.note);
    fs.writeFileSync(path.join(dir, 'next'), next.note);
    const ok = await runTlogVerifier(bin, [
      '-cosigned',
      path.join(dir, 'next'),
      '-key',
      logKey,
      '-witness-key',
      lw.verifierKey
    ]);
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    expect(ok.stdout).toMatch(new RegExp(`^OK cosigned by ${WITNESS}: `));
    const tiles = await runTlogVerifier(bin, [
      '-url',
      `${mainUrl}/tlog`,
      '-key',
      logKey,
      '-old',
      path.join(dir, 'first')
    ]);
    expect(tiles).toMatchObject({ code: 0, stderr: '' });
  }, 300_000);

  it("refuses the hub's checkpoint once its database was altered behind its back (422), as the workflow reports", async () => {
    const before = await served();
    await hub.stopWorker();
    await changeEntry(hub.db, 2, '{"i":"rewritten"}');
    await hub.startWorker();
    // A process started on the altered database signs its tree and tells the witness workflow.
    const restarted = await hub.startSecondApi();
    mainUrl = restarted.url;
    const handle = hub.temporal.workflow.getHandle(tlogWitnessWorkflowId(hub.env.TEMPORAL_TASK_QUEUE!, WITNESS));
    // Up to 90 s: the worker and a second API start on a machine that runs other stacks beside this one. The last
    // status seen is in the failure's message.
    const query = await eventually(
      async () => {
        const q = await handle.query(tlogWitnessStatusQuery);
        if (q.state === 'refused' && /^422 from /.test(q.reason ?? '')) return q;
        throw new Error(`status ${JSON.stringify(q)}`);
      },
      90_000,
      'the witness workflow refused with 422'
    );
    expect(query.hub_size).toBe(before.size);
    await eventually(async () => {
      const d = await handle.describe();
      return (d.searchAttributes.WitnessState as string[] | undefined)?.[0] === 'refused' ? true : undefined;
    });
    // litewitness kept the tree it cosigned.
    expect(lw.treeOf(ORIGIN)).toEqual({ size: before.size, hash: before.root });
    expect((await served()).lines).toHaveLength(1);
  }, 240_000);
});
