/**
 * Daily quotas (truth writes per DID per UTC day), exact under concurrency on MongoDB and FerretDB alike.
 *
 * A quota of L uses per day is L numbered slots; one use inserts the document `_id` = `<scope>|<day>|<n>` for the
 * lowest free n, and the unique `_id` decides between racing callers (the loser takes the next slot). A use is
 * allowed while n ≤ L. Inserts and `_id` lookups are the only operations that stay exact and fast on FerretDB,
 * whose `findAndModify` with `$inc` is a read-modify-write: a counter document let a burst of 90 concurrent
 * writes through a quota of 60.
 *
 * Slots are taken in order and only given back by a refund, so the taken ones are (nearly) always 1..k. Inside one
 * process callers never race: each caller reserves its slot from the process's counter before it inserts (64
 * concurrent writes of one DID are 64 inserts of 64 different slots, not 64 tries of the same slot with one winner
 * and a gallop of lookups for each loser). Refused inserts happen only between processes: then the loser gallops
 * forward with `_id` lookups (1, 2, 4, … slots ahead, then a binary search) past the slots the other process took.
 * Refused attempts take no slot. A refund (a write that was abandoned before it started, see
 * api/routes/ledger/report.ts) deletes its slot, and this process hands that slot out again first; a process that
 * starts afresh finds such a hole with its first gallop. The first use of a day in a process deletes the slots of
 * days before yesterday in the background.
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

/** What this process knows of one counter (`<scope>|<day>`). */
interface CounterState {
  /** The slot the next caller reserves, unless a refunded one is waiting. */
  next: number;
  /** Slots this process gave back, handed out again first (lowest first). */
  refunded: number[];
}

export class QuotaStore {
  private readonly uses: Collection<QuotaUse>;
  /** Today's counters; a promise so that concurrent first uses of a counter share one gallop. */
  private readonly counters = new Map<string, Promise<CounterState>>();
  private countersDay = '';

  constructor(
    db: Db,
    private readonly onPruneError: (err: unknown) => void = () => undefined
  ) {
    this.uses = db.collection('quota_uses');
  }

  /** Takes one use of `scope` on `day`; `count` is the slot taken (1-based), or `limit + 1` when refused. */
  async consume(scope: string, day: string, limit: number): Promise<{ allowed: boolean; count: number }> {
    if (day !== this.countersDay) {
      this.counters.clear();
      this.countersDay = day;
      this.prune(dayBefore(day)).catch(this.onPruneError);
    }
    const counter = `${scope}|${day}`;
    const state = await this.counterState(counter, limit);
    for (;;) {
      // Reserved synchronously: no other caller in this process will try this slot.
      const n = state.refunded.length > 0 ? state.refunded.shift()! : state.next++;
      if (n > limit) {
        state.next = limit + 1;
        return { allowed: false, count: limit + 1 };
      }
      try {
        await this.uses.insertOne({ _id: `${counter}|${n}`, scope, day, n, at: new Date() });
        return { allowed: true, count: n };
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) {
          // Not known to be taken: the slot stays ours to hand out again.
          giveBack(state, n);
          throw err;
        }
        // Another process took n: move past the run it has taken (callers here may have reserved further already).
        state.next = Math.max(state.next, await this.firstFree(counter, n, limit));
      }
    }
  }

  /** Gives back a slot taken by `consume` for a use that never happened (a write abandoned before it started). */
  async refund(scope: string, day: string, n: number): Promise<void> {
    const counter = `${scope}|${day}`;
    await this.uses.deleteOne({ _id: `${counter}|${n}` });
    const state = day === this.countersDay ? this.counters.get(counter) : undefined;
    if (state) giveBack(await state, n);
  }

  /** Deletes the slots of days before `keepFrom` (an ISO date); returns how many. */
  async prune(keepFrom: string): Promise<number> {
    return (await this.uses.deleteMany({ day: { $lt: keepFrom } })).deletedCount;
  }

  private counterState(counter: string, limit: number): Promise<CounterState> {
    let state = this.counters.get(counter);
    if (!state) {
      state = this.firstFree(counter, 0, limit).then((next) => ({ next, refunded: [] }));
      this.counters.set(counter, state);
      // A failed first lookup is not remembered: the next caller tries again.
      state.catch(() => this.counters.delete(counter));
    }
    return state;
  }

  /** The lowest free slot above `taken` (a slot known to be taken, or 0), at most `limit + 1`. */
  private async firstFree(counter: string, taken: number, limit: number): Promise<number> {
    const isTaken = async (n: number) => (await this.uses.findOne({ _id: `${counter}|${n}` }, { projection: { _id: 1 } })) !== null;
    return (await lastOfRun(taken, isTaken, limit)) + 1;
  }
}

function giveBack(state: CounterState, n: number): void {
  if (state.refunded.includes(n)) return;
  state.refunded.push(n);
  state.refunded.sort((a, b) => a - b);
}

/** The ISO date (YYYY-MM-DD) of the day before `day`. */
function dayBefore(day: string): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10);
}
