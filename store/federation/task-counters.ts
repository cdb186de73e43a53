/**
 * The queue's figures (counts per state, open tasks per type, wait and run sums) kept up at each change of a task's
 * state, so GET /a2a/queue/stats reads a few small documents instead of every task (docs/federation.md#task-reads).
 *
 * FerretDB makes `$inc` a read-modify-write, so one shared counter document would lose concurrent updates. Each
 * process (each TaskCounters) instead keeps the sum of the changes it made in memory and writes it whole, as its
 * own document `p:<host>:<pid>:<random>` in `task_counters`, which nobody else writes; its writes are serialised and
 * group-committed (every change waiting when a write starts is in it), and a change is acknowledged once a write
 * that includes it is stored. The figures are the sum of every document (`base` and one per process that ever
 * changed a task) and, for the reading process, its own unwritten changes.
 *
 * Drift: a process that dies between a task's write and its counter write loses those changes (at most what it had
 * in flight), and a task document changed around the store (by hand) is not counted. `recount()` repairs both: it
 * reads every task and sets `base` so that the sum equals the tasks again (scripts/tasks-recount.ts; exact when
 * no task changes during its scan), and with `fold` (only while no API or worker process runs) replaces every
 * document with that one.
 */
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import type { TaskState } from '../../core/federation/vocabulary';

export const TASK_COUNTERS_COLLECTION = 'task_counters';
const STATES: TaskState[] = ['queued', 'claimed', 'input_required', 'done', 'failed', 'canceled'];

/** The sums the figures come from. */
export interface TaskTally {
  states: Record<TaskState, number>;
  /** Tasks with a claim: their count and the sum of (last claim - creation), ms. */
  waits: number;
  wait_ms: number;
  /** Done tasks: their count and the sum of (finish - last claim), ms. */
  runs: number;
  run_ms: number;
  /** Open (queued, claimed or input_required) tasks per type. */
  open_by_type: Record<string, number>;
}

/** One change of the tally (any field may be negative). */
export interface TallyChange {
  states?: Partial<Record<TaskState, number>>;
  waits?: number;
  wait_ms?: number;
  runs?: number;
  run_ms?: number;
  open_by_type?: Record<string, number>;
}

interface CounterDocument {
  _id: string;
  queued: number;
  claimed: number;
  /** Absent in documents written before the state existed. */
  input_required?: number;
  done: number;
  failed: number;
  canceled: number;
  waits: number;
  wait_ms: number;
  runs: number;
  run_ms: number;
  /** An array (a type may contain dots, which FerretDB refuses in a key). */
  open_by_type: { type: string; n: number }[];
  updated_at: string;
  /**
   * The part of the sums that are changes of tasks stored before this version (no `tracked` field), and how many
   * such changes: the build of the task reads (task-reads-build.ts) sets `base` from them. Absent in `base`.
   */
  old?: Omit<CounterDocument, '_id' | 'updated_at' | 'old' | 'old_changes'>;
  old_changes?: number;
}

export const emptyTally = (): TaskTally => ({
  states: { queued: 0, claimed: 0, input_required: 0, done: 0, failed: 0, canceled: 0 },
  waits: 0,
  wait_ms: 0,
  runs: 0,
  run_ms: 0,
  open_by_type: {}
});

/** Adds `change` into `into` (in place). */
export function addTally(into: TaskTally, change: TallyChange): TaskTally {
  for (const [s, n] of Object.entries(change.states ?? {})) into.states[s as TaskState] += n ?? 0;
  into.waits += change.waits ?? 0;
  into.wait_ms += change.wait_ms ?? 0;
  into.runs += change.runs ?? 0;
  into.run_ms += change.run_ms ?? 0;
  for (const [type, n] of Object.entries(change.open_by_type ?? {})) {
    const sum = (into.open_by_type[type] ?? 0) + n;
    if (sum === 0) delete into.open_by_type[type];
    else into.open_by_type[type] = sum;
  }
  return into;
}

/** The tally of a set of tasks, read whole (the brute-force figure the counters must equal). */
export function tallyOf(
  tasks: Iterable<{
    state: TaskState;
    type: string;
    created_at: string;
    claimed_at?: string | null;
    finished_at?: string | null;
  }>
): TaskTally {
  const out = emptyTally();
  for (const t of tasks) addTally(out, taskContribution(t));
  return out;
}

/** What one task in its current state adds to the tally. */
export function taskContribution(t: {
  state: TaskState;
  type: string;
  created_at: string;
  claimed_at?: string | null;
  finished_at?: string | null;
}): TallyChange {
  const open = t.state === 'queued' || t.state === 'claimed' || t.state === 'input_required';
  const claimed = t.claimed_at ? Date.parse(t.claimed_at) : null;
  const ran = claimed !== null && t.state === 'done' && t.finished_at;
  return {
    states: { [t.state]: 1 },
    ...(open ? { open_by_type: { [t.type]: 1 } } : {}),
    ...(claimed !== null ? { waits: 1, wait_ms: claimed - Date.parse(t.created_at) } : {}),
    ...(ran ? { runs: 1, run_ms: Date.parse(t.finished_at!) - claimed } : {})
  };
}

const sumsOf = (t: TaskTally) => ({
  ...t.states,
  waits: t.waits,
  wait_ms: t.wait_ms,
  runs: t.runs,
  run_ms: t.run_ms,
  open_by_type: Object.entries(t.open_by_type).map(([type, n]) => ({ type, n }))
});

const toDocument = (_id: string, t: TaskTally, old?: { tally: TaskTally; changes: number }): CounterDocument => ({
  _id,
  ...sumsOf(t),
  updated_at: new Date().toISOString(),
  ...(old ? { old: sumsOf(old.tally), old_changes: old.changes } : {})
});

const fromDocument = (d: Omit<CounterDocument, '_id' | 'updated_at'>): TallyChange => ({
  states: Object.fromEntries(STATES.map((s) => [s, d[s] ?? 0])),
  waits: d.waits ?? 0,
  wait_ms: d.wait_ms ?? 0,
  runs: d.runs ?? 0,
  run_ms: d.run_ms ?? 0,
  open_by_type: Object.fromEntries((d.open_by_type ?? []).map((e) => [e.type, e.n]))
});

export class TaskCounters {
  private readonly docs: Collection<CounterDocument>;
  private readonly id = `p:${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  /** The sum of this process's changes; `written` is how much of it is stored. */
  private readonly mine = emptyTally();
  /** The part of `mine` that changed tasks stored before this version (see CounterDocument.old). */
  private readonly mineOld = { tally: emptyTally(), changes: 0 };
  private changes = 0;
  private written = 0;
  private writing: Promise<void> | null = null;

  constructor(db: Db) {
    this.docs = db.collection<CounterDocument>(TASK_COUNTERS_COLLECTION);
  }

  /**
   * Counts a change of a task's state this process made; resolves once it is stored. A failed write is not thrown
   * (the task's own write succeeded): the change stays in memory and goes with the next write.
   */
  async record(change: TallyChange, opts: { old?: boolean } = {}): Promise<void> {
    addTally(this.mine, change);
    if (opts.old) {
      addTally(this.mineOld.tally, change);
      this.mineOld.changes++;
    }
    const target = ++this.changes;
    while (this.written < target) {
      if (!this.writing) this.writing = this.write().finally(() => (this.writing = null));
      const failed = await this.writing.then(
        () => false,
        () => true
      );
      if (failed) {
        // Written by the next change's write, or by this retry if none comes.
        setTimeout(() => void this.record({}), 1000).unref();
        return;
      }
    }
  }

  private async write(): Promise<void> {
    const upTo = this.changes;
    const doc = toDocument(this.id, this.mine, this.mineOld);
    await this.docs.replaceOne({ _id: this.id }, doc, { upsert: true });
    this.written = Math.max(this.written, upTo);
  }

  /** The figures: every process's stored sum, this process's own from memory. */
  async read(): Promise<TaskTally> {
    const docs = await this.docs.find({}).toArray();
    const out = emptyTally();
    for (const d of docs) if (d._id !== this.id) addTally(out, fromDocument(d));
    return addTally(out, fromDocument(toDocument(this.id, this.mine)));
  }

  /**
   * The stored changes of tasks stored before this version, summed over every process, and a mark of each process's
   * count of them (what the build compares before and after its scan: equal marks mean no such change was stored
   * between). A process document without `old_changes` was written by the version that brought the counters without
   * `tracked` (its tasks carry no `tracked` either, so the build reads them as old): all its sums are such changes,
   * and its mark is its write time.
   */
  async readOld(): Promise<{ tally: TaskTally; changes: Record<string, string> }> {
    const docs = await this.docs.find({ _id: { $ne: 'base' } }).toArray();
    const tally = emptyTally();
    const changes: Record<string, string> = {};
    for (const d of docs) {
      if (d.old_changes === undefined) {
        changes[d._id] = `legacy@${d.updated_at}`;
        addTally(tally, fromDocument(d));
        continue;
      }
      if (!d.old_changes) continue;
      changes[d._id] = String(d.old_changes);
      if (d.old) addTally(tally, fromDocument(d.old));
    }
    return { tally, changes };
  }

  /** Replaces `base` by these figures (the build: task-reads-build.ts). */
  async setBase(base: TallyChange): Promise<void> {
    const t = addTally(emptyTally(), base);
    await this.docs.replaceOne({ _id: 'base' }, toDocument('base', t), { upsert: true });
  }

  /**
   * Sets `base` so that the figures equal `actual` (the tally of every task, read by the caller), or with `fold`
   * replaces every document by `base` = `actual` (only while no other process changes tasks). Returns the figures
   * before the repair.
   */
  async recount(actual: TaskTally, opts: { fold?: boolean } = {}): Promise<TaskTally> {
    const before = await this.read();
    if (opts.fold) {
      await this.docs.deleteMany({ _id: { $ne: 'base' } });
      await this.docs.replaceOne({ _id: 'base' }, toDocument('base', actual), { upsert: true });
      return before;
    }
    const base = (await this.docs.findOne({ _id: 'base' })) ?? toDocument('base', emptyTally());
    // base' = base + (actual - before)
    const next = addTally(addTally(emptyTally(), fromDocument(base)), negate(before));
    addTally(next, tallyChangeOf(actual));
    await this.docs.replaceOne({ _id: 'base' }, toDocument('base', next), { upsert: true });
    return before;
  }
}

export const tallyChangeOf = (t: TaskTally): TallyChange => ({ ...t, states: { ...t.states } });

export function negate(t: TaskTally): TallyChange {
  return {
    states: Object.fromEntries(STATES.map((s) => [s, -t.states[s]])),
    waits: -t.waits,
    wait_ms: -t.wait_ms,
    runs: -t.runs,
    run_ms: -t.run_ms,
    open_by_type: Object.fromEntries(Object.entries(t.open_by_type).map(([k, n]) => [k, -n]))
  };
}
