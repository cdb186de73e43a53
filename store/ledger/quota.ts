/**
 * Daily quotas (truth writes per DID per UTC day), exact under concurrency on MongoDB and FerretDB alike.
 *
 * A quota of L uses per day is L numbered slots; one use inserts the document `_id` = `<scope>|<day>|<n>` for the
 * lowest free n, and the unique `_id` decides between racing callers (the loser takes the next slot). A use is
 * allowed while n ≤ L. Inserts and `_id` lookups are the only operations that stay exact and fast on FerretDB,
 * whose `findAndModify` with `$inc` is a read-modify-write: a counter document let a burst of 90 concurrent
 * writes through a quota of 60.
 *
 * Slots are taken in order and never freed within the day, so the taken ones are always 1..k: each process keeps
 * the next slot it expects per counter and, when that slot turns out taken (another caller or process got there),
 * gallops forward with `_id` lookups (1, 2, 4, … slots ahead, then a binary search) instead of trying one by one.
 * Refused attempts take no slot. The first use of a day in a process deletes the slots of days before yesterday
 * in the background.
 */
import { Collection, Db } from 'mongodb';
import { lastOfRun } from '../../core/ledger/contiguous-run';

interface QuotaUse {
  _id: string;
  scope: string;
  day: string;
  n: number;
  at: Date;
}

export class QuotaStore {
  private readonly uses: Collection<QuotaUse>;
  /** counter (`<scope>|<day>`) → the slot this process will try next. Only today's counters are kept. */
  private readonly nextSlot = new Map<string, number>();
  private nextSlotDay = '';

  constructor(
    db: Db,
    private readonly onPruneError: (err: unknown) => void = () => undefined
  ) {
    this.uses = db.collection('quota_uses');
  }

  /** Takes one use of `scope` on `day`; `count` is the slot taken (1-based), or `limit + 1` when refused. */
  async consume(scope: string, day: string, limit: number): Promise<{ allowed: boolean; count: number }> {
    if (day !== this.nextSlotDay) {
      this.nextSlot.clear();
      this.nextSlotDay = day;
      this.prune(dayBefore(day)).catch(this.onPruneError);
    }
    const counter = `${scope}|${day}`;
    let n = this.nextSlot.get(counter) ?? (await this.firstFree(counter, 0, limit));
    while (n <= limit) {
      try {
        await this.uses.insertOne({ _id: `${counter}|${n}`, scope, day, n, at: new Date() });
        this.nextSlot.set(counter, n + 1);
        return { allowed: true, count: n };
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err;
        n = await this.firstFree(counter, n, limit);
      }
    }
    this.nextSlot.set(counter, limit + 1);
    return { allowed: false, count: limit + 1 };
  }

  /** Deletes the slots of days before `keepFrom` (an ISO date); returns how many. */
  async prune(keepFrom: string): Promise<number> {
    return (await this.uses.deleteMany({ day: { $lt: keepFrom } })).deletedCount;
  }

  /** The lowest free slot above `taken` (a slot known to be taken, or 0), at most `limit + 1`. */
  private async firstFree(counter: string, taken: number, limit: number): Promise<number> {
    const isTaken = async (n: number) => (await this.uses.findOne({ _id: `${counter}|${n}` }, { projection: { _id: 1 } })) !== null;
    return (await lastOfRun(taken, isTaken, limit)) + 1;
  }
}

/** The ISO date (YYYY-MM-DD) of the day before `day`. */
function dayBefore(day: string): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10);
}
