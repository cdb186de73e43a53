/**
 * Per-key request limits of the chat gateway (requests per minute, requests per day), exact across every API
 * process sharing one MongoDB.
 *
 * A limit of L uses in a window (a calendar minute or a UTC day) is L numbered slots; one use inserts
 * `_id` = `<scope>|<window>|<n>` and the unique `_id` decides between racing processes (the loser moves past the
 * run the other took, with `_id` lookups only: the one query FerretDB answers without a scan). So two processes
 * together never accept more than L in one window. Windows are fixed (calendar minutes): in any sliding 60 s span
 * at most 2 × the per-minute cap can pass (the end of one minute and the start of the next), the documented
 * overshoot. Inside a process callers reserve slots from the process's counter, so they never race each other.
 * Same design as store/ledger/quota.ts, over windows of any length, with expiry instead of day pruning.
 */
import { Collection, Db } from 'mongodb';
import { lastOfRun } from '../../core/ledger/contiguous-run';
import { InsertBatcher } from './insert-batch';

interface LimitSlot {
  _id: string;
  scope: string;
  window: string;
  n: number;
  expires_at: Date;
}

interface CounterState {
  next: number;
  refunded: number[];
  expiresAt: number;
}

export interface LimitTake {
  allowed: boolean;
  /** Uses of the window, this one included (limit + 1 when refused). */
  count: number;
}

export class ChatLimitStore {
  private readonly slots: Collection<LimitSlot>;
  /** Slot inserts of concurrent requests share a command (store/chat/insert-batch.ts). */
  private readonly inserts: InsertBatcher<LimitSlot>;
  private readonly counters = new Map<string, Promise<CounterState>>();
  private lastSweep = 0;

  constructor(
    db: Db,
    private readonly onPruneError: (err: unknown) => void = () => undefined,
    private readonly now: () => number = Date.now
  ) {
    this.slots = db.collection('chat_limit_slots');
    this.inserts = new InsertBatcher(this.slots);
  }

  async take(scope: string, window: string, limit: number, expiresAt: number): Promise<LimitTake> {
    this.sweep();
    const counter = `${scope}|${window}`;
    const state = await this.counterState(counter, limit, expiresAt);
    for (;;) {
      const n = state.refunded.length > 0 ? state.refunded.shift()! : state.next++;
      if (n > limit) {
        state.next = limit + 1;
        return { allowed: false, count: limit + 1 };
      }
      try {
        await this.inserts.insert({ _id: `${counter}|${n}`, scope, window, n, expires_at: new Date(expiresAt) });
        return { allowed: true, count: n };
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) {
          giveBack(state, n);
          throw err;
        }
        state.next = Math.max(state.next, await this.firstFree(counter, n, limit));
      }
    }
  }

  /** Gives back a slot for a use that did not happen (refused by a later limit). */
  async refund(scope: string, window: string, n: number): Promise<void> {
    const counter = `${scope}|${window}`;
    await this.slots.deleteOne({ _id: `${counter}|${n}` });
    const state = this.counters.get(counter);
    if (state) giveBack(await state, n);
  }

  /** What this process last knew of a window's uses (for the x-ratelimit headers of answers that took none). */
  async known(scope: string, window: string): Promise<number> {
    const state = this.counters.get(`${scope}|${window}`);
    return state ? (await state).next - 1 : 0;
  }

  private counterState(counter: string, limit: number, expiresAt: number): Promise<CounterState> {
    let state = this.counters.get(counter);
    if (!state) {
      state = this.firstFree(counter, 0, limit).then((next) => ({ next, refunded: [], expiresAt }));
      this.counters.set(counter, state);
      state.catch(() => this.counters.delete(counter));
    }
    return state;
  }

  private async firstFree(counter: string, taken: number, limit: number): Promise<number> {
    const isTaken = async (n: number) => (await this.slots.findOne({ _id: `${counter}|${n}` }, { projection: { _id: 1 } })) !== null;
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
  }
}

function giveBack(state: CounterState, n: number): void {
  if (state.refunded.includes(n)) return;
  state.refunded.push(n);
  state.refunded.sort((a, b) => a - b);
}
