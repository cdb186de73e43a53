/** API process entry: every listener; SIGINT/SIGTERM stop accepting, drain requests, close connections, exit. */
import { ConfigError, loadConfig } from '../core/config.node';
import { createLogger } from '../core/logger.node';
import { startApi } from './service';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config, 'zhongshu-hub');
  const api = await startApi(config, logger);
  for (const l of api.listeners) logger.info({ listener: l.name, url: api.urls[l.name], bind: `${l.host}:${l.port}` }, 'listening');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: draining requests');
    const force = setTimeout(() => {
      logger.error('shutdown took longer than 15 s; exiting');
      process.exit(1);
    }, 15_000);
    force.unref();
    await api.close();
    logger.info('stopped');
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((err) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else process.stderr.write(`api failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
