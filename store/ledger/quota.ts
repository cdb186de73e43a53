/**
 * Daily quotas (truth writes per DID per UTC day), exact under concurrency on MongoDB and FerretDB alike.
 *
 * A quota of L uses per day is L numbered slots, documents `_id` = `<scope>|<day>|<n>` (n = 1…L) in `quota_uses`;
 * a slot belongs to the process whose insert of it succeeded, and the unique `_id` decides between racing
 * processes. So at most L slots of a day exist, whoever took them: never more than L uses in total. Inserts and
 * `_id` lookups are the only operations that stay exact and fast on FerretDB, whose `findAndModify` with `$inc` is
 * a read-modify-write: a counter document let a burst of 90 concurrent writes through a quota of 60.
 *
 * Leases. A process does not insert a slot per use: it inserts slots AHEAD for a scope that is using them and hands
 * them out from memory, so a steady writer's use costs no round trip. The first use of a scope (in this process,
 * this day, or after it went idle) inserts exactly its own slot, as before; from the second use on, every claim
 * inserts a block (twice the previous one, at least as many as the callers waiting, at most MAX_LEASE, and at most
 * 1/LEASE_SHARE of what is left of the day's quota), and a claim for the next block starts in the background
 * when half of the current one is handed out. Slots not handed out are given back (deleted) once the scope has
 * been idle for `leaseIdleMs` (default 2 s), at the end of the day, and when the process closes. A withdrawn
 * write's refunded slot goes back to the lease (it is still this process's), and leaves with it.
 *
 * What leases cost, bounded: while a scope writes, `quota_uses` holds up to one block more than its uses (given
 * back within `leaseIdleMs` of its last use); and since a slot leased by one process cannot be used by another,
 * a scope writing through several processes can be refused (429) while another process still holds unused slots:
 * at most the blocks the other processes hold, each at most MAX_LEASE and at most 1/LEASE_SHARE of what was left
 * when it was claimed (near the limit blocks shrink to one slot), and only until they go idle and give them back.
 * A process that dies with a lease keeps those slots spent for that day (at most one block per scope). Never
 * over-admission: a slot is handed out only by the process whose insert of it succeeded.
 *
 * Inside one process callers never race for a slot: claims of one scope run one at a time and callers take slots
 * from the lease synchronously (and the API processes of one host forward their claims to the cluster primary's one
 * store, store/ledger/writer/cluster-primary.ts). Refused inserts happen only between processes: a refused slot is skipped (another
 * process took it), and after more than INSERT_PROBES refusals in a row the claim looks the counter up again (as at
 * its start, below) and moves past the highest taken. Slots given back are claimed again first (lowest first).
 *
 * What a process knows of a counter starts from the database by `_id` lookups, which MongoDB and the embedded
 * FerretDB on PostgreSQL answer from an index: a read by scope and day is a scan (FerretDB indexes no other field:
 * 642 ms among 213,000 slots on PostgreSQL, at every DID's first write of the day in every process). The end of the
 * run of taken slots is found by galloping `_id` lookups (about 2 log2 n: 22 at 2,000 slots), and the holes below
 * it (slots given back by others) are read only when they matter, once the counter has nothing left above: one read
 * by scope and day before a caller is refused, so the quota stays exact. A hole the search stepped over meanwhile
 * costs a refused insert, as a slot another process took. The first use of a day in a process deletes the slots of
 * days before yesterday in the background.
 *
 * Slot inserts are group-committed per process (store/insert-batch.ts): the slots of the claims made while one
 * insert is under way (any scope) go together in the next unordered insertMany (at most SLOT_CHUNK), whose write
 * errors say which were refused. Reads of counters' holes are grouped the same way (readSlots): the counters of a
 * day asked for while one read is under way go together in the next, one read by `scope: { $in }` and day, so one
 * scan serves them all.
 */
import { Collection, Db } from 'mongodb';
import { AppError } from '../../core/errors';
import { lastOfRun } from '../../core/ledger/contiguous-run';
import { BatchedInsertError, InsertBatcher } from '../insert-batch';
import { deleteByIds } from '../mongo';
import type { DailyQuota } from './daily-quota';

interface QuotaUse {
  _id: string;
  scope: string;
  day: string;
  n: number;
  at: Date;
}

const SLOT_CHUNK = 100;
/** Counters per grouped read of their slots (readSlots): the `$in` of one find. */
const READ_CHUNK = 256;
/** Slots refused in a row (taken by other processes) before a claim looks the run up (see claim). */
const INSERT_PROBES = 4;
/** The largest block of slots one claim leases. */
export const MAX_LEASE = 32;
/** A claim leases at most this share (1/LEASE_SHARE) of the slots left in the day's quota. */
export const LEASE_SHARE = 8;
const DEFAULT_LEASE_IDLE_MS = 2000;

/** What this process knows of one counter (`<scope>|<day>`). */
interface CounterState {
  counter: string;
  scope: string;
  day: string;
  limit: number;
  /** The lowest slot this process has not tried; every slot below it is taken, leased here, or in `free`. */
  next: number;
  /** Slots this process gave back (deleted), and the holes others left, claimed again first (lowest first). */
  free: number[];
  /** Whether the holes below `next` were read (see readHoles); until then a caller is not refused. */
  holesRead: boolean;
  /** Slots this process inserted and has not handed out yet (lowest first). */
  leased: number[];
  /** The claim under way (one at a time per counter). */
  claim: Promise<void> | null;
  /** Slots the last claim asked for (0 after an idle give-back: the next claim is a single slot again). */
  claimSize: number;
  /** Uses handed out since the lease was last given back. */
  uses: number;
  /** Callers waiting for a claim. */
  waiting: number;
  /** Slots refused in a row. */
  refusals: number;
  lastUse: number;
}

export interface QuotaStoreOptions {
  /** Unused leased slots of a scope are given back after it has not been used for this long (ms). */
  leaseIdleMs?: number;
  onError?: (err: unknown) => void;
}

export class QuotaStore implements DailyQuota {
  private readonly uses: Collection<QuotaUse>;
  /** Today's counters; a promise so that concurrent first uses of a counter share one read of its slots. */
  private readonly counters = new Map<string, Promise<CounterState>>();
  /** The same counters once their read settled (the idle sweep walks them). */
  private readonly live = new Map<string, CounterState>();
  private countersDay = '';
  /** Slot inserts, group-committed: one insertMany at a time for every claim made meanwhile. */
  private readonly slots: InsertBatcher<QuotaUse>;
  /** Counters whose slots are to be read (readSlots), by day and scope, with the callers waiting for each. */
  private readonly slotReads = new Map<
    string,
    Map<string, { resolve: (taken: number[]) => void; reject: (err: unknown) => void }[]>
  >();
  private reading = false;
  private readonly leaseIdleMs: number;
  private sweepTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** The give-back under way (close waits for it). */
  private givingBack: Promise<void> = Promise.resolve();

  constructor(
    db: Db,
    private readonly onPruneError: (err: unknown) => void = () => undefined,
    options: QuotaStoreOptions = {}
  ) {
    this.uses = db.collection('quota_uses');
    this.slots = new InsertBatcher(this.uses, 1, SLOT_CHUNK);
    this.leaseIdleMs = options.leaseIdleMs ?? DEFAULT_LEASE_IDLE_MS;
  }

  /** Takes one use of `scope` on `day`; `count` is the slot taken (1-based), or `limit + 1` when refused. */
  async consume(scope: string, day: string, limit: number): Promise<{ allowed: boolean; count: number }> {
    // Only forward: a late call for yesterday (another process's, forwarded around midnight) must not drop today's
    // counters. Its slots are taken as usual; their counter is not kept among today's (its lease is not given back).
    if (day > this.countersDay) this.rollDay(day);
    const state = await this.counterState(scope, day, limit);
    state.limit = limit;
    const now = Date.now();
    // A scope idle for leaseIdleMs with nothing leased starts again from its own slot: for a writer that writes less
    // often than that, a block leased ahead is only given back unused (1.5 slots inserted and 0.5 deleted a use).
    if (state.leased.length === 0 && !state.claim && now - state.lastUse >= this.leaseIdleMs) {
      state.uses = 0;
      state.claimSize = 0;
    }
    state.lastUse = now;
    for (;;) {
      // Taken synchronously: no other caller in this process gets this slot.
      const n = state.leased.shift();
      if (n !== undefined) {
        state.uses++;
        this.topUp(state);
        return { allowed: true, count: n };
      }
      if (!state.claim && state.free.length === 0 && state.next > limit && state.holesRead)
        return { allowed: false, count: limit + 1 };
      state.waiting++;
      try {
        await this.claim(state);
      } finally {
        state.waiting--;
      }
    }
  }

  /** Gives back a slot taken by `consume` for a use that never happened (a write abandoned before it started). */
  async refund(scope: string, day: string, n: number): Promise<void> {
    const counter = `${scope}|${day}`;
    const state = day === this.countersDay ? this.live.get(counter) : undefined;
    if (state && !this.closed) {
      // Still this process's slot: back into the lease, handed out next or given back with it.
      insertSorted(state.leased, n);
      this.scheduleSweep();
      return;
    }
    await this.uses.deleteOne({ _id: `${counter}|${n}` });
  }

  /** Deletes the slots of days before `keepFrom` (an ISO date); returns how many. */
  async prune(keepFrom: string): Promise<number> {
    return (await this.uses.deleteMany({ day: { $lt: keepFrom } })).deletedCount;
  }

  /** Gives back every unused leased slot (the process is stopping); later refunds delete their slot. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.sweepTimer) clearTimeout(this.sweepTimer);
    this.sweepTimer = null;
    await this.givingBack;
    await this.giveBackLeases([...this.live.values()]);
  }

  /** Gives back the unused leases of scopes idle for `leaseIdleMs` now (the sweep does it on its own). */
  async releaseIdleLeases(): Promise<void> {
    const now = Date.now();
    await this.giveBackLeases(
      [...this.live.values()].filter((s) => s.leased.length > 0 && !s.claim && now - s.lastUse >= this.leaseIdleMs)
    );
  }

  private rollDay(day: string): void {
    const old = [...this.live.values()];
    this.counters.clear();
    this.live.clear();
    this.countersDay = day;
    void this.giveBackLeases(old);
    this.prune(dayBefore(day)).catch(this.onPruneError);
  }

  private counterState(scope: string, day: string, limit: number): Promise<CounterState> {
    const counter = `${scope}|${day}`;
    let state = this.counters.get(counter);
    if (!state) {
      state = this.runEnd(counter, 0, limit).then((next) => {
        const fresh: CounterState = {
          counter,
          scope,
          day,
          limit,
          next,
          free: [],
          holesRead: false,
          leased: [],
          claim: null,
          claimSize: 0,
          uses: 0,
          waiting: 0,
          refusals: 0,
          lastUse: Date.now()
        };
        if (this.countersDay === day) this.live.set(counter, fresh);
        return fresh;
      });
      this.counters.set(counter, state);
      // A failed first lookup is not remembered: the next caller tries again.
      state.catch(() => this.counters.delete(counter));
    }
    return state;
  }

  /** Claims the next block while half of the current one is still there, so a steady writer never waits for it. */
  private topUp(state: CounterState): void {
    if (state.claim || state.uses < 2 || this.closed) return;
    if (state.leased.length > state.claimSize / 2) return;
    // Nothing is leased ahead once fewer than LEASE_SHARE slots are left: near the limit a process takes only what
    // its callers wait for, so it holds no slot another process's caller could have had.
    if (state.limit - state.next + 1 + state.free.length < LEASE_SHARE) return;
    this.claim(state).catch(() => undefined); // a failed top-up is retried by the next caller that finds no slot
  }

  /** Inserts the next block of slots for this counter (the claim under way, if there is one). */
  private claim(state: CounterState): Promise<void> {
    if (state.claim) return state.claim;
    const left = state.limit - state.next + 1 + state.free.length;
    const size =
      state.uses === 0
        ? 1
        : Math.max(
            1,
            Math.min(MAX_LEASE, Math.floor(left / LEASE_SHARE), Math.max(state.waiting, 2 * state.claimSize))
          );
    const slots: number[] = [];
    while (slots.length < size && state.free.length > 0) slots.push(state.free.shift()!);
    while (slots.length < size && state.next <= state.limit) slots.push(state.next++);
    if (slots.length === 0) {
      if (state.holesRead) return Promise.resolve();
      // Nothing left above: the holes below, before anyone is refused (one read, as the claims: one at a time).
      state.claim = this.readHoles(state).finally(() => {
        state.claim = null;
      });
      return state.claim;
    }
    state.claimSize = slots.length;
    state.claim = this.insertClaim(state, slots).finally(() => {
      state.claim = null;
    });
    return state.claim;
  }

  private async insertClaim(state: CounterState, slots: number[]): Promise<void> {
    const results = await this.insertSlots(
      slots.map((n) => ({ _id: `${state.counter}|${n}`, scope: state.scope, day: state.day, n, at: new Date() }))
    );
    let failure: unknown = null;
    let landed = 0;
    let lastRefused = 0;
    results.forEach((r, i) => {
      const n = slots[i]!;
      if (r.status === 'fulfilled') {
        insertSorted(state.leased, n);
        landed++;
      } else if ((r.reason as { code?: number }).code === 11000) {
        lastRefused = Math.max(lastRefused, n); // another process took it
      } else {
        insertSorted(state.free, n); // not known to be taken: ours to claim again
        failure = r.reason;
      }
    });
    if (landed > 0) {
      state.refusals = 0;
      this.scheduleSweep();
    } else if (lastRefused > 0) {
      state.refusals += results.length;
      // Another process is taking this counter's slots: past a few refusals, move past what it took.
      if (state.refusals > INSERT_PROBES) {
        state.next = Math.max(state.next, await this.runEnd(state.counter, lastRefused, state.limit));
        state.refusals = 0;
      }
    }
    if (failure && landed === 0) throw failure;
  }

  /**
   * Gives back (deletes) the slots leased and not handed out; they become free to claim again. One bulk delete for
   * every scope given back at once, a statement per `_id` (store/mongo.ts deleteByIds: on FerretDB on PostgreSQL a
   * `deleteMany` by `_id: { $in }` read the whole of `quota_uses` at every sweep, 3.3 s among 213,000 slots, which
   * slowed every write of a hub that had written a lot that day).
   */
  private async giveBackLeases(states: CounterState[]): Promise<void> {
    const claims = states.map((s) => s.claim).filter((c) => c !== null);
    if (claims.length > 0) await Promise.allSettled(claims); // what they land is given back too
    const taken = states.map((state) => {
      state.claimSize = 0;
      state.uses = 0;
      return { state, slots: state.leased.splice(0) };
    });
    const ids = taken.flatMap(({ state, slots }) => slots.map((n) => `${state.counter}|${n}`));
    if (ids.length === 0) return;
    const done = deleteByIds(this.uses, ids).then(
      () => undefined,
      // Left in the database, they stay taken: claiming one again is then refused and skipped (a slot lost for
      // the day, never a second use of one).
      (err: unknown) => this.onPruneError(err)
    );
    this.givingBack = done;
    await done;
    for (const { state, slots } of taken) for (const n of slots) insertSorted(state.free, n);
  }

  private scheduleSweep(): void {
    if (this.sweepTimer || this.closed) return;
    this.sweepTimer = setTimeout(
      () => {
        this.sweepTimer = null;
        void this.releaseIdleLeases().finally(() => {
          if ([...this.live.values()].some((s) => s.leased.length > 0)) this.scheduleSweep();
        });
      },
      Math.max(10, this.leaseIdleMs / 2)
    );
    this.sweepTimer.unref();
  }

  /**
   * Inserts slot documents together with the others claimed meanwhile (one insert at a time, any scope); each
   * settles as insertOne would (code 11000: taken by another process). Any other refusal of one slot (a server
   * failing as it stops, say) means it was not stored: the write has not started and spends nothing, so the caller
   * is told to retry.
   */
  private insertSlots(docs: QuotaUse[]): Promise<PromiseSettledResult<void>[]> {
    return Promise.allSettled(
      docs.map((doc) =>
        this.slots.insert(doc).catch((err: unknown) => {
          throw err instanceof BatchedInsertError && err.code !== 11000 ? slotNotStored(err.message) : err;
        })
      )
    );
  }

  /**
   * The slots taken of a counter, read together with those of the other counters asked for meanwhile (one read at a
   * time: the counters asked for while it is under way go in the next; see the module comment).
   */
  private readSlots(scope: string, day: string): Promise<number[]> {
    return new Promise((resolve, reject) => {
      let scopes = this.slotReads.get(day);
      if (!scopes) this.slotReads.set(day, (scopes = new Map()));
      const waiting = scopes.get(scope);
      if (waiting) waiting.push({ resolve, reject });
      else scopes.set(scope, [{ resolve, reject }]);
      if (!this.reading) {
        this.reading = true;
        // The counters asked for in this turn of the event loop (a burst's first writes) go together.
        setImmediate(() => void this.pumpSlotReads());
      }
    });
  }

  private async pumpSlotReads(): Promise<void> {
    try {
      for (;;) {
        const next = this.slotReads.entries().next();
        if (next.done) return;
        const [day, scopes] = next.value;
        const batch = [...scopes].slice(0, READ_CHUNK);
        for (const [scope] of batch) scopes.delete(scope);
        if (scopes.size === 0) this.slotReads.delete(day);
        try {
          const docs = await this.uses
            .find({ scope: { $in: batch.map(([scope]) => scope) }, day }, { projection: { _id: 0, scope: 1, n: 1 } })
            .toArray();
          const taken = new Map<string, number[]>();
          for (const d of docs) {
            const list = taken.get(d.scope);
            if (list) list.push(d.n);
            else taken.set(d.scope, [d.n]);
          }
          for (const [scope, waiting] of batch) for (const w of waiting) w.resolve(taken.get(scope) ?? []);
        } catch (err) {
          for (const [, waiting] of batch) for (const w of waiting) w.reject(err);
        }
      }
    } finally {
      this.reading = false;
    }
  }

  /** The slot after the run of taken slots that `from` (taken, or 0) is in: galloping `_id` lookups, at most `limit`. */
  private async runEnd(counter: string, from: number, limit: number): Promise<number> {
    const taken = async (n: number) =>
      (await this.uses.findOne({ _id: `${counter}|${n}` }, { projection: { _id: 1 } })) !== null;
    return (await lastOfRun(from, taken, limit)) + 1;
  }

  /**
   * The holes below `next` and below the highest slot taken (read once a counter has nothing left above: one read
   * of its slots, slots given back by others), free to claim, lowest first. A hole may be taken by another process
   * meanwhile: claiming it is then refused and skipped.
   */
  private async readHoles(state: CounterState): Promise<void> {
    const taken = new Set(await this.readSlots(state.scope, state.day));
    let highest = 0;
    for (const n of taken) highest = Math.max(highest, n);
    // Slots leased here are taken (not among the holes); slots this process gave back are among them already.
    for (let n = 1; n <= Math.min(highest, state.limit, state.next - 1); n++)
      if (!taken.has(n)) insertSorted(state.free, n);
    state.holesRead = true;
  }
}

function insertSorted(list: number[], n: number): void {
  if (list.includes(n)) return;
  let at = list.length;
  while (at > 0 && list[at - 1]! > n) at--;
  list.splice(at, 0, n);
}

/** The ISO date (YYYY-MM-DD) of the day before `day`. */
function dayBefore(day: string): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10);
}

/** A quota slot the database refused to store for a reason other than a duplicate: 503, retry later. */
function slotNotStored(reason: string | undefined): AppError {
  return new AppError(
    'unavailable',
    `The database did not store the quota slot (${reason ?? 'refused'}); retry later`,
    {},
    { 'Retry-After': '5' }
  );
}
