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
 * and a gallop of lookups for each loser). Refused inserts happen only between processes: then the loser tries the
 * next few slots by inserting them (two processes writing for one DID are usually a slot or two apart; a lookup is
 * a scan of quota_uses on FerretDB/SQLite, a refused insert is not), and after INSERT_PROBES refusals gallops
 * forward with `_id` lookups (1, 2, 4, … slots ahead, then a binary search) past the slots the other process took.
 * Refused attempts take no slot. A refund (a write that was abandoned before it started, see
 * api/routes/ledger/report.ts) deletes its slot, and this process hands that slot out again first; a process that
 * starts afresh finds such a hole with its first gallop. The first use of a day in a process deletes the slots of
 * days before yesterday in the background.
 *
 * Slot inserts are group-committed per process: the slots reserved while one insert is under way (any scope) go
 * together in the next unordered insertMany (at most SLOT_CHUNK), whose write errors say which were refused, so 64
 * concurrent writes cost a couple of inserts instead of 64 (each its own transaction on FerretDB).
 */
import { Collection, Db, MongoBulkWriteError } from 'mongodb';
import { lastOfRun } from '../../core/ledger/contiguous-run';

interface QuotaUse {
  _id: string;
  scope: string;
  day: string;
  n: number;
  at: Date;
}

const SLOT_CHUNK = 100;
/** Slots a caller tries by inserting them, after a refusal, before looking the run up (see consume). */
const INSERT_PROBES = 4;

interface SlotInsert {
  doc: QuotaUse;
  resolve: () => void;
  reject: (err: unknown) => void;
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
  private slotQueue: SlotInsert[] = [];
  private insertingSlots = false;

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
    let refusals = 0;
    for (;;) {
      // Reserved synchronously: no other caller in this process will try this slot.
      const n = state.refunded.length > 0 ? state.refunded.shift()! : state.next++;
      if (n > limit) {
        state.next = limit + 1;
        return { allowed: false, count: limit + 1 };
      }
      try {
        await this.insertSlot({ _id: `${counter}|${n}`, scope, day, n, at: new Date() });
        return { allowed: true, count: n };
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) {
          // Not known to be taken: the slot stays ours to hand out again.
          giveBack(state, n);
          throw err;
        }
        // Another process took n. Usually it is only a slot or two ahead (two processes writing for one DID take
        // turns): try the next slots by inserting them, a refused insert being cheap; past INSERT_PROBES refusals,
        // move past the run it has taken by lookups (callers here may have reserved further already).
        if (++refusals > INSERT_PROBES) state.next = Math.max(state.next, await this.firstFree(counter, n, limit));
      }
    }
  }

  /** Inserts a slot document with the others reserved meanwhile; rejects as insertOne would (code 11000: taken). */
  private insertSlot(doc: QuotaUse): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.slotQueue.push({ doc, resolve, reject });
      void this.drainSlots();
    });
  }

  private async drainSlots(): Promise<void> {
    if (this.insertingSlots) return;
    this.insertingSlots = true;
    try {
      while (this.slotQueue.length > 0) await this.insertSlots(this.slotQueue.splice(0, SLOT_CHUNK));
    } finally {
      this.insertingSlots = false;
    }
  }

  private async insertSlots(batch: SlotInsert[]): Promise<void> {
    try {
      if (batch.length === 1) await this.uses.insertOne(batch[0]!.doc);
      else await this.uses.insertMany(batch.map((s) => s.doc), { ordered: false });
      batch.forEach((s) => s.resolve());
    } catch (err) {
      if (!(err instanceof MongoBulkWriteError)) {
        batch.forEach((s) => s.reject(err)); // not known which landed: none is counted as ours
        return;
      }
      const refused = new Map((Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors]).map((e) => [e.index, e]));
      batch.forEach((s, i) => {
        const e = refused.get(i);
        if (e) s.reject(Object.assign(new Error(e.errmsg ?? 'slot insert refused'), { code: e.code }));
        else s.resolve();
      });
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
