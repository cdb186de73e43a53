/**
 * Restarting the Temporal server while approvals are pending loses none of them. Runs against a Temporal dev
 * server of its own (state in a SQLite file), so the shared one keeps serving the other suites.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startTemporal } from '../../scripts/stack/temporal';
import { freePort, ServerHandle } from '../../scripts/stack/process';
import { issueHomologousToken, registerDid } from '../support/credentials';
import { eventually, http, startTestService, TestService } from '../support/service';

let svc: TestService;
let temporal: ServerHandle & { address: string };
let dataDir: string;
let port: number;
const DID = 'did:example:patient';

const startServer = async () => (temporal = await startTemporal({ dataDir, port, uiPort: 0, namespace: 'default', headless: true, echo: false }));

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(process.env.ZH_TEST_DATA_DIR!, 'own-temporal-'));
  port = await freePort();
  await startServer();
  svc = await startTestService({ TEMPORAL_ADDRESS: temporal.address });
  await registerDid(svc.urls.main, svc.adminToken, DID);
});
afterAll(async () => {
  await svc?.close();
  await temporal?.stop();
});

it('keeps a pending approval across a Temporal server restart and completes it afterwards', async () => {
  const token = await issueHomologousToken(svc.urls.main, svc.adminToken);
  const held = await http('POST', `${svc.urls.main}/api/report/truth`, { headers: { 'x-did': DID }, body: { key: 'ops.risk.survivor', value: { s: 1 }, truth_type: 'risk' } });
  expect(held.status).toBe(202);

  await temporal.stop();
  await startServer();

  const decided = await eventually(async () => {
    const res = await http('POST', `${svc.urls.main}/api/truth/approvals/${held.body.approval_id}/approve`, { headers: { 'x-zr-token': token }, body: { reason: 'after the restart' } });
    return res.status === 200 ? res.body : undefined;
  }, 60000, 'the approval to be accepted after the restart');
  const final = decided.final
    ? decided.approval
    : await eventually(async () => {
        const res = await http('GET', `${svc.urls.main}/api/truth/approvals/${held.body.approval_id}`, { headers: { 'x-zr-token': token } });
        return res.body.approval?.state === 'approved' ? res.body.approval : undefined;
      }, 60000, 'the approval to complete');
  expect(final).toMatchObject({ state: 'approved', reason: 'after the restart' });
  const found = await http('GET', `${svc.urls.main}/api/truth?key=ops.risk.survivor`);
  expect(found.body.results).toHaveLength(1);
  expect(found.body.results[0].seq).toBe(final.seq);
}, 180000);
