/**
 * Stopping the database mid-run: writers never hang (a bounded 503 instead), nothing acknowledged is lost, and a
 * retry with the same Idempotency-Key after the database is back lands exactly once. Uses a FerretDB (on a
 * PostgreSQL) of its own, so the shared one keeps serving the other suites; FerretDB is what stops and starts again.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startFerretDb } from '../../scripts/stack/ferretdb';
import { startPostgres } from '../../scripts/stack/postgres';
import { freePort, ServerHandle } from '../../scripts/stack/process';
import { registerDid } from '../support/credentials';
import { eventually, http, startTestService, TestService } from '../support/service';

let svc: TestService;
let ferret: ServerHandle & { uri: string };
let postgres: ServerHandle & { url: string };
let dataDir: string;
let port: number;
const DID = 'did:example:steady';

const startDb = async () =>
  (ferret = await startFerretDb({
    dataDir,
    port,
    postgresqlUrl: postgres.url,
    echo: process.env.ZH_TEST_ECHO === '1'
  }));

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'own-ferret-'));
  port = await freePort();
  postgres = await startPostgres({ dataDir, echo: process.env.ZH_TEST_ECHO === '1' });
  await startDb();
  // A quota far above what 4 writers reach in the run (keyed writes are as fast as others: no lookup before them).
  svc = await startTestService(
    { MONGODB_URI: ferret.uri, TRUTH_WRITE_TIMEOUT_MS: '3000', TRUTH_DAILY_QUOTA: '1000000' },
    { worker: false }
  );
  await registerDid(svc.urls.main, svc.adminToken, DID);
});
afterAll(async () => {
  await svc?.close();
  await ferret?.stop();
  await postgres?.stop();
});

it('answers 503 while the database is down, loses no acknowledged write, and lands retries exactly once', async () => {
  const acknowledged: { key: string; seq: number; event_id: string }[] = [];
  const refused: { key: string; idem: string; status: number; error: string }[] = [];
  let running = true;
  let n = 0;
  const writer = async () => {
    while (running) {
      const i = n++;
      const key = `steady.w.${i}`;
      const idem = `w-${i}`;
      const res = await http('POST', `${svc.urls.main}/api/report/truth`, {
        headers: { 'x-did': DID, 'idempotency-key': idem },
        body: { key, value: { i } }
      });
      if (res.status === 200) acknowledged.push({ key, seq: res.body.seq, event_id: res.body.event_id });
      else
        refused.push({
          key,
          idem,
          status: res.status,
          error: `${res.status} ${res.body?.error}: ${res.body?.message}`
        });
    }
  };
  const writers = Array.from({ length: 4 }, writer);
  await new Promise((r) => setTimeout(r, 1500));
  await ferret.stop();
  await new Promise((r) => setTimeout(r, 4000));
  await startDb();
  await new Promise((r) => setTimeout(r, 2000));
  running = false;
  await Promise.all(writers);

  expect(acknowledged.length).toBeGreaterThan(0);
  expect(refused.length).toBeGreaterThan(0);
  // Every refusal was a clean 503 (never a hang, never a 500).
  expect([...new Set(refused.map((r) => r.error))].filter((e) => !e.startsWith('503 '))).toEqual([]);

  // Every acknowledged write is in the ledger as acknowledged.
  // (One read of the whole ledger: a query per entry would scan it each time on FerretDB.)
  const ledger = svc.db.collection('ledger');
  const byEventId = new Map(
    (await ledger.find({}, { projection: { seq: 1, key: 1, event_id: 1 } }).toArray()).map((d) => [d.event_id, d])
  );
  for (const a of acknowledged) expect(byEventId.get(a.event_id)).toMatchObject({ seq: a.seq, key: a.key });

  // Once the service reports the database up again, retrying each refused write with its Idempotency-Key (as a
  // client would, after Retry-After) lands it exactly once, whether or not the refused attempt reached the database.
  // The running service sees the database again by itself: no restart (this once took a restart, until the
  // driver patch, docs/storage.md#dependency-patches).
  const seesDatabase = async () =>
    (await http('GET', `${svc.urls.main}/health`)).body.mongo === 'up' ? true : undefined;
  await eventually(seesDatabase, 30000, 'the service to see the database again');
  for (const r of refused) {
    await eventually(
      async () => {
        const res = await http('POST', `${svc.urls.main}/api/report/truth`, {
          headers: { 'x-did': DID, 'idempotency-key': r.idem },
          body: { key: r.key, value: {} }
        });
        if (res.status === 503) return undefined;
        expect(res.status).toBe(200);
        return true;
      },
      60000,
      `the retry of ${r.key}`
    );
    expect(await ledger.countDocuments({ key: r.key })).toBe(1);
  }

  const verify = await http('GET', `${svc.urls.main}/api/verify`);
  expect(verify.body).toMatchObject({ ok: true, consistent: true });
}, 400000);
