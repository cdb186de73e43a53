/**
 * Builds the hub's Temporal workers: dependencies created once (MongoDB, the ledger) and injected into the
 * activities; one Worker per task queue kind (contracts/task-queues.ts) in WORKER_TASK_QUEUES, all in this process
 * by default. The core queue runs the workflow code (bundled by the SDK, or a prebuilt bundle) and the MongoDB
 * activities; the models and commands queues run their slow activities, so they never delay the core queue.
 */
import { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { Config, deployActivityDeps, mongoUri, temporalConnectionSettings } from '../core/config.node';
import { connectMongo, ensureIndexes } from '../store/mongo';
import { Ledger } from '../store/ledger/ledger';
import { joinWriterLease } from '../store/ledger/writer/lease-holder';
import { chooseWriter } from '../store/ledger/writer/transports';
import { createActivitiesByQueue } from '../activities';
import { daemonActivityDeps } from '../activities/daemon';
import { taskQueueFor } from '../contracts/task-queues';
import { ensureSearchAttributes } from './search-attributes';

export interface HubWorker {
  workers: Worker[];
  /** The task queues this process polls. */
  taskQueues: string[];
  /** Runs until shutdown() (or a fatal error); then closes its connections. */
  run(): Promise<void>;
  shutdown(): void;
}

export async function createHubWorker(config: Config, logger: Logger): Promise<HubWorker> {
  // A prebuilt bundle (the Docker image and the tests make one) skips bundling at every start.
  const workflowCode: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = config.WORKFLOW_BUNDLE_PATH
    ? { workflowBundle: { codePath: config.WORKFLOW_BUNDLE_PATH } }
    : { workflowsPath: require.resolve('../workflows') };
  const reach = temporalConnectionSettings(config);
  await ensureSearchAttributes(reach, config.TEMPORAL_NAMESPACE, logger);
  const mongo = await connectMongo({
    uri: mongoUri(config),
    dbName: config.MONGODB_DB,
    appName: 'zhongshu-hub-worker'
  });
  await ensureIndexes(mongo.db);
  const connection = await NativeConnection.connect(reach);
  // With the writer lease (LEDGER_FORWARD_SECRET) the hub's own events go to the API replica holding it, like every
  // replica's appends; the worker never holds it (no listener to be reached at). Its appends all carry keys, so an
  // activity retried after an unanswered forward cannot append twice.
  const writer = await joinWriterLease(mongo.db, config, logger, { mayHold: false });
  const activities = createActivitiesByQueue({
    db: mongo.db,
    ledger: new Ledger(mongo.db, { writer: chooseWriter({ leaseMember: writer }) }),
    deploy: deployActivityDeps(config),
    daemon: daemonActivityDeps(config)
  });
  const workers: Worker[] = [];
  for (const kind of config.WORKER_TASK_QUEUES) {
    const taskQueue = taskQueueFor(config.TEMPORAL_TASK_QUEUE, kind);
    if (kind !== 'core' && Object.keys(activities[kind]).length === 0) {
      logger.info({ taskQueue }, 'no activities on this task queue yet; no worker started for it');
      continue;
    }
    workers.push(
      await Worker.create({
        connection,
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueue,
        activities: activities[kind],
        // Workflows run on the core queue only.
        ...(kind === 'core' ? workflowCode : {}),
        shutdownGraceTime: '10 seconds'
      })
    );
  }
  if (workers.length === 0) {
    await writer?.close().catch(() => undefined);
    await connection.close().catch(() => undefined);
    await mongo.close().catch(() => undefined);
    throw new Error(
      `WORKER_TASK_QUEUES=${config.WORKER_TASK_QUEUES.join(',')}: none of these task queues has activities yet, so this process would poll nothing`
    );
  }
  return {
    workers,
    taskQueues: workers.map((w) => w.options.taskQueue),
    run: async () => {
      try {
        await Promise.all(workers.map((w) => w.run()));
      } finally {
        await writer?.close().catch(() => undefined);
        await connection.close().catch(() => undefined);
        await mongo.close().catch(() => undefined);
      }
    },
    shutdown: () => {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    }
  };
}
