/**
 * deployWorkflow on its own, with @temporalio/testing on the dev server binary: the real ledger activities on
 * FerretDB (core queue) and the real file activities on a scratch dir (commands queue), with nginx's reload and
 * health check replaced so the saga's two ends are exercised without a web server (test/api/deploy.test.ts runs
 * them against a real nginx). With RECORD_HISTORIES=1 it saves the histories the replay test replays.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { WorkflowFailedError } from '@temporalio/client';
import { createDeployActivities } from '../../activities/deploy';
import { deployLayout } from '../../core/deploy/web';
import { taskQueueFor } from '../../contracts/task-queues';
import { deployWorkflow } from '../../workflows/deploy/deploy';
import { DeployInput } from '../../contracts/deploy/deploy.contract';
import { startWorkflowTestEnv, WorkflowTestEnv } from '../support/workflow-env';

jest.setTimeout(120_000);
let wf: WorkflowTestEnv;
let dataDir: string;
let healthy = true;

beforeAll(async () => {
  wf = await startWorkflowTestEnv('deploy-wf-test');
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-deploy-wf-'));
});
afterAll(async () => {
  await wf?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function withCommandsWorker<T>(fn: () => Promise<T>): Promise<T> {
  const real = createDeployActivities({ dataDir, nginxBin: '/nonexistent/nginx', webUrl: 'http://127.0.0.1:9' });
  const activities = {
    ...real,
    reloadWeb: async () => undefined,
    checkServed: async () => {
      if (!healthy) throw new Error('GET /site/index.html answered HTTP 404');
    }
  };
  const worker = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue: taskQueueFor(wf.taskQueue, 'commands'),
    activities
  });
  return worker.runUntil(fn);
}

const input = (mode: 'deploy' | 'rollback', id: string, content?: string): DeployInput => ({
  version: 1,
  mode,
  target: 'site',
  operation_id: id,
  ...(content !== undefined ? { files: [{ path: 'index.html', content }] } : {}),
  keep: 5,
  hub_did: 'did:zhongshu:hub',
  actor: 'did:example:tester'
});

const current = () => fs.readlinkSync(deployLayout(dataDir).current('site'));

test('a deploy switches current and records the outcome', async () => {
  const res = await withCommandsWorker(() =>
    wf.env.client.workflow.execute(deployWorkflow, {
      workflowId: 'deploy/site',
      taskQueue: wf.taskQueue,
      args: [input('deploy', 'r20261121T100000000-00000001', 'one')]
    })
  );
  expect(res).toMatchObject({
    outcome: 'deployed',
    release_id: 'r20261121T100000000-00000001',
    previous_release: null,
    failed_step: null
  });
  expect(res.steps.map((s) => s.step)).toEqual(['write_release', 'switch_current', 'reload', 'health_check', 'prune']);
  expect(current()).toBe('releases/r20261121T100000000-00000001');
  await wf.saveHistory('deploy/site', 'deploy-deployed');
});

test('a failed health check is compensated: previous release current, new one marked bad, rollback skips it', async () => {
  healthy = false;
  const res = await withCommandsWorker(() =>
    wf.env.client.workflow.execute(deployWorkflow, {
      workflowId: 'deploy/site',
      taskQueue: wf.taskQueue,
      args: [input('deploy', 'r20261121T100100000-00000002', 'two')]
    })
  );
  healthy = true;
  expect(res).toMatchObject({
    outcome: 'compensated',
    failed_step: 'health_check',
    previous_release: 'r20261121T100000000-00000001',
    current_release: 'r20261121T100000000-00000001'
  });
  expect(res.error).toContain('404');
  expect(current()).toBe('releases/r20261121T100000000-00000001');
  expect(fs.existsSync(path.join(deployLayout(dataDir).bad('site'), 'r20261121T100100000-00000002'))).toBe(true);
  await wf.saveHistory('deploy/site', 'deploy-compensated');

  // Nothing older than the current release that is not bad: the rollback fails as NoRollbackTarget.
  const err = await withCommandsWorker(() =>
    wf.env.client.workflow
      .execute(deployWorkflow, {
        workflowId: 'deploy/site',
        taskQueue: wf.taskQueue,
        args: [input('rollback', 'r20261121T100200000-00000003')]
      })
      .catch((e: unknown) => e)
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
});
