/**
 * deployConfigWorkflow on its own, with @temporalio/testing on the dev server binary: the real ledger activities on
 * FerretDB (core queue) and the real config activities on a scratch dir, with Debian's nginx for `nginx -t` (no
 * nginx is started: the reload is replaced, so the saga's ends are exercised without a web server;
 * test/api/deploy.test.ts runs them against a running nginx). With RECORD_HISTORIES=1 it saves the histories the
 * replay test replays.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { createDeployActivities } from '../../activities/deploy';
import { deployLayout } from '../../core/deploy/web';
import { findNginx, writeNginxConf } from '../../scripts/stack/nginx';
import { taskQueueFor } from '../../contracts/task-queues';
import { deployConfigWorkflow } from '../../workflows/deploy/config';
import { DeployConfigInput } from '../../contracts/deploy/config.contract';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

const nginxBin = findNginx(process.env.NGINX_BIN ?? '/usr/sbin/nginx');
const describeWithNginx = nginxBin ? describe : describe.skip;

describeWithNginx('deployConfigWorkflow', () => {
  jest.setTimeout(120_000);
  let wf: WorkflowTestEnv;
  let dataDir: string;
  let reloadFails = false;

  beforeAll(async () => {
    wf = await startWorkflowTestEnv('deploy-config-wf-test');
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-deploy-config-wf-'));
    writeNginxConf({ dataDir, host: '127.0.0.1', port: 9 });
  });
  afterAll(async () => {
    await wf?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function withCommandsWorker<T>(fn: () => Promise<T>): Promise<T> {
    const real = createDeployActivities({ dataDir, nginxBin: nginxBin!, webUrl: 'http://127.0.0.1:9' });
    const activities = {
      ...real,
      reloadConfirmed: async () => {
        if (reloadFails) throw new Error('nginx -s reload failed: nginx.pid not found');
      }
    };
    const worker = await Worker.create({
      connection: wf.env.nativeConnection,
      taskQueue: taskQueueFor(wf.taskQueue, 'commands'),
      activities
    });
    return worker.runUntil(fn);
  }

  const input = (fragment: string, op: string): DeployConfigInput => ({
    version: 1,
    target: 'site',
    fragment,
    operation_id: op,
    pool: { first: 18000, last: 18999 },
    hub_did: 'did:zhongshu:hub',
    actor: 'did:example:tester'
  });
  const execute = (i: DeployConfigInput) =>
    withCommandsWorker(() =>
      wf.env.client.workflow.execute(deployConfigWorkflow, {
        workflowId: 'deploy-config',
        taskQueue: wf.taskQueue,
        args: [i]
      })
    );
  const source = () => fs.readFileSync(deployLayout(dataDir).fragmentSource('site'), 'utf8');
  const GOOD = 'location = /site/ping { return 200 "pong"; }';

  test('a valid fragment is written, tested and reloaded', async () => {
    const res = await execute(input(GOOD, 'c20261121T100000000-00000001'));
    expect(res).toMatchObject({ outcome: 'configured', failed_step: null, nginx_error: null, removed: false });
    expect(res.steps.map((s) => s.step)).toEqual(['write_and_test', 'reload']);
    expect(source()).toBe(GOOD);
    expect(fs.readFileSync(deployLayout(dataDir).fragmentLocations('site'), 'utf8')).toContain('return 200 "pong"');
    expect(fs.existsSync(deployLayout(dataDir).configBackup('c20261121T100000000-00000001'))).toBe(false);
    await wf.saveHistory('deploy-config', 'deploy-config-configured');
  });

  test('nginx -t failing: rejected with nginx text, the previous files restored', async () => {
    const res = await execute(input('location = /site/ping { bogus_directive on; }', 'c20261121T100100000-00000002'));
    expect(res).toMatchObject({ outcome: 'rejected', failed_step: 'write_and_test' });
    expect(res.nginx_error).toContain('unknown directive "bogus_directive"');
    expect(source()).toBe(GOOD);
    expect(fs.readFileSync(deployLayout(dataDir).fragmentLocations('site'), 'utf8')).toContain('return 200 "pong"');
    await wf.saveHistory('deploy-config', 'deploy-config-rejected');
  });

  test('a failed reload is compensated: the previous files restored', async () => {
    reloadFails = true;
    const res = await execute(input('location = /site/ping { return 200 "other"; }', 'c20261121T100200000-00000003'));
    reloadFails = false;
    expect(res).toMatchObject({ outcome: 'compensated', failed_step: 'reload' });
    expect(res.steps.map((s) => [s.step, s.ok])).toEqual([
      ['write_and_test', true],
      ['reload', false],
      ['restore', true]
    ]);
    expect(source()).toBe(GOOD);
    await wf.saveHistory('deploy-config', 'deploy-config-compensated');
  });
});
