/** Worker process entry: a worker per task queue in WORKER_TASK_QUEUES; SIGINT/SIGTERM drain them and exit. */
import { Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import { loadConfig } from '../core/config.node';
import {
  checkReferencedConfiguration,
  exitOnInvalidConfiguration,
  isConfigurationError
} from '../core/config-check.node';
import { createLogger } from '../core/logger.node';
import { createHubWorker } from './worker';

async function main(): Promise<void> {
  const config = loadConfig();
  // Before anything connects: an invalid setting stops the process with exit code 78 and its one message.
  checkReferencedConfiguration(config);
  const logger = createLogger(config, 'zhongshu-hub-worker');
  Runtime.install({ telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } } });
  const hub = await createHubWorker(config, logger);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      logger.info({ signal }, 'worker shutting down');
      hub.shutdown();
    });
  }
  logger.info({ taskQueues: hub.taskQueues, namespace: config.TEMPORAL_NAMESPACE }, 'worker polling');
  await hub.run();
  logger.info('worker stopped');
}

main().catch((err) => {
  if (isConfigurationError(err)) exitOnInvalidConfiguration('worker', err);
  process.stderr.write(`worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
