/**
 * What the SDK logs through: any object with these methods (console fits). The SDK logs
 * messages and plain fields only: never request headers, so never the node key.
 */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

const noop = () => undefined;

/** Logs nothing (the default): the application sees what happens through the client's events. */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };
