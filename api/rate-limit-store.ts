/**
 * The store of @fastify/rate-limit for this service: counts in MongoDB (store/window-limits.ts), so a client
 * address's limit on a route holds across every API process (`API_PROCESSES`, replicas), not per process as the
 * plugin's in-memory store would. The window is fixed (`timeWindow` long, aligned to the epoch): in any sliding span
 * of that length at most twice the limit can pass (the end of one window and the start of the next). A refusal
 * inserts nothing. Each route counts apart (the plugin makes one child store per route).
 */
import type { FastifyRateLimitStore } from '@fastify/rate-limit';
import type { WindowLimitStore } from '../store/window-limits';

type Callback = (err: Error | null, result?: { current: number; ttl: number }) => void;
type ChildParams = Parameters<FastifyRateLimitStore['child']>[0];
interface RouteInfo {
  method?: string | string[];
  url?: string;
}

/** The store class @fastify/rate-limit instantiates (`store` option), counting in `limits`. */
export function rateLimitStore(limits: WindowLimitStore) {
  return class MongoRateLimitStore implements FastifyRateLimitStore {
    constructor(
      _global?: unknown,
      private readonly route = 'global'
    ) {}

    incr(key: string, cb: Callback, timeWindow: number, max: number): void {
      const now = Date.now();
      const windowNo = Math.floor(now / timeWindow);
      const windowEnd = (windowNo + 1) * timeWindow;
      limits.take(`rl:${this.route}:${key}`, String(windowNo), max, windowEnd + timeWindow).then(
        (take) => cb(null, { current: take.count, ttl: windowEnd - now }),
        (err: unknown) => cb(err instanceof Error ? err : new Error(String(err)))
      );
    }

    child(params: ChildParams): MongoRateLimitStore {
      // The plugin (v11) passes the route's merged limit settings with the route under `routeInfo`; its typings say
      // the route options themselves: either way the route is found.
      const info: RouteInfo = 'routeInfo' in params ? (params as { routeInfo: RouteInfo }).routeInfo : params;
      const method = Array.isArray(info?.method) ? info.method.join(',') : (info?.method ?? '');
      return new MongoRateLimitStore(undefined, `${method} ${info?.url ?? ''}`);
    }
  };
}
