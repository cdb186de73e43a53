/** Log options shared by the API and the worker: pino JSON lines, credentials redacted wherever they appear. */
import pino, { Logger } from 'pino';
import type { Config } from './config.node';

export function createLogger(config: Pick<Config, 'LOG_LEVEL'>, name: string): Logger {
  return pino({
    name,
    level: config.LOG_LEVEL,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-external-key"]',
        'req.headers["x-zr-token"]',
        'req.headers["x-capture-token"]',
        'req.headers["x-order-root"]',
        'req.headers["x-slim-group-key"]',
        '*.epoch_key',
        '*.api_key',
        '*.client_secret',
        '*.token',
        '*.order_root'
      ],
      censor: '[redacted]'
    }
  });
}
