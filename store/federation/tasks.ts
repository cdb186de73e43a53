/**
 * Tasks for worker nodes, submitted on the hub listener (POST /a2a/task) or as A2A messages (POST /a2a/message:send),
 * and claimed by worker nodes through POST /api/task/assign. The record carries what a claim needs: required
 * capabilities to match a node, priority, a claim lease (claimed_by, claim_id, lease_expires_at) that lapses back to
 * queued, attempts, result or error. The payload is kept as canonical JSON text (FerretDB cannot store every JSON
 * object as a document).
 *
 * Claims are exclusive across API processes. A claimant first inserts the claim record `<task id>#<attempt>` into
 * task_claims: the unique _id lets exactly one claimant win each attempt of a task (an insert is atomic on FerretDB
 * too, where findAndModify is not: with conditional findOneAndUpdates alone, test/api/work-distribution.test.ts saw
 * one task handed to two racing claimants). The winner then moves the task to claimed with a conditional
 * findOneAndUpdate on state and the attempt count it read, setting its claim_id, and keeps the task only when the
 * document returned carries that claim_id. No $inc anywhere: every condition is on a field the update itself sets.
 *
 * A lease is the stored lease_expires_at. sweepLapsed() returns each lapsed task to the queue, or fails it after
 * TASK_MAX_ATTEMPTS, each change conditional on the lease it read. It runs in two places: the task-leases/<queue>
 * workflow (workflows/federation/task-lease.ts) wakes at the earliest lease expiry (nextLeaseExpiry()) and sweeps,
 * so a lapsed task is requeued when its lease ends even if nobody reads; and every claim, read and stats call sweeps
 * first, so what the API answers never shows a lapsed lease as held, even while the worker or Temporal is down.
 */
import { randomUUID } from 'node:crypto';
import { Collection, Db, Filter } from 'mongodb';
import type { TaskState } from '../../core/federation/vocabulary';
import { isDuplicateKey } from '../mongo';

/** What a submitter decides about a new task; everything else starts at its queued value. */
export type NewTask = Pick<
  TaskDocument,
  '_id' | 'type' | 'payload_json' | 'required_capabilities' | 'priority' | 'submitted_by' | 'context_id'
>;

export interface TaskDocument {
  _id: string; // task id
  type: string;
  payload_json: string;
  required_capabilities: string[];
  priority: number;
  state: TaskState;
  submitted_by: string;
  created_at: string;
  updated_at: string;
  claimed_by: string | null;
  lease_expires_at: string | null;
  attempts: number;
  result_json: string | null;
  error: string | null;
  /** Set by each claim; a node's complete/fail/progress must come from the current claim's node. */
  claim_id?: string | null;
  /** When the current (or last) claim began, and when the task reached done/failed/canceled. */
  claimed_at?: string | null;
  finished_at?: string | null;
  /** The last progress note a node sent (short text). */
  progress?: string | null;
  /** A2A: the context of the message the task came in as (its payload is { message }). */
  context_id?: string | null;
}

export type ClaimOutcome =
  | { ok: true; task: TaskDocument }
  | { ok: false; reason: 'not_found' | 'not_yours' | 'canceled' | 'finished'; task: TaskDocument | null };

const TERMINAL: TaskState[] = ['done', 'failed', 'canceled'];

export class TaskStore {
  private readonly tasks: Collection<TaskDocument>;
  private readonly claims: Collection<{ _id: string; task_id: string; node_id: string; claim_id: string; at: string }>;
  constructor(
    db: Db,
    private readonly opts: { maxAttempts: number } = { maxAttempts: 3 }
  ) {
    this.tasks = db.collection('tasks');
    this.claims = db.collection('task_claims');
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
      error: null
    };
    try {
      await this.tasks.insertOne(doc);
      return { task: doc, duplicate: false };
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const existing = await this.tasks.findOne({ _id: doc._id });
      if (!existing) throw err;
      return { task: existing, duplicate: true };
    }
  }

  async find(taskId: string): Promise<TaskDocument | null> {
    await this.expireLapsed();
    return this.tasks.findOne({ _id: taskId });
  }

  /** Sweeps lapsed leases (see sweepLapsed); the number of tasks changed. */
  async expireLapsed(now = new Date()): Promise<number> {
    const out = await this.sweepLapsed(now);
    return out.requeued + out.failed;
  }

  /**
   * Returns every claimed task whose lease has lapsed (at most `batch` per call: `more` says a full batch was read)
   * to the queue, or fails it when it has used its attempts. Each change is conditional on the lease the sweep read,
   * so a progress call that extended it in between wins.
   */
  async sweepLapsed(now = new Date(), batch = 500): Promise<{ requeued: number; failed: number; more: boolean }> {
    const at = now.toISOString();
    const lapsed = await this.tasks
      .find(
        { state: 'claimed', lease_expires_at: { $lt: at } },
        { projection: { _id: 1, attempts: 1, lease_expires_at: 1, claim_id: 1 } }
      )
      .limit(batch)
      .toArray();
    const out = { requeued: 0, failed: 0, more: lapsed.length >= batch };
    for (const t of lapsed) {
      const exhausted = t.attempts >= this.opts.maxAttempts;
      const set: Partial<TaskDocument> = exhausted
        ? {
            state: 'failed',
            error: `lease lapsed on attempt ${t.attempts} of ${this.opts.maxAttempts}`,
            lease_expires_at: null,
            finished_at: at,
            updated_at: at
          }
        : { state: 'queued', claimed_by: null, claim_id: null, lease_expires_at: null, updated_at: at };
      const res = await this.tasks.updateOne(
        { _id: t._id, state: 'claimed', claim_id: t.claim_id ?? null, lease_expires_at: t.lease_expires_at },
        { $set: set }
      );
      if (res.modifiedCount) out[exhausted ? 'failed' : 'requeued'] += 1;
    }
    return out;
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
    // A window of candidates in claim order; tasks others take meanwhile are skipped.
    const candidates = await this.tasks
      .find({ state: 'queued' }, { projection: { _id: 1, attempts: 1, required_capabilities: 1 } })
      .sort({ priority: -1, created_at: 1 })
      .limit(Math.max(50, max * 4))
      .toArray();
    for (const c of candidates) {
      if (claimed.length >= max) break;
      if (!c.required_capabilities.every((cap) => have.has(cap))) continue;
      const at = now.toISOString();
      const claimId = randomUUID();
      try {
        await this.claims.insertOne({
          _id: `${c._id}#${c.attempts + 1}`,
          task_id: c._id,
          node_id: nodeId,
          claim_id: claimId,
          at
        });
      } catch (err) {
        if (isDuplicateKey(err)) continue; // another claimant won this attempt
        throw err;
      }
      const got = await this.tasks.findOneAndUpdate(
        { _id: c._id, state: 'queued', attempts: c.attempts },
        {
          $set: {
            state: 'claimed',
            claimed_by: nodeId,
            claim_id: claimId,
            attempts: c.attempts + 1,
            claimed_at: at,
            lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
            updated_at: at,
            progress: null
          }
        },
        { returnDocument: 'after' }
      );
      if (got && got.claim_id === claimId && got.claimed_by === nodeId) claimed.push(got);
    }
    return claimed;
  }

  /** Why a node's call on a task it does not (or no longer) hold is refused. */
  private async refusal(taskId: string, nodeId: string): Promise<ClaimOutcome> {
    const task = await this.tasks.findOne({ _id: taskId });
    if (!task) return { ok: false, reason: 'not_found', task };
    if (task.claimed_by === nodeId && task.state === 'canceled') return { ok: false, reason: 'canceled', task };
    if (task.claimed_by === nodeId && TERMINAL.includes(task.state)) return { ok: false, reason: 'finished', task };
    return { ok: false, reason: 'not_yours', task };
  }

  /** Progress from the claiming node: records the note and extends the lease. */
  async progress(
    taskId: string,
    nodeId: string,
    note: string | null,
    leaseMs: number,
    now = new Date()
  ): Promise<ClaimOutcome> {
    const at = now.toISOString();
    const got = await this.tasks.findOneAndUpdate(
      { _id: taskId, state: 'claimed', claimed_by: nodeId },
      {
        $set: {
          lease_expires_at: new Date(now.getTime() + leaseMs).toISOString(),
          updated_at: at,
          ...(note === null ? {} : { progress: note })
        }
      },
      { returnDocument: 'after' }
    );
    return got && got.claimed_by === nodeId && got.state === 'claimed'
      ? { ok: true, task: got }
      : this.refusal(taskId, nodeId);
  }

  /** The claiming node's result (done) or reason (failed). A task whose lease lapsed but is not yet taken may still finish. */
  async finish(
    taskId: string,
    nodeId: string,
    outcome: { result_json: string } | { error: string },
    now = new Date()
  ): Promise<ClaimOutcome> {
    const at = now.toISOString();
    const set =
      'result_json' in outcome
        ? { state: 'done' as const, result_json: outcome.result_json, error: null }
        : { state: 'failed' as const, error: outcome.error };
    const got = await this.tasks.findOneAndUpdate(
      { _id: taskId, state: 'claimed', claimed_by: nodeId },
      { $set: { ...set, lease_expires_at: null, finished_at: at, updated_at: at } },
      { returnDocument: 'after' }
    );
    return got && got.claimed_by === nodeId && got.state === set.state
      ? { ok: true, task: got }
      : this.refusal(taskId, nodeId);
  }

  /** Cancels a queued or claimed task (the claiming node hears it at its next progress call); others are returned as they are. */
  async cancel(taskId: string, now = new Date()): Promise<{ canceled: boolean; task: TaskDocument | null }> {
    const at = now.toISOString();
    const got = await this.tasks.findOneAndUpdate(
      { _id: taskId, state: { $in: ['queued', 'claimed'] } },
      { $set: { state: 'canceled', lease_expires_at: null, finished_at: at, updated_at: at } },
      { returnDocument: 'after' }
    );
    if (got && got.state === 'canceled') return { canceled: true, task: got };
    return { canceled: false, task: await this.tasks.findOne({ _id: taskId }) };
  }

  /** A submitter's tasks, newest first. */
  async listBySubmitter(
    submitter: string,
    filter: { state?: TaskState; contextId?: string },
    page: { limit: number; offset: number }
  ): Promise<{ total: number; tasks: TaskDocument[] }> {
    await this.expireLapsed();
    const query: Filter<TaskDocument> = { submitted_by: submitter };
    if (filter.state) query.state = filter.state;
    if (filter.contextId) query.context_id = filter.contextId;
    const [total, tasks] = await Promise.all([
      this.tasks.countDocuments(query),
      this.tasks.find(query).sort({ created_at: -1, _id: 1 }).skip(page.offset).limit(page.limit).toArray()
    ]);
    return { total, tasks };
  }

  /** Counts per state (queued = depth, claimed = in flight), and mean wait (created → claimed) and run (claimed → done) times. */
  async stats(): Promise<
    Record<TaskState, number> & {
      total: number;
      by_type: Record<string, number>;
      mean_wait_s: number | null;
      mean_run_s: number | null;
    }
  > {
    await this.expireLapsed();
    const docs = await this.tasks
      .find({}, { projection: { state: 1, type: 1, created_at: 1, claimed_at: 1, finished_at: 1 } })
      .toArray();
    const out = {
      queued: 0,
      claimed: 0,
      done: 0,
      failed: 0,
      canceled: 0,
      total: docs.length,
      by_type: {} as Record<string, number>
    };
    let waits = 0;
    let waitSum = 0;
    let runs = 0;
    let runSum = 0;
    for (const d of docs) {
      out[d.state] += 1;
      if (d.state === 'queued' || d.state === 'claimed') out.by_type[d.type] = (out.by_type[d.type] ?? 0) + 1;
      if (d.claimed_at) {
        waits += 1;
        waitSum += Date.parse(d.claimed_at) - Date.parse(d.created_at);
        if (d.state === 'done' && d.finished_at) {
          runs += 1;
          runSum += Date.parse(d.finished_at) - Date.parse(d.claimed_at);
        }
      }
    }
    return {
      ...out,
      mean_wait_s: waits ? waitSum / waits / 1000 : null,
      mean_run_s: runs ? runSum / runs / 1000 : null
    };
  }
}
