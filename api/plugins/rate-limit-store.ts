/**
 * The store behind @fastify/rate-limit (the per-address limits of the anonymous routes that create state, such as
 * POST /a2a/register): counted in MongoDB, so the limit holds across every API process and replica sharing the
 * database, not per process. Each use is a numbered slot of the window (store/chat/limits.ts, the same counters as
 * the chat gateway's and the trial chat's per-minute limits; scopes `route:<method> <url>:<address>`), and the
 * unique slot `_id` decides between racing processes, so N processes together never admit more than the limit in
 * a window.
 *
 * Windows are fixed and aligned to the clock (for a 60 s limit: calendar minutes, on each process's clock), so every
 * process counts the same window; @fastify/rate-limit's own in-memory store starts a window at an address's first
 * request. As with any fixed window, a burst at the end of one window and the start of the next can pass up to twice
 * the limit within 60 s. A refused request takes no slot. If MongoDB cannot be reached the request fails with the
 * database's 503 (no admission without a count).
 */
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { ChatLimitStore } from '../../store/chat/limits';

/** What @fastify/rate-limit 11 passes to `child` at run time: the route's merged options, `routeInfo` the route. */
type RouteLimitOptions = { routeInfo?: { method?: string | string[]; url?: string } };

/** A @fastify/rate-limit `store` class counting in `limits`; one child per route, so routes never share a count. */
export function sharedRateLimitStore(limits: ChatLimitStore, now: () => number = Date.now): FastifyRateLimitStoreCtor {
  class SharedRateLimitStore implements FastifyRateLimitStore {
    /** The plugin builds one from its options (never used to count: every limited route gets its own child). */
    constructor(
      _options: unknown,
      private readonly route = ''
    ) {}

    incr(key: string, cb: Parameters<FastifyRateLimitStore['incr']>[1], timeWindow: number, max: number): void {
      const at = now();
      const windowNo = Math.floor(at / timeWindow);
      const windowEnd = (windowNo + 1) * timeWindow;
      // Slots are kept a minute past their window (pruned by the store).
      limits.take(`route:${this.route}:${key}`, String(windowNo), max, windowEnd + 60_000).then(
        (take) => cb(null, { current: take.count, ttl: windowEnd - at }),
        (err: Error) => cb(err)
      );
    }

    child(routeOptions: Parameters<FastifyRateLimitStore['child']>[0]): FastifyRateLimitStore {
      const { routeInfo } = routeOptions as unknown as RouteLimitOptions;
      // (fastify.rateLimit() limiters have no route: they would all share one count.)
      if (!routeInfo?.url)
        throw new Error('the shared rate-limit store counts per route: set config.rateLimit on a route');
      const method = routeInfo.method;
      return new SharedRateLimitStore(
        null,
        `${Array.isArray(method) ? method.join(',') : (method ?? '')} ${routeInfo.url}`
      );
    }
  }
  return SharedRateLimitStore;
}
