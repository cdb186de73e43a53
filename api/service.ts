/**
 * Starts and stops the API side of the service: the shared context and every listener. Used by api/server.ts
 * and by the tests (which pass port 0 to get free ports).
 */
import type { Logger } from 'pino';
import { Config } from '../core/config.node';
import { createServiceContext, ServiceContext } from './context';
import { buildListeners, Listener } from './listeners';
import type { ListenerName } from './directory';

export interface RunningApi {
  ctx: ServiceContext;
  listeners: Listener[];
  /** Base URL of each listener, e.g. urls.main = "http://127.0.0.1:8080". */
  urls: Record<ListenerName, string>;
  /** Stops accepting, drains in-flight requests, then closes MongoDB and Temporal connections. */
  close(): Promise<void>;
}

export async function startApi(config: Config, logger?: Logger): Promise<RunningApi> {
  const ctx = await createServiceContext(config, logger);
  const listeners = await buildListeners(ctx);
  const urls = {} as Record<ListenerName, string>;
  try {
    for (const l of listeners) {
      await l.app.listen({ host: l.host, port: l.port });
      const address = l.app.server.address();
      const port = typeof address === 'object' && address ? address.port : l.port;
      l.port = port;
      urls[l.name] = `http://${l.host === '0.0.0.0' || l.host === '::' ? '127.0.0.1' : l.host}:${port}`;
    }
  } catch (err) {
    await Promise.all(listeners.map((l) => l.app.close()));
    await ctx.close();
    throw err;
  }
  return {
    ctx,
    listeners,
    urls,
    close: async () => {
      // The writer lease first (store/ledger/writer/lease-holder.ts): the other replicas stop forwarding here before the listeners close.
      await ctx.ledgerWriter?.release();
      await Promise.all(listeners.map((l) => l.app.close()));
      await ctx.close();
    }
  };
}
