/**
 * Tasks for worker nodes, submitted on the hub listener (POST /a2a/task) or as A2A messages (POST /a2a/message:send),
 * and claimed by worker nodes through POST /api/task/assign. The record carries what a claim needs: required
 * capabilities to match a node, priority, a claim lease (claimed_by, claim_id, lease_expires_at) that lapses back to
 * queued, attempts, result or error. The payload is kept as canonical JSON text (FerretDB cannot store every JSON
 * object as a document).
 *
 * Every change of a stored task (claim, progress, finish, cancel, lapse) is made alone, across API processes and on
 * FerretDB too, whose conditional updates are not atomic (with conditional findOneAndUpdates alone,
 * test/api/work-distribution.test.ts saw one task handed to two racing claimants): task-transitions.ts reads the
 * task, decides, takes the lock of its next revision by a unique insert, and writes. So a claim is exclusive, a
 * finish racing a lapse or a cancel racing a claim leaves the task in one state, and each change is counted once.
 *
 * A lease is the stored lease_expires_at. sweepLapsed() returns each lapsed task to the queue, or fails it after
 * TASK_MAX_ATTEMPTS, each change conditional on the lease it read. It runs in three places: the task-leases/<queue>
 * workflow (workflows/federation/task-lease.ts) wakes at the earliest lease expiry (nextLeaseExpiry()) and sweeps,
 * so a lapsed task is requeued when its lease ends even if nobody reads; every claim and stats call sweeps first
 * (it reads only claimed tasks: an equality on state, which the launcher's GIN index serves on FerretDB); and a
 * read of tasks by id (find, ListTasks) settles a lapsed task it read, so what the API answers never shows a lapsed
 * lease as held, even while the worker or Temporal is down.
 *
 * Reads that stay O(page) at any number of tasks (docs/federation.md#task-reads): every change of a task's state
 * is counted by the writer that made it (task-counters.ts: stats() reads those counters, not the tasks), and every
 * new task is appended to its submitter's list (task-lists.ts: an unfiltered ListTasks page is a few `_id` reads).
 * Every write of a task's state goes through this class for that reason. Until they cover the tasks stored before
 * this version (task-reads-build.ts: built by the service after an upgrade), stats() and unfiltered ListTasks read
 * the tasks whole, as that version did.
 */
import { randomUUID } from 'node:crypto';
import { Collection, Db, Filter } from 'mongodb';
import type { TaskState } from '../../core/federation/vocabulary';
import { findByIds, isDuplicateKey } from '../mongo';
import { TaskCounters, tallyOf, taskContribution, type TallyChange } from './task-counters';
import type { NewTask, TaskDocument } from './task-document';
import { TaskLists } from './task-lists';
import { TaskReadsBuild, type TaskReadsBuildOptions } from './task-reads-build';
import { TaskTransitions, type TaskDecision } from './task-transitions';

export type { NewTask, TaskDocument } from './task-document';

export type ClaimOutcome =
  | { ok: true; task: TaskDocument }
  | { ok: false; reason: 'not_found' | 'not_yours' | 'canceled' | 'finished' | 'waiting'; task: TaskDocument | null };

const TERMINAL: TaskState[] = ['done', 'failed', 'canceled'];

export class TaskStore {
  private readonly tasks: Collection<TaskDocument>;
  private readonly transitions: TaskTransitions;
  private readonly counters: TaskCounters;
  private readonly lists: TaskLists;
  /** Whether the lists and counters cover every task yet, and the build that makes them. */
  readonly readsBuild: TaskReadsBuild;
  private readonly opts: { maxAttempts: number };
  /**
   * `counters` and `lists`: one of each per process (a TaskCounters is the process's own counter document), shared
   * by every TaskStore it makes; made here when not given.
   */
  constructor(
    db: Db,
    opts: { maxAttempts?: number; counters?: TaskCounters; lists?: TaskLists; build?: TaskReadsBuildOptions } = {}
  ) {
    this.tasks = db.collection('tasks');
    this.counters = opts.counters ?? new TaskCounters(db);
    this.transitions = new TaskTransitions(db, this.counters);
    this.lists = opts.lists ?? new TaskLists(db);
    this.readsBuild = new TaskReadsBuild(db, this.counters, this.lists, opts.build);
    this.opts = { maxAttempts: opts.maxAttempts ?? 3 };
  }

  /**
   * Inserts a new task, queued and unclaimed (the store fills the lifecycle fields); with a duplicate id (an
   * idempotent retry) returns the stored one instead.
   */
  async submit(task: NewTask): Promise<{ task: TaskDocument; duplicate: boolean }> {
    const now = new Date().toISOString();
    const doc: TaskDocument = {
      ...task,
      state: 'queued',
      created_at: now,
      updated_at: now,
      claimed_by: null,
      lease_expires_at: null,
      attempts: 0,
      result_json: null,
      error: null,
      tracked: true
    };
    try {
      await this.tasks.insertOne(doc);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const existing = await this.tasks.findOne({ _id: doc._id });
      if (!existing) throw err;
      return { task: existing, duplicate: true };
    }
    // Only the insert's winner gets here: a duplicate is neither listed nor counted twice.
    await Promise.all([
      this.lists.append(doc.submitted_by, doc._id, doc.created_at),
      this.counters.record(taskContribution(doc))
    ]);
    return { task: doc, duplicate: false };
  }

  async find(taskId: string): Promise<TaskDocument | null> {
    const task = await this.tasks.findOne({ _id: taskId });
    return task && (await this.settled([task]))[0]!;
  }

  /** The tasks as read, except that a claimed one whose lease lapsed is swept first (and shown as swept). */
  private async settled(tasks: TaskDocument[], now = new Date()): Promise<TaskDocument[]> {
    const at = now.toISOString();
    return Promise.all(
      tasks.map(async (t) => {
        if (t.state !== 'claimed' || !t.lease_expires_at || t.lease_expires_at >= at) return t;
        const out = await this.lapse(t._id, at, t);
        return out?.after ?? out?.before ?? t;
      })
    );
  }

  /** Sweeps lapsed leases (see sweepLapsed); the number of tasks changed. */
  async expireLapsed(now = new Date()): Promise<number> {
    const out = await this.sweepLapsed(now);
    return out.requeued + out.failed;
  }

  /**
   * Returns every claimed task whose lease has lapsed (at most `batch` per call: `more` says a full batch was read)
   * to the queue, or fails it when it has used its attempts. Sweeps race (the workflow's, a claim's, a read's, in
   * several processes) with each other and with the claiming node's calls: each lapse is decided on the task as its
   * lock found it (task-transitions.ts), so a progress call that extended the lease, or a finish, wins.
   */
  async sweepLapsed(now = new Date(), batch = 500): Promise<{ requeued: number; failed: number; more: boolean }> {
    const at = now.toISOString();
    const lapsed = await this.tasks
      .find({ state: 'claimed', lease_expires_at: { $lt: at } }, { projection: { _id: 1 } })
      .limit(batch)
      .toArray();
    const out = { requeued: 0, failed: 0, more: lapsed.length >= batch };
    for (const t of lapsed) {
      const change = await this.lapse(t._id, at);
      if (change?.after) out[change.after.state === 'failed' ? 'failed' : 'requeued'] += 1;
    }
    return out;
  }

  /** Returns one task whose lease lapsed before `at` to the queue, or fails it after its last attempt. */
  private lapse(taskId: string, at: string, known?: TaskDocument) {
    return this.transitions.change(
      taskId,
      (t) => {
        if (t.state !== 'claimed' || !t.lease_expires_at || t.lease_expires_at >= at) return null;
        if (t.attempts < this.opts.maxAttempts)
          return {
            set: {
              state: 'queued',
              claimed_by: null,
              claim_id: null,
              lease_expires_at: null,
              updated_at: at,
              resumed: false
            },
            count: { states: { claimed: -1, queued: 1 } }
          };
        return {
          set: {
            state: 'failed',
            error: `lease lapsed on attempt ${t.attempts} of ${this.opts.maxAttempts}`,
            lease_expires_at: null,
            finished_at: at,
            updated_at: at
          },
          count: { states: { claimed: -1, failed: 1 }, open_by_type: { [t.type]: -1 } }
        };
      },
      known
    );
  }

  /** The earliest lease expiry among claimed tasks (ms since the epoch), or null when no task is claimed. */
  async nextLeaseExpiry(): Promise<number | null> {
    const [first] = await this.tasks
      .find({ state: 'claimed', lease_expires_at: { $ne: null } }, { projection: { lease_expires_at: 1 } })
      .sort({ lease_expires_at: 1 })
      .limit(1)
      .toArray();
    return first?.lease_expires_at ? Date.parse(first.lease_expires_at) : null;
  }

  /**
   * Claims up to `max` queued tasks whose required capabilities are all among `capabilities`, highest priority and
   * oldest first, each under a lease of leaseMs. Exclusive: see the header.
   */
  async claim(
    nodeId: string,
    capabilities: string[],
    max: number,
    leaseMs: number,
    now = new Date()
  ): Promise<TaskDocument[]> {
    await this.expireLapsed(now);
    const have = new Set(capabilities);
    const claimed: TaskDocument[] = [];
    // First the tasks handed back to this node by their submitters' answers (resume): already claimed by it. Then a
    // window of queued candidates in claim order (tasks others take meanwhile are skipped). Both read at once.
    const [resumed, candidates] = await Promise.all([
      this.tasks
        .find({ state: 'claimed', claimed_by: nodeId, resumed: true }, { projection: { _id: 1 } })
        .limit(max)
        .toArray(),
      this.tasks
        .find({ state: 'queued' }, { projection: { _id: 1, required_capabilities: 1 } })
        .sort({ priority: -1, created_at: 1 })
        .limit(Math.max(50, max * 4))
        .toArray()
    ]);
    for (const r of resumed) {
      const change = await this.transitions.change(r._id, (t) =>
        t.state === 'claimed' && t.claimed_by === nodeId && t.resumed ? { set: { resumed: false } } : null
      );
      if (change?.after) claimed.push(change.after);
    }
    const at = now.toISOString();
    for (const c of claimed.length >= max ? [] : candidates) {
      if (claimed.length >= max) break;
      if (!c.required_capabilities.every((cap) => have.has(cap))) continue;
      const change = await this.transitions.change(c._id, (t) => {
        if (t.state !== 'queued') return null;
        // The wait figure is the last claim's: a reclaimed task's earlier wait is replaced, not added.
        const waited = Date.parse(at) - Date.parse(t.claimed_at ?? t.created_at);
        return {
          set: {
            state: 'claimed',
            claimed_by: nodeId,
            claim_id: randomUUID(),
            attempts: t.attempts + 1,
            claimed_at: at,
            lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
            updated_at: at,
            progress: null
          },
          count: { states: { queued: -1, claimed: 1 }, ...(t.claimed_at ? {} : { waits: 1 }), wait_ms: waited }
        };
      });
      if (change?.after) claimed.push(change.after);
    }
    return claimed;
  }

  /** Why a node's call on a task it does not (or no longer) hold is refused, from the task as last read. */
  private refusal(task: TaskDocument | null, nodeId: string): ClaimOutcome {
    if (!task) return { ok: false, reason: 'not_found', task };
    if (task.claimed_by === nodeId && task.state === 'canceled') return { ok: false, reason: 'canceled', task };
    if (task.claimed_by === nodeId && TERMINAL.includes(task.state)) return { ok: false, reason: 'finished', task };
    if (task.claimed_by === nodeId && task.state === 'input_required') return { ok: false, reason: 'waiting', task };
    return { ok: false, reason: 'not_yours', task };
  }

  /** A change only the claiming node may make, while it holds the task. */
  private async byClaimant(
    taskId: string,
    nodeId: string,
    decide: (t: TaskDocument) => NonNullable<TaskDecision>
  ): Promise<ClaimOutcome> {
    const change = await this.transitions.changeOrRetry(taskId, (t) =>
      t.state === 'claimed' && t.claimed_by === nodeId ? decide(t) : null
    );
    return change?.after ? { ok: true, task: change.after } : this.refusal(change?.before ?? null, nodeId);
  }

  /** Progress from the claiming node: records the note and extends the lease. */
  progress(taskId: string, nodeId: string, note: string | null, leaseMs: number, now = new Date()) {
    return this.byClaimant(taskId, nodeId, () => ({
      set: {
        lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
        updated_at: now.toISOString(),
        ...(note === null ? {} : { progress: note })
      }
    }));
  }

  /**
   * The claiming node's outcome: done with a result (and artifact updates, or a Message as its answer), or failed
   * with a reason. A task whose lease lapsed but is not yet swept may still finish.
   */
  finish(
    taskId: string,
    nodeId: string,
    outcome:
      | { result_json: string | null; artifact_updates_json?: string[]; reply?: (t: TaskDocument) => string }
      | { error: string },
    now = new Date()
  ): Promise<ClaimOutcome> {
    const at = now.toISOString();
    return this.byClaimant(taskId, nodeId, (t) => {
      const set =
        'error' in outcome
          ? { state: 'failed' as const, error: outcome.error }
          : {
              state: 'done' as const,
              result_json: outcome.result_json,
              error: null,
              ...(outcome.artifact_updates_json?.length
                ? { artifact_updates_json: [...(t.artifact_updates_json ?? []), ...outcome.artifact_updates_json] }
                : {}),
              ...(outcome.reply ? { reply_json: outcome.reply(t) } : {})
            };
      return this.finishing(t, set, at);
    });
  }

  private finishing(t: TaskDocument, set: Partial<TaskDocument> & { state: 'done' | 'failed' }, at: string) {
    const count: TallyChange = { states: { claimed: -1, [set.state]: 1 }, open_by_type: { [t.type]: -1 } };
    if (set.state === 'done' && t.claimed_at)
      Object.assign(count, { runs: 1, run_ms: Date.parse(at) - Date.parse(t.claimed_at) });
    return { set: { ...set, lease_expires_at: null, finished_at: at, updated_at: at }, count };
  }

  /**
   * The claiming node asks its submitter for more (A2A input-required), with its question (an A2A Message as
   * canonical JSON, made from the task as read) or none: no lease runs while the task waits; the node keeps it
   * (see resume).
   */
  requireInput(taskId: string, nodeId: string, question: ((t: TaskDocument) => string) | null, now = new Date()) {
    const at = now.toISOString();
    return this.byClaimant(taskId, nodeId, (t) => ({
      set: {
        state: 'input_required',
        lease_expires_at: null,
        updated_at: at,
        progress: null,
        ...(question === null ? {} : { history_json: [...(t.history_json ?? []), question(t)] })
      },
      count: { states: { claimed: -1, input_required: 1 } }
    }));
  }

  /**
   * The submitter's answer to a task waiting for input: appended to its history, the task claimed again by the
   * same node under a new lease, and handed to it by its next claim (a lease that lapses first requeues the task,
   * with its history, for any node). Null when the task is not waiting for input (the caller says why).
   */
  async resume(taskId: string, answer_json: string, leaseMs: number, now = new Date()) {
    const at = now.toISOString();
    const change = await this.transitions.changeOrRetry(taskId, (t) =>
      t.state === 'input_required'
        ? {
            set: {
              state: 'claimed',
              lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
              updated_at: at,
              resumed: true,
              history_json: [...(t.history_json ?? []), answer_json]
            },
            count: { states: { input_required: -1, claimed: 1 } }
          }
        : null
    );
    return change?.after ?? null;
  }

  /** An artifact update from the claiming node while it works (canonical JSON, see TaskDocument); extends the lease. */
  addArtifact(taskId: string, nodeId: string, update_json: string, leaseMs: number, now = new Date()) {
    return this.byClaimant(taskId, nodeId, (t) => ({
      set: {
        lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
        updated_at: now.toISOString(),
        artifact_updates_json: [...(t.artifact_updates_json ?? []), update_json]
      }
    }));
  }

  /**
   * Cancels a queued, claimed or input_required task (a claimed task's node hears it at its next progress call);
   * others are returned as they are.
   */
  async cancel(taskId: string, now = new Date()): Promise<{ canceled: boolean; task: TaskDocument | null }> {
    const at = now.toISOString();
    const change = await this.transitions.changeOrRetry(taskId, (t) =>
      t.state === 'queued' || t.state === 'claimed' || t.state === 'input_required'
        ? {
            set: { state: 'canceled', lease_expires_at: null, finished_at: at, updated_at: at, resumed: false },
            count: { states: { [t.state]: -1, canceled: 1 }, open_by_type: { [t.type]: -1 } }
          }
        : null
    );
    return { canceled: !!change?.after, task: change ? (change.after ?? change.before) : null };
  }

  /**
   * A submitter's tasks. Unfiltered: the page of the submitter's list (task-lists.ts), newest submitted first, `_id`
   * reads only; `total` is the list's length. With a state, context or `updatedSince` filter (updated_at at or after
   * it, an ISO timestamp as stored): the tasks matching (served on FerretDB by the launcher's GIN indexes on
   * submitted_by, state and context_id), ordered here by last update, newest first (ties: id ascending); this costs
   * the number of the submitter's tasks matching the equalities, not of all tasks. Until the lists cover every task
   * (task-reads-build.ts), unfiltered reads read every task of the submitter, newest created first.
   */
  async listBySubmitter(
    submitter: string,
    filter: { state?: TaskState; contextId?: string; updatedSince?: string },
    page: { limit: number; offset: number }
  ): Promise<{ total: number; tasks: TaskDocument[] }> {
    if (!filter.state && !filter.contextId && !filter.updatedSince && (await this.readsBuild.ready())) {
      const { total, taskIds } = await this.lists.page(submitter, page.offset, page.limit);
      return { total, tasks: await this.settled(await this.byIds(taskIds)) };
    }
    const query: Filter<TaskDocument> = { submitted_by: submitter };
    if (filter.state) query.state = filter.state;
    if (filter.contextId) query.context_id = filter.contextId;
    if (filter.updatedSince) query.updated_at = { $gte: filter.updatedSince };
    const key = query.state || query.context_id || query.updated_at ? 'updated_at' : 'created_at';
    const matching = await this.tasks.find(query, { projection: { _id: 1, [key]: 1 } }).toArray();
    matching.sort((a, b) => (a[key] === b[key] ? (a._id < b._id ? -1 : 1) : a[key] < b[key] ? 1 : -1));
    const ids = matching.slice(page.offset, page.offset + page.limit).map((t) => t._id);
    return { total: matching.length, tasks: await this.settled(await this.byIds(ids)) };
  }

  /** The tasks with these ids, in this order (a task missing meanwhile is left out). */
  private async byIds(ids: string[]): Promise<TaskDocument[]> {
    const byId = new Map((await findByIds(this.tasks, ids)).map((t) => [t._id, t]));
    return ids.map((id) => byId.get(id)).filter((t): t is TaskDocument => t !== undefined);
  }

  /**
   * Counts per state (queued = depth, claimed = in flight), open tasks per type, and mean wait (created → last
   * claim) and run (last claim → done) times, from the counters (task-counters.ts); from every task until the counters
   * cover them all (task-reads-build.ts).
   */
  async stats(): Promise<
    Record<TaskState, number> & {
      total: number;
      by_type: Record<string, number>;
      mean_wait_s: number | null;
      mean_run_s: number | null;
    }
  > {
    await this.expireLapsed();
    const t = (await this.readsBuild.ready())
      ? await this.counters.read()
      : tallyOf(
          await this.tasks
            .find({}, { projection: { state: 1, type: 1, created_at: 1, claimed_at: 1, finished_at: 1 } })
            .toArray()
        );
    const by_type = Object.fromEntries(
      Object.entries(t.open_by_type)
        .filter(([, n]) => n > 0)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    );
    return {
      ...t.states,
      total: Object.values(t.states).reduce((a, b) => a + b, 0),
      by_type,
      mean_wait_s: t.waits ? t.wait_ms / t.waits / 1000 : null,
      mean_run_s: t.runs ? t.run_ms / t.runs / 1000 : null
    };
  }

  /**
   * Rebuilds what the reads keep beside the tasks from the tasks themselves (scripts/tasks-recount.ts): appends to
   * its submitter's list every task missing from it (oldest first), and repairs the counters (TaskCounters.recount).
   * Reads every task: an operator's command, not a request path. Builds first when the service has not yet
   * (task-reads-build.ts), so the tasks stored before the upgrade are listed before the later ones.
   */
  async recount(opts: { fold?: boolean } = {}): Promise<{ listed: number; before: TallyChange; after: TallyChange }> {
    if (!(await this.readsBuild.ready())) await this.readsBuild.build('tasks:recount');
    const all = await this.tasks
      .find(
        {},
        { projection: { _id: 1, submitted_by: 1, state: 1, type: 1, created_at: 1, claimed_at: 1, finished_at: 1 } }
      )
      .toArray();
    const bySubmitter = new Map<string, typeof all>();
    for (const t of all) {
      let list = bySubmitter.get(t.submitted_by);
      if (!list) bySubmitter.set(t.submitted_by, (list = []));
      list.push(t);
    }
    let listed = 0;
    for (const [submitter, tasks] of bySubmitter) {
      const have = new Set(await this.lists.listedTaskIds(submitter));
      const missing = tasks
        .filter((t) => !have.has(t._id))
        .sort((a, b) =>
          a.created_at === b.created_at ? (a._id < b._id ? 1 : -1) : a.created_at < b.created_at ? -1 : 1
        );
      // One at a time, so the list keeps their order.
      for (const t of missing) await this.lists.append(submitter, t._id, t.created_at);
      listed += missing.length;
    }
    const after = tallyOf(all);
    const before = await this.counters.recount(after, opts);
    return { listed, before, after };
  }
}
