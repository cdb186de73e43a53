/**
 * A workflow test environment: @temporalio/testing driving the same Temporal dev server binary (existing-path
 * executable, custom search attributes registered), a worker on the prebuilt workflow bundle with the real
 * activities writing to a database of its own on the embedded FerretDB. With RECORD_HISTORIES=1, saveHistory
 * writes the histories the replay test replays (test/replay/histories/).
 * Every port the dev server binds that a flag can set is chosen here (freePort keeps it from being handed out
 * again), and a start that fails is tried again on new ports (see scripts/stack/temporal.ts for why).
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import { MongoClient, Db } from 'mongodb';
import { createActivities } from '../../activities';
import { Ledger } from '../../store/ledger/ledger';
import { ensureIndexes } from '../../store/mongo';
import { SEARCH_ATTRIBUTES } from '../../core/search-attributes';
import { freePort } from '../../scripts/stack/process';
import { saveWorkflowHistory } from './history';
import { START_ATTEMPTS } from '../../scripts/stack/temporal';

export interface WorkflowTestEnv {
  env: TestWorkflowEnvironment;
  db: Db;
  taskQueue: string;
  /** Runs a second worker, on `taskQueue`, until `fn` settles (for workflows that must wait for a worker). */
  runWorkerUntil<T>(taskQueue: string, fn: () => Promise<T>): Promise<T>;
  /** Saves the history of the workflow's latest run, or of `runId`. */
  saveHistory(workflowId: string, name: string, runId?: string): Promise<void>;
  close(): Promise<void>;
}

export async function startWorkflowTestEnv(taskQueue: string): Promise<WorkflowTestEnv> {
  Runtime.install({
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } },
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} }
  });
  const env = await startDevServer();
  const mongo = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!);
  const db = mongo.db(`wf_${taskQueue.replace(/[^a-z0-9]/gi, '_')}_${Date.now()}`);
  await ensureIndexes(db);
  const activities = createActivities({ db, ledger: new Ledger(db) });
  const createWorker = (queue: string) =>
    Worker.create({
      connection: env.nativeConnection,
      taskQueue: queue,
      workflowBundle: { codePath: process.env.ZH_TEST_WORKFLOW_BUNDLE! },
      activities
    });
  const worker = await createWorker(taskQueue);
  const running = worker.run();

  return {
    env,
    db,
    taskQueue,
    async runWorkerUntil(queue, fn) {
      return (await createWorker(queue)).runUntil(fn);
    },
    async saveHistory(workflowId, name, runId) {
      if (process.env.RECORD_HISTORIES === '1') saveWorkflowHistory(env.address, workflowId, name, runId);
    },
    async close() {
      worker.shutdown();
      await running;
      await db.dropDatabase();
      await mongo.close();
      await env.teardown();
    }
  };
}

async function startDevServer(): Promise<TestWorkflowEnvironment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await TestWorkflowEnvironment.createLocal({
        server: {
          executable: { type: 'existing-path', path: process.env.ZH_TEST_TEMPORAL_BIN! },
          ip: '127.0.0.1',
          port: await freePort(),
          extraArgs: [
            '--headless',
            '--http-port',
            String(await freePort()),
            '--metrics-port',
            String(await freePort()),
            '--log-level',
            'error',
            ...Object.entries(SEARCH_ATTRIBUTES).flatMap(([name, type]) => ['--search-attribute', `${name}=${type}`])
          ]
        }
      });
    } catch (err) {
      if (attempt >= START_ATTEMPTS) throw err;
    }
  }
}
