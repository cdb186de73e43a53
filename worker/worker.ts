/**
 * Builds the hub's Temporal worker: dependencies created once (MongoDB, the ledger) and injected into the
 * activities; workflow code from workflows/ (bundled by the SDK, or a prebuilt bundle in tests).
 */
import { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { Config, mongoUri, temporalAddress } from '../core/config';
import { connectMongo, ensureIndexes } from '../activities/store/mongo';
import { Ledger } from '../activities/store/ledger';
import { createActivities } from '../activities';
import { ensureSearchAttributes } from './search-attributes';

export interface HubWorker {
  worker: Worker;
  /** Runs until shutdown() (or a fatal error); then closes its connections. */
  run(): Promise<void>;
  shutdown(): void;
}

export async function createHubWorker(config: Config, logger: Logger): Promise<HubWorker> {
  // A prebuilt bundle (the Docker image and the tests make one) skips bundling at every start.
  const workflowCode: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = config.WORKFLOW_BUNDLE_PATH
    ? { workflowBundle: { codePath: config.WORKFLOW_BUNDLE_PATH } }
    : { workflowsPath: require.resolve('../workflows') };
  const address = temporalAddress(config);
  await ensureSearchAttributes(address, config.TEMPORAL_NAMESPACE, logger);
  const mongo = await connectMongo({ uri: mongoUri(config), dbName: config.MONGODB_DB, appName: 'zhongshu-hub-worker' });
  await ensureIndexes(mongo.db);
  const connection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    activities: createActivities({ db: mongo.db, ledger: new Ledger(mongo.db) }),
    ...workflowCode,
    shutdownGraceTime: '10 seconds'
  });
  return {
    worker,
    run: async () => {
      try {
        await worker.run();
      } finally {
        await connection.close().catch(() => undefined);
        await mongo.close().catch(() => undefined);
      }
    },
    shutdown: () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
    }
  };
}
