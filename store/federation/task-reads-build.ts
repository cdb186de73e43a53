/**
 * The upgrade to the task reads kept beside the tasks (task-counters.ts, task-lists.ts), done by the service itself:
 * until the marker `task-reads` of `migrations` exists, TaskStore answers the queue's figures and unfiltered
 * ListTasks with full reads of the tasks (the reads of the version before: correct at any time, slow at size), and
 * one process builds the lists and counters for the tasks stored before this version, then writes the marker.
 *
 * What is built. Tasks submitted by this version carry `tracked: true` and are listed and counted from their submit;
 * tasks without it were stored before. Their changes by this version are counted too, and each process also keeps
 * their sum apart (`old` in its counter document, with a count of them). The build reads every old task and sets
 * `base` = (their figures as read) − (the changes of old tasks the counters hold). That is exact when the changes
 * of old tasks counted during the read are exactly those the read saw; so a pass reads the per-process counts of
 * old changes before its read and again `settleMs` after it, and is kept only if no count moved (a change whose
 * counter write lands more than `settleMs` after its task write could still be missed: `npm run tasks:recount`
 * repairs it). Passes are repeated until one is kept (backing off to one every 2 minutes), so the build waits for
 * the old tasks to be still for one read (it does not wait for new tasks, which never enter the comparison).
 *
 * A replica of the earlier version still running (a rolling upgrade) submits tasks without `tracked` and counts
 * nothing: a pass is not kept while the newest old task is younger than `quietMs`, so the build waits until the
 * earlier version has stopped submitting (the reads stay the full ones meanwhile). A replica of the earlier version
 * that goes on claiming or finishing tasks after the build, without submitting, is not seen: its changes are not
 * counted (docs/operations.md: finish the rollout).
 *
 * Each submitter's old tasks become its list's prefix (task-lists.ts), in creation order, so the list reads the same
 * as the sort by creation did.
 *
 * Who builds. Every API process runs `start()`; the lease decides (store/epoch-lease.ts: records
 * `task-reads#lease#<epoch>` in `migrations`, renewed by their holder, taken over when not renewed for `leaseMs`).
 * Two builds at once are harmless (each writes the same prefixes and a correct base); the
 * lease only saves the work. A lease in the API process rather than a Temporal workflow: the build is one resumable
 * step that any process can redo from the start, it must run even where no worker runs yet after an upgrade, and a
 * workflow would bring its replay histories for a one-off step.
 * A database without tasks gets its marker at the first pass.
 */
import type { Collection, Db } from 'mongodb';
import type { TaskState } from '../../core/federation/vocabulary';
import { EpochLease } from '../epoch-lease';
import { isDuplicateKey } from '../mongo';
import { addTally, emptyTally, negate, tallyOf, type TaskCounters, type TaskTally } from './task-counters';
import type { TaskLists } from './task-lists';

export const MIGRATIONS_COLLECTION = 'migrations';
const MARKER_ID = 'task-reads';
const MAX_RETRY_MS = 120_000;

interface MigrationDocument {
  _id: string;
  /** Marker: when and how it was written. */
  built_at?: string;
  by?: string;
}

/** An old task as the build reads it. */
interface OldTask {
  _id: string;
  submitted_by: string;
  state: TaskState;
  type: string;
  created_at: string;
  claimed_at?: string | null;
  finished_at?: string | null;
}

export interface TaskReadsBuildOptions {
  /** How long after its read a pass reads the counts of old changes again. */
  settleMs?: number;
  /** A lease not renewed for this long is taken over. */
  leaseMs?: number;
  /** How often a process that has not seen the marker looks again (each unready read costs one `_id` read). */
  recheckMs?: number;
  /** The pause after a rejected pass (doubled after each, up to 2 minutes). */
  retryMs?: number;
  /** A pass is not kept while a task without `tracked` is younger than this (an earlier version still submits). */
  quietMs?: number;
}

/** Does not keep the process alive (a stopped build gives up after it). */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());

export class TaskReadsBuild {
  private readonly marks: Collection<MigrationDocument>;
  private readonly tasks: Collection<OldTask & { tracked?: boolean }>;
  private readonly opts: Required<TaskReadsBuildOptions>;
  private readonly lease: EpochLease;
  private built = false;
  private checkedAt = 0;
  /** Set by start()'s stop: a build in progress gives up at its next pass. */
  private stopping = false;

  constructor(
    db: Db,
    private readonly counters: TaskCounters,
    private readonly lists: TaskLists,
    opts: TaskReadsBuildOptions = {}
  ) {
    this.marks = db.collection(MIGRATIONS_COLLECTION);
    this.tasks = db.collection('tasks');
    this.opts = { settleMs: 5_000, leaseMs: 60_000, recheckMs: 1_000, retryMs: 5_000, quietMs: 120_000, ...opts };
    this.lease = new EpochLease(db, MIGRATIONS_COLLECTION, 'task-reads#lease#', this.opts.leaseMs);
  }

  /** Whether the lists and counters cover every task (once true, for good; otherwise looked up again after recheckMs). */
  async ready(): Promise<boolean> {
    if (this.built) return true;
    if (Date.now() - this.checkedAt < this.opts.recheckMs) return false;
    this.checkedAt = Date.now();
    this.built = (await this.marks.findOne({ _id: MARKER_ID })) !== null;
    return this.built;
  }

  /**
   * One try: builds when no marker exists and this process gets the lease. 'built' once the marker is written
   * here, 'ready' when it existed, 'elsewhere' when another process holds the lease.
   */
  async run(): Promise<'built' | 'ready' | 'elsewhere'> {
    this.checkedAt = 0;
    if (await this.ready()) return 'ready';
    if (!(await this.lease.hold())) return 'elsewhere';
    const renew = setInterval(
      () => void this.lease.renew(0).catch(() => undefined),
      Math.max(50, this.opts.leaseMs / 4)
    );
    renew.unref();
    try {
      await this.build(`build:${this.lease.holder}`);
      return 'built';
    } finally {
      clearInterval(renew);
    }
  }

  /**
   * Runs `run()` in the background until the marker exists (again every `everyMs` while another process builds or
   * after a failure); returns the function that stops it.
   */
  start(hooks: { onError: (err: unknown) => void; onBuilt?: () => void }, everyMs = 30_000): () => void {
    let stopped = false;
    let timer: NodeJS.Timeout | null = null;
    const attempt = (): void => {
      timer = null;
      this.run().then(
        (outcome) => {
          if (outcome === 'built') hooks.onBuilt?.();
          if (outcome !== 'elsewhere' || stopped) return;
          timer = setTimeout(attempt, everyMs);
          timer.unref();
        },
        (err: unknown) => {
          if (stopped) return;
          hooks.onError(err);
          timer = setTimeout(attempt, everyMs);
          timer.unref();
        }
      );
    };
    attempt();
    return () => {
      stopped = true;
      this.stopping = true;
      if (timer) clearTimeout(timer);
    };
  }

  /**
   * The build itself, without the lease (also run by scripts/tasks-recount.ts before its repair): passes until one
   * is kept, then the prefixes, `base`, and the marker. Returns the number of passes and of old tasks.
   */
  async build(by: string): Promise<{ passes: number; old_tasks: number }> {
    for (let passes = 1; ; passes++) {
      if (this.stopping) throw new Error('the task reads build was stopped');
      const pass = await this.pass();
      if ('retry' in pass) {
        const backoff = Math.min(MAX_RETRY_MS, this.opts.retryMs * 2 ** (passes - 1));
        await sleep(pass.retry === 'changed' ? backoff : Math.min(MAX_RETRY_MS, Math.max(backoff, pass.inMs)));
        continue;
      }
      await this.writePrefixes(pass.old);
      await this.counters.setBase(pass.base);
      try {
        await this.marks.insertOne({ _id: MARKER_ID, built_at: new Date().toISOString(), by });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      this.built = true;
      return { passes, old_tasks: pass.old.length };
    }
  }

  /**
   * One read of the old tasks between two readings of the old changes; a time to wait instead when a change was
   * stored between, or an old task is younger than quietMs.
   */
  private async pass(): Promise<
    { old: OldTask[]; base: TaskTally } | { retry: 'changed' } | { retry: 'young'; inMs: number }
  > {
    const before = await this.counters.readOld();
    const old = await this.tasks
      .find(
        { tracked: { $exists: false } },
        { projection: { _id: 1, submitted_by: 1, state: 1, type: 1, created_at: 1, claimed_at: 1, finished_at: 1 } }
      )
      .toArray();
    // No old task and no counted change of one: nothing can be missed (a database created by this version).
    if (old.length === 0 && Object.keys(before.changes).length === 0) return { old, base: emptyTally() };
    const newest = old.reduce((max, t) => Math.max(max, Date.parse(t.created_at)), 0);
    if (newest > Date.now() - this.opts.quietMs)
      return { retry: 'young', inMs: newest + this.opts.quietMs - Date.now() };
    await sleep(this.opts.settleMs);
    const after = await this.counters.readOld();
    const ids = new Set([...Object.keys(before.changes), ...Object.keys(after.changes)]);
    for (const id of ids) if (before.changes[id] !== after.changes[id]) return { retry: 'changed' };
    return { old, base: addTally(addTally(emptyTally(), tallyOf(old)), negate(after.tally)) };
  }

  /** Each submitter's old tasks not yet in its list (a repair may have listed some), oldest first. */
  private async writePrefixes(old: OldTask[]): Promise<void> {
    const bySubmitter = new Map<string, OldTask[]>();
    for (const t of old) {
      let mine = bySubmitter.get(t.submitted_by);
      if (!mine) bySubmitter.set(t.submitted_by, (mine = []));
      mine.push(t);
    }
    for (const [submitter, tasks] of bySubmitter) {
      const listed = new Set(await this.lists.allTaskIds(submitter));
      const prefix = tasks
        .filter((t) => !listed.has(t._id))
        .sort((a, b) =>
          a.created_at === b.created_at ? (a._id < b._id ? 1 : -1) : a.created_at < b.created_at ? -1 : 1
        );
      await this.lists.writePrefix(
        submitter,
        prefix.map((t) => t._id)
      );
    }
  }
}
