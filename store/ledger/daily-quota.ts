/**
 * The daily quota's seam: what truth writes need of a quota counter, whoever counts. Three implementations, one per
 * way an append reaches the ledger's writer: QuotaStore (store/ledger/quota.ts) counts here; an API process of a
 * cluster forwards to the primary's (forwardQuotaTo, writer/cluster-primary.ts); a lease member takes slots from the
 * lease holder a block at a time (SlotBlocks, writer/lease-holder-quota.ts).
 */

/**
 * One daily-quota counter per (scope, day). `direct`: counted in this host even where another host holds the writer
 * lease (a claim forwarded from there).
 */
export interface DailyQuota {
  /** Takes one use of `scope` on `day`; `count` is the slot taken (1-based), or `limit + 1` when refused. */
  consume(
    scope: string,
    day: string,
    limit: number,
    how?: { direct?: boolean }
  ): Promise<{ allowed: boolean; count: number }>;
  /** Gives back a slot taken by `consume` for a use that never happened (a write abandoned before it started). */
  refund(scope: string, day: string, n: number, how?: { direct?: boolean }): Promise<void>;
}
