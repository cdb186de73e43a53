/**
 * The chat gateway's per-key limits: requests this minute and today (exact across processes: numbered slots in
 * store/chat/limits.ts) and tokens today, taken per request, given back when the request is refused or not made,
 * and reported in the x-ratelimit-* headers.
 */
import { ChatError } from '../../core/chat/openai-errors';
import type { LimitTake } from '../../store/chat/limits';
import type { ChatServices } from './chat-services';

/** Where the rate headers go (a Fastify reply). */
export interface RateHeaderSink {
  header(name: string, value: string): unknown;
}

/** The UTC minute and day windows of `now`, and when each ends. */
export function windowsOf(now: number): { minute: string; minuteEnd: number; day: string; dayEnd: number } {
  const iso = new Date(now).toISOString();
  const minuteEnd = (Math.floor(now / 60_000) + 1) * 60_000;
  const dayEnd = Date.parse(`${iso.slice(0, 10)}T00:00:00Z`) + 86_400_000;
  return { minute: iso.slice(0, 16), minuteEnd, day: iso.slice(0, 10), dayEnd };
}

/** An admitted request: whose usage it counts as, and on which day. */
export interface Admitted {
  keyId: string;
  day: string;
}

/** What one request took of its key's limits (null: that store call failed). */
export interface Claims {
  keyId: string;
  plan: string;
  now: number;
  w: ReturnType<typeof windowsOf>;
  rpmScope: string;
  rpdScope: string;
  rpm: LimitTake | null;
  rpd: LimitTake | null;
  tokens: number;
}

export type KeyLimits = ReturnType<typeof createKeyLimits>;

export function createKeyLimits(chat: Pick<ChatServices, 'planOf' | 'limits' | 'usage'>) {
  const setRateHeaders = (headers: RateHeaderSink, limit: number, used: number, resetAt: number) => {
    headers.header('x-ratelimit-limit-requests', String(limit));
    headers.header('x-ratelimit-remaining-requests', String(Math.max(0, limit - used)));
    headers.header('x-ratelimit-reset-requests', `${Math.max(1, Math.ceil((resetAt - Date.now()) / 1000))}s`);
  };

  /** The rate headers from what this process knows, for answers that take no request (models, usage, 404s). */
  const knownRateHeaders = async (headers: RateHeaderSink, keyId: string, plan: string) => {
    const w = windowsOf(Date.now());
    setRateHeaders(
      headers,
      chat.planOf(plan).requests_per_minute,
      await chat.limits.known(`key:${keyId}:rpm`, w.minute),
      w.minuteEnd
    );
  };

  /**
   * Takes this request's uses of the key's limits all at once (the per-minute slot, the per-day slot, and today's
   * tokens read): three independent store calls in parallel rather than one after the other. When one of them
   * fails, the slots the others took are given back before the error goes on (no quota is lost).
   */
  const claim = async (keyId: string, plan: string): Promise<Claims> => {
    const limits = chat.planOf(plan);
    const now = Date.now();
    const w = windowsOf(now);
    const rpmScope = `key:${keyId}:rpm`;
    const rpdScope = `key:${keyId}:rpd`;
    const [rpm, rpd, tokens] = await Promise.allSettled([
      chat.limits.take(rpmScope, w.minute, limits.requests_per_minute, w.minuteEnd + 60_000),
      chat.limits.take(rpdScope, w.day, limits.requests_per_day, w.dayEnd + 3_600_000),
      chat.usage.tokensOn(keyId, w.day)
    ]);
    const claims: Claims = {
      keyId,
      plan,
      now,
      w,
      rpmScope,
      rpdScope,
      rpm: rpm.status === 'fulfilled' ? rpm.value : null,
      rpd: rpd.status === 'fulfilled' ? rpd.value : null,
      tokens: tokens.status === 'fulfilled' ? tokens.value : 0
    };
    const failed = [rpm, rpd, tokens].find((r) => r.status === 'rejected');
    if (failed) {
      await release(claims);
      throw failed.reason;
    }
    return claims;
  };

  /** Gives back the slots a claim took (for a request refused or not made after all). */
  const release = async (c: Claims, what: { rpm: boolean; rpd: boolean } = { rpm: true, rpd: true }): Promise<void> => {
    await Promise.all([
      what.rpm && c.rpm?.allowed ? chat.limits.refund(c.rpmScope, c.w.minute, c.rpm.count) : undefined,
      what.rpd && c.rpd?.allowed ? chat.limits.refund(c.rpdScope, c.w.day, c.rpd.count) : undefined
    ]);
  };

  /** Admits a claimed request, or gives back what it took and throws 429 (per minute) or 403 (daily quota). */
  const decide = async (headers: RateHeaderSink, c: Claims): Promise<Admitted> => {
    const limits = chat.planOf(c.plan);
    const { w, now, plan } = c;
    const rpm = c.rpm!;
    const rpd = c.rpd!;
    setRateHeaders(headers, limits.requests_per_minute, rpm.count, w.minuteEnd);
    const toMidnight = String(Math.max(1, Math.ceil((w.dayEnd - now) / 1000)));
    if (!rpm.allowed) {
      await release(c);
      const retry = String(Math.max(1, Math.ceil((w.minuteEnd - now) / 1000)));
      throw new ChatError(
        429,
        'rate_limit_error',
        'rate_limit_exceeded',
        `Rate limit reached: ${limits.requests_per_minute} requests per minute for plan ${plan}; retry after ${retry} s`,
        null,
        {
          'Retry-After': retry
        }
      );
    }
    if (!rpd.allowed) {
      await release(c);
      throw new ChatError(
        403,
        'insufficient_quota',
        'insufficient_quota',
        `Daily quota used up: ${limits.requests_per_day} requests per day for plan ${plan}`,
        null,
        { 'Retry-After': toMidnight }
      );
    }
    if (c.tokens >= limits.tokens_per_day) {
      await release(c);
      throw new ChatError(
        403,
        'insufficient_quota',
        'insufficient_quota',
        `Daily token quota used up: ${limits.tokens_per_day} tokens per day for plan ${plan}`,
        null,
        { 'Retry-After': toMidnight }
      );
    }
    return { keyId: c.keyId, day: w.day };
  };

  return { knownRateHeaders, claim, release, decide };
}
