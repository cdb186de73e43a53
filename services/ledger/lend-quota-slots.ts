/**
 * The writer lease holder lends daily-quota slots to another replica (POST /internal/quota/consume and
 * /internal/quota/refund, api/routes/ledger/writer.ts): a block the replica hands out to its writes itself, so a
 * steady writer there costs no request per write, and the slots it did not use taken back. Counted here (`direct`),
 * never forwarded again.
 */
import type { DailyQuota } from '../../store/ledger/daily-quota';
import { LEASE_SHARE, MAX_LEASE } from '../../store/ledger/quota';

/**
 * A block of slots of `scope` on `day`: the first slot, then as many more as asked, at most MAX_LEASE and at most
 * 1/LEASE_SHARE of the slots above the first (near the limit, one at a time; a first slot given back earlier, a low
 * number, lets the block take what is left: docs/ledger.md#one-writer-across-hosts-the-writer-lease). Empty when
 * none is left.
 */
export async function lendQuotaSlots(
  quota: DailyQuota,
  { scope, day, limit, count }: { scope: string; day: string; limit: number; count: number }
): Promise<number[]> {
  const first = await quota.consume(scope, day, limit, { direct: true });
  if (!first.allowed) return [];
  const more = Math.min(count, MAX_LEASE, Math.max(1, Math.floor((limit - first.count) / LEASE_SHARE))) - 1;
  // A claim that fails after the first only shortens the block (those taken still go to the sender).
  const rest = await Promise.allSettled(
    Array.from({ length: Math.max(0, more) }, () => quota.consume(scope, day, limit, { direct: true }))
  );
  return [first.count, ...rest.flatMap((r) => (r.status === 'fulfilled' && r.value.allowed ? [r.value.count] : []))];
}

/** Takes back lent slots the replica did not use, one after another; how many. */
export async function takeBackQuotaSlots(
  quota: DailyQuota,
  { scope, day, slots }: { scope: string; day: string; slots: number[] }
): Promise<number> {
  for (const n of slots) await quota.refund(scope, day, n, { direct: true });
  return slots.length;
}
