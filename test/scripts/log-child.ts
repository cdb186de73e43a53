/** A process logging through createLogger, for log-format.test.ts (its stdout is a pipe there). */
import { createLogger } from '../../core/logger.node';

const logger = createLogger({ LOG_LEVEL: 'info' }, 'zhongshu-hub');
logger.info({ listener: 'main', trace_id: 't-9' }, 'listening');
logger.warn({ creds: { token: 'secret' } }, 'careful');
