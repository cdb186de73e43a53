/**
 * Per-key request limits of the chat gateway (requests per minute, requests per day), exact across every API
 * process sharing one MongoDB.
 *
 * A limit of L uses in a window (a calendar minute or a UTC day) is L numbered slots; one use inserts
 * `_id` = `<scope>|<window>|<n>` and the unique `_id` decides between racing processes. So two processes together
 * never accept more than L in one window. The loser skips the slot; after INSERT_PROBES refusals in a row (or a
 * leased block with refusals) it moves past the counter's high-water mark (`chat_limit_marks`, raised by every
 * process after its inserts: one small read), and only a counter with no mark yet is searched by `_id` lookups.
 * A process that starts on a counter starts past its mark too, so slots below it that another process gave back
 * are taken again only by that process (its own list): one that gives slots back and stops using the counter
 * leaves them unused until the window ends (at most one lease, LEASE_MAX, per such process and counter), part of
 * the bounded under-admission below. Windows are fixed (calendar minutes): in any sliding 60 s span
 * at most 2 × the per-minute cap can pass (the end of one minute and the start of the next), the documented
 * overshoot. Inside a process callers reserve slots from the process's counter, so they never race each other.
 * Same design as store/ledger/quota.ts, over windows of any length, with expiry instead of day pruning.
 *
 * Leases: a counter in steady use (at least LEASE_MIN_RATE takes a second in this process) does not insert a slot
 * per request. The process inserts a block of the next slots ahead, in the background, and hands them out from
 * memory; a request then waits for no database round trip for its limits. Leased slots are real slots, so the
 * total across processes still never exceeds L. The price is a bounded under-admission: slots one process holds
 * unused are not available to another. It is bounded three ways: a block is at most LEASE_MAX slots and at most an
 * eighth of what is left of the window (so near the cap nothing is leased and admission is exact slot by slot);
 * a counter idle for LEASE_IDLE_MS gives its unused slots back; and `close()` gives every unused slot back when the
 * process stops (a crashed process's slots expire with their window).
 */
import { Collection, Db } from 'mongodb';
import { lastOfRun } from '../../core/ledger/contiguous-run';
import { InsertBatcher, writeErrorsOf } from '../insert-batch';
import { deleteByIds, retryingUpsert } from '../mongo';

interface LimitSlot {
  _id: string;
  scope: string;
  window: string;
  n: number;
  expires_at: Date;
}

/**
 * A counter's high-water record (`chat_limit_marks`, `_id` = the counter): at least the highest slot some process
 * inserted, raised (`$max`) after its inserts. A process that finds its slots taken by another reads it to move
 * past them in one small read (see catchUp).
 */
interface LimitMark {
  _id: string;
  scope: string;
  window: string;
  high: number;
  expires_at: Date;
}

interface CounterState {
  scope: string;
  window: string;
  limit: number;
  /** The next slot number this process has not tried. */
  next: number;
  /** Slots below `next` known free (given back), tried again before `next`. */
  refunded: number[];
  /** Slots this process inserted ahead and holds unused (ascending). */
  leased: number[];
  /** The lease insert in flight, if any (never rejects). */
  leasing: Promise<void> | null;
  expiresAt: number;
  /** Takes in the current and the previous second (the demand a lease is sized by). */
  takes: number;
  takesBefore: number;
  second: number;
  lastTakeAt: number;
  /** Inserts refused in a row (slots another process took). */
  refusals: number;
  /** The highest slot this process has raised the counter's mark to (or is raising it to). */
  marked: number;
  /** The mark write under way, if any. */
  marking: Promise<void> | null;
}

export interface LimitTake {
  allowed: boolean;
  /** Uses of the window, this one included (limit + 1 when refused). */
  count: number;
}

/** A counter leases only at this many takes per second or more. */
export const LEASE_MIN_RATE = 20;
/** Most slots leased in one block. */
export const LEASE_MAX = 64;
/** Slots refused in a row (taken by another process) before a take reads the counter's mark (see catchUp). */
const INSERT_PROBES = 4;
/** A counter with no take for this long gives its unused leased slots back. */
export const LEASE_IDLE_MS = 1000;

export class ChatLimitStore {
  private readonly slots: Collection<LimitSlot>;
  private readonly marks: Collection<LimitMark>;
  /** Slot inserts of concurrent requests share a command (store/chat/insert-batch.ts). */
  private readonly inserts: InsertBatcher<LimitSlot>;
  private readonly counters = new Map<string, Promise<CounterState>>();
  private lastSweep = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    db: Db,
    private readonly onPruneError: (err: unknown) => void = () => undefined,
    private readonly now: () => number = Date.now
  ) {
    this.slots = db.collection('chat_limit_slots');
    this.marks = db.collection('chat_limit_marks');
    this.inserts = new InsertBatcher(this.slots);
  }

  async take(scope: string, window: string, limit: number, expiresAt: number): Promise<LimitTake> {
    this.sweep();
    const counter = `${scope}|${window}`;
    const state = await this.counterState(counter, scope, window, limit, expiresAt);
    this.noteTake(state);
    // Slots already numbered for this process come first: a caller never skips past a lease still being inserted.
    for (;;) {
      const leased = state.leased.shift();
      if (leased !== undefined) {
        this.lease(state);
        return { allowed: true, count: leased };
      }
      if (!state.leasing) break;
      await state.leasing;
    }
    for (;;) {
      const n = state.refunded.length > 0 ? state.refunded.shift()! : state.next++;
      if (n > limit) {
        state.next = limit + 1;
        return { allowed: false, count: limit + 1 };
      }
      try {
        await this.inserts.insert(this.slot(state, n));
        state.refusals = 0;
        this.raiseMark(state, n);
        this.lease(state);
        return { allowed: true, count: n };
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) {
          giveBack(state, n);
          throw err;
        }
        // Another process took it: try the next; after INSERT_PROBES refusals in a row, find where it is.
        if (++state.refusals > INSERT_PROBES) await this.catchUp(state, n);
      }
    }
  }

  /** Gives back a slot for a use that did not happen (refused by a later limit). */
  async refund(scope: string, window: string, n: number): Promise<void> {
    const counter = `${scope}|${window}`;
    const state = this.counters.get(counter);
    const s = state ? await state : null;
    // While the counter is in steady use the slot stays this process's, ready for the next request.
    if (s && this.leaseSize(s) > 0 && !s.leased.includes(n)) {
      s.leased.push(n);
      s.leased.sort((a, b) => a - b);
      return;
    }
    await this.slots.deleteOne({ _id: `${counter}|${n}` });
    if (s) giveBack(s, n);
  }

  /** What this process last knew of a window's uses (for the x-ratelimit headers of answers that took none). */
  async known(scope: string, window: string): Promise<number> {
    const state = this.counters.get(`${scope}|${window}`);
    if (!state) return 0;
    const s = await state;
    return s.next - 1 - s.leased.length;
  }

  /** Gives back every leased slot this process holds unused (when the process stops). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.idleTimer = null;
    for (const p of this.counters.values()) {
      const s = await p.catch(() => null);
      await s?.leasing;
      await s?.marking;
    }
    await this.giveBackLeases(() => true);
  }

  private slot(state: CounterState, n: number): LimitSlot {
    return {
      _id: `${state.scope}|${state.window}|${n}`,
      scope: state.scope,
      window: state.window,
      n,
      expires_at: new Date(state.expiresAt)
    };
  }

  private noteTake(state: CounterState): void {
    const now = this.now();
    const second = Math.floor(now / 1000);
    if (second !== state.second) {
      state.takesBefore = second === state.second + 1 ? state.takes : 0;
      state.takes = 0;
      state.second = second;
    }
    state.takes++;
    state.lastTakeAt = now;
  }

  /** How many slots a counter should hold ahead now: 0 below the demand threshold or near the cap. */
  private leaseSize(state: CounterState): number {
    const rate = Math.max(state.takes, state.takesBefore);
    if (rate < LEASE_MIN_RATE || this.closed) return 0;
    const left = state.limit - state.next + 1 + state.refunded.length;
    // About 100 ms of demand, so a block lasts several database round trips.
    const size = Math.min(LEASE_MAX, Math.ceil(rate / 10), Math.floor(left / 8));
    return size >= 2 ? size : 0;
  }

  /** Tops the counter's lease up in the background when it has run below half its size. */
  private lease(state: CounterState): void {
    if (state.leasing) return;
    const size = this.leaseSize(state);
    if (size === 0 || state.leased.length * 2 > size) return;
    const wanted: number[] = [];
    while (wanted.length < size - state.leased.length) {
      const n = state.refunded.length > 0 ? state.refunded.shift()! : state.next++;
      if (n > state.limit) {
        state.next = state.limit + 1;
        break;
      }
      wanted.push(n);
    }
    if (wanted.length === 0) return;
    this.startIdleTimer();
    state.leasing = this.slots
      .insertMany(
        wanted.map((n) => this.slot(state, n)),
        { ordered: false }
      )
      .then(
        () => wanted,
        (err: unknown) => {
          const failed = writeErrorsOf(err);
          if (!failed) {
            for (const n of wanted) giveBack(state, n);
            return [];
          }
          // Slots another process took are skipped; any other refusal is given back to be tried again.
          const got = wanted.filter((_, i) => !failed.has(i));
          wanted.forEach((n, i) => {
            if (failed.get(i) && failed.get(i)!.code !== 11000) giveBack(state, n);
          });
          // Another process leases from this counter too and is ahead: move past it before the next block.
          const taken = wanted.filter((_, i) => failed.get(i)?.code === 11000);
          return taken.length > 0
            ? this.catchUp(state, Math.max(...taken)).then(
                () => got,
                () => got
              )
            : got;
        }
      )
      .then((got) => {
        if (got.length > 0) this.raiseMark(state, Math.max(...got));
        state.leased.push(...got);
        state.leased.sort((a, b) => a - b);
      })
      .finally(() => {
        state.leasing = null;
      });
  }

  private startIdleTimer(): void {
    if (this.idleTimer) return;
    this.idleTimer = setInterval(() => {
      const idleSince = this.now() - LEASE_IDLE_MS;
      void this.giveBackLeases((s) => s.lastTakeAt <= idleSince).catch(this.onPruneError);
    }, LEASE_IDLE_MS);
    this.idleTimer.unref();
  }

  /** Deletes the unused leased slots of the counters `which` picks, and lets them be taken again. */
  private async giveBackLeases(which: (s: CounterState) => boolean): Promise<void> {
    const ids: string[] = [];
    const given: [CounterState, number[]][] = [];
    for (const p of this.counters.values()) {
      const s = await p.catch(() => null);
      if (!s || s.leased.length === 0 || !which(s)) continue;
      const ns = s.leased.splice(0);
      given.push([s, ns]);
      for (const n of ns) ids.push(`${s.scope}|${s.window}|${n}`);
    }
    if (ids.length === 0) return;
    // A statement per `_id` (deleteByIds). A failed delete may have deleted some of them, so none is handed out as
    // still leased: all are taken again by insert, which is refused (and the slot skipped) for one that is still
    // there. A slot may be lost for the window, never used twice.
    try {
      await deleteByIds(this.slots, ids);
    } finally {
      for (const [s, ns] of given) for (const n of ns) giveBack(s, n);
    }
  }

  private counterState(
    counter: string,
    scope: string,
    window: string,
    limit: number,
    expiresAt: number
  ): Promise<CounterState> {
    let state = this.counters.get(counter);
    if (!state) {
      // Where the counter's mark says, else (no mark: a counter nobody has raised one for yet) by lookups.
      state = this.markOf(counter)
        .then(async (high) => (high > 0 ? high + 1 : this.firstFree(counter, 0, limit)))
        .then((next): CounterState => ({
          scope,
          window,
          limit,
          next,
          refunded: [],
          leased: [],
          leasing: null,
          expiresAt,
          takes: 0,
          takesBefore: 0,
          second: 0,
          lastTakeAt: 0,
          refusals: 0,
          marked: 0,
          marking: null
        }));
      this.counters.set(counter, state);
      state.catch(() => this.counters.delete(counter));
    }
    return state;
  }

  /** The counter's mark (0: none). */
  private async markOf(counter: string): Promise<number> {
    return (await this.marks.findOne({ _id: counter }, { projection: { high: 1 } }))?.high ?? 0;
  }

  /**
   * Slot `refused` and the ones before it were taken by another process: continue past the counter's mark, one small
   * read. A mark not ahead of this process (the other's last inserts not marked yet) leaves the search to the
   * next inserts (each refusal skips a slot); only a counter without any mark is searched by `_id` lookups (about
   * 2 log2 n round trips where the mark is one).
   */
  private async catchUp(state: CounterState, refused: number): Promise<void> {
    state.refusals = 0;
    const counter = `${state.scope}|${state.window}`;
    const high = await this.markOf(counter);
    if (high > 0) state.next = Math.max(state.next, high + 1, refused + 1);
    else state.next = Math.max(state.next, await this.firstFree(counter, refused, state.limit));
  }

  /** Raises the counter's mark to `n` after this process inserted slot `n` (one write at a time per counter). */
  private raiseMark(state: CounterState, n: number): void {
    if (n <= state.marked) return;
    state.marked = n;
    if (state.marking) return; // the write under way is followed by one for the new high
    const counter = `${state.scope}|${state.window}`;
    const write = async () => {
      for (let written = 0; written < state.marked;) {
        const high = state.marked;
        // $max: a mark never goes down here (FerretDB's is a read-modify-write: a race between processes can leave
        // the lower of two highs, which only makes the other's next catch-up take more inserts).
        await retryingUpsert(() =>
          this.marks.updateOne(
            { _id: counter },
            {
              $max: { high },
              $set: { scope: state.scope, window: state.window, expires_at: new Date(state.expiresAt) }
            },
            { upsert: true }
          )
        );
        written = high;
      }
    };
    state.marking = write()
      .catch(this.onPruneError)
      .finally(() => {
        state.marking = null;
      });
  }

  private async firstFree(counter: string, taken: number, limit: number): Promise<number> {
    const isTaken = async (n: number) =>
      (await this.slots.findOne({ _id: `${counter}|${n}` }, { projection: { _id: 1 } })) !== null;
    return (await lastOfRun(taken, isTaken, limit)) + 1;
  }

  /** Once a minute: forgets this process's expired counters and deletes expired slots (in the background). */
  private sweep(): void {
    const now = this.now();
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    for (const [counter, state] of this.counters) {
      void state.then(
        (s) => {
          if (s.expiresAt <= now) this.counters.delete(counter);
        },
        () => undefined
      );
    }
    this.slots.deleteMany({ expires_at: { $lt: new Date(now) } }).catch(this.onPruneError);
    this.marks.deleteMany({ expires_at: { $lt: new Date(now) } }).catch(this.onPruneError);
  }
}

function giveBack(state: CounterState, n: number): void {
  if (state.refunded.includes(n)) return;
  state.refunded.push(n);
  state.refunded.sort((a, b) => a - b);
}
