/**
 * One change of a task at a time, on MongoDB and on FerretDB alike (TaskStore's every write of a stored task).
 *
 * FerretDB 1.24 applies an update by reading the document, changing it in its handler and writing it back whole.
 * Two conditional updates of one task at once can both match and both write: the later write wins, the earlier
 * change is lost, and each writer counted its own change (task-counters.ts). A finish racing a lapse could leave a
 * done task queued again, a cancel racing a claim a canceled task claimed, and the queue's figures off by one each
 * time. A unique insert is atomic there, so each change of a task takes a lock first:
 *
 *   read the task, decide → insert `<task id>@<rev + 1>` into task_claims (exactly one writer wins a revision) →
 *   update with `rev: rev + 1`, conditional on `rev` → drop the lock → count the change.
 *
 * A writer that loses the insert reads the task again and decides again: a finish that lost to a lapse is refused,
 * a cancel that lost to a claim cancels the claimed task. Locks are held for one update (milliseconds). A lock left
 * by a writer that stopped between its insert and its update (a crash, a lost database) is taken over once it is
 * LOCK_TAKEOVER_MS old and the task is still at that revision (until then, changes of that task wait STALL_MS and
 * are answered `stalled`: sweeps and claims pass the task by, a node's or a client's call gets 503 and retries); one left between the update and its removal stays as
 * a record of no consequence (the task has moved past its revision). Tasks stored before `rev` existed are at 0.
 */
import type { Collection, Db } from 'mongodb';
import { AppError } from '../../core/errors';
import { isDuplicateKey } from '../mongo';
import type { TaskCounters, TallyChange } from './task-counters';
import type { TaskDocument } from './task-document';

export const TASK_LOCKS_COLLECTION = 'task_claims';
/** How old a lock must be before another writer takes it over (its writer is taken to have stopped). */
export const LOCK_TAKEOVER_MS = 60_000;
/**
 * How long a writer waits for a lock whose task does not move (its holder has stalled). Locks are held for one
 * update, so this is only reached after a writer stopped mid-change: the change is then `stalled`.
 */
const STALL_MS = 3_000;

/** What a change does to a task, or null when the task as read does not allow it. */
export type TaskDecision = { set: Partial<TaskDocument>; count?: TallyChange } | null;

export interface TaskLock {
  _id: string;
  task_id: string;
  at: string;
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 2 + Math.floor(Math.random() * 18)));

export class TaskTransitions {
  private readonly tasks: Collection<TaskDocument>;
  private readonly locks: Collection<TaskLock>;

  constructor(
    db: Db,
    private readonly counters: TaskCounters
  ) {
    this.tasks = db.collection('tasks');
    this.locks = db.collection(TASK_LOCKS_COLLECTION);
  }

  /**
   * Applies `decide`'s change to the task, alone (see the header). `after` is the task as written, or null when
   * the task as last read did not allow the change (`before` is then that reading); null when there is no such
   * task. `known`: the task as the caller just read it (saves the first read).
   */
  async change(
    taskId: string,
    decide: (task: TaskDocument) => TaskDecision,
    known?: TaskDocument
  ): Promise<{ before: TaskDocument; after: TaskDocument | null; stalled?: true } | null> {
    let task = known ?? (await this.tasks.findOne({ _id: taskId }));
    let waitingSince = { rev: -1, at: 0 };
    while (task) {
      const decision = decide(task);
      if (!decision) return { before: task, after: null };
      const rev = task.rev ?? 0;
      if (waitingSince.rev !== rev) waitingSince = { rev, at: Date.now() };
      else if (Date.now() - waitingSince.at > STALL_MS) return { before: task, after: null, stalled: true };
      const lockId = `${taskId}@${rev + 1}`;
      if (await this.lock(lockId, taskId, rev)) {
        const res = await this.tasks.updateOne(
          { _id: taskId, rev: rev === 0 ? { $exists: false } : rev },
          { $set: { ...decision.set, rev: rev + 1 } }
        );
        await this.locks.deleteOne({ _id: lockId });
        if (res.modifiedCount) {
          if (decision.count) await this.counters.record(decision.count, { old: !task.tracked });
          return { before: task, after: { ...task, ...decision.set, rev: rev + 1 } };
        }
        // Written meanwhile without this lock (a process of the version before, or a writer whose lock was taken
        // over): read it again.
      } else await pause();
      task = await this.tasks.findOne({ _id: taskId });
    }
    return null;
  }

  /** change(), for a caller's request: a stalled change is 503 (retry) rather than a refusal. */
  async changeOrRetry(...args: Parameters<TaskTransitions['change']>): ReturnType<TaskTransitions['change']> {
    const out = await this.change(...args);
    if (out?.stalled)
      throw new AppError(
        'unavailable',
        `task ${args[0]} is being changed by a writer that stopped; retry`,
        {},
        {
          'Retry-After': '5'
        }
      );
    return out;
  }

  /** Takes the lock of a revision; false when another writer holds it (taking over one left LOCK_TAKEOVER_MS ago). */
  private async lock(lockId: string, taskId: string, rev: number): Promise<boolean> {
    try {
      await this.locks.insertOne({ _id: lockId, task_id: taskId, at: new Date().toISOString() });
      return true;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    const held = await this.locks.findOne({ _id: lockId });
    if (!held || Date.parse(held.at) > Date.now() - LOCK_TAKEOVER_MS) return false;
    const current = await this.tasks.findOne({ _id: taskId }, { projection: { rev: 1 } });
    if ((current?.rev ?? 0) !== rev) return false;
    // Only a lock as old as the one read is removed; the next insert decides between takers.
    await this.locks.deleteOne({ _id: lockId, at: held.at });
    return false;
  }
}
