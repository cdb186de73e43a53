/**
 * Each submitter's tasks in the order they were submitted, kept as documents addressed by `_id`, so A2A ListTasks
 * reads the newest page of a submitter with a few `_id` lookups instead of a sort over every task (which FerretDB
 * serves by reading the whole collection: docs/federation.md#task-reads).
 *
 * The n-th task of a submitter (its ordinal, from 1) is document `<submitter>\n<n>` of `task_lists` (`{ task_id }`).
 * The unique `_id` decides between racing processes (an insert is atomic on FerretDB too, a read-modify-write is
 * not): a process numbers its waiting appends of one submitter together in a round, n+1 … n+k after the length it
 * reads, inserts them in one unordered command, and puts those whose ordinal another process took into the next
 * round. An ordinal is only tried once every ordinal below it existed, so the list has no holes, except one left
 * when an insert of a round failed (not as a duplicate) while a later one of the round succeeded: the readers'
 * length stops there until the next round that reads the length fills it (a process reads it at its first round for a submitter and after another process took an
 * ordinal it tried; otherwise it goes on from its own last round).
 *
 * Document `<submitter>` (`{ n }`) says how far the list was known to be complete, raised with `$max` after each
 * round; a lost or late raise only makes it low, and the length is that hint plus the ordinals found after it
 * (read in parallel, 8 at a time).
 *
 * The tasks stored before this version (no `tracked` field) come first, as the list's prefix, written once by the
 * build of the task reads (task-reads-build.ts): position p of the prefix is `<submitter>\n-<p>`, in creation order
 * (ties: the greater id first, as the earlier sort read newest first by id ascending), and `<submitter>\n-`
 * (`{ n }`) is its length, written after its positions. A page numbers the prefix 1 … P and the appended list
 * P+1 … P+length.
 *
 * Order: a list is in the order tasks were listed, which is creation order for tasks submitted one after another
 * and, within a round, for tasks submitted together. A task whose insert took longer than a later one's can be
 * listed after it (concurrent submits of one submitter, a few milliseconds apart): newest-first pages can show
 * such a pair the other way round. The sort by created_at that put ties right read every task.
 */
import type { Collection, Db } from 'mongodb';
import { findByIds, retryingUpsert } from '../mongo';
import { writeErrorsOf } from '../insert-batch';

export const TASK_LISTS_COLLECTION = 'task_lists';
const PROBE = 8;
const MAX_ROUNDS = 50;

interface ListDocument {
  _id: string;
  /** A position: the task at this ordinal. */
  task_id?: string;
  /** The head: every ordinal up to n exists. */
  n?: number;
}

interface Append {
  taskId: string;
  createdAt: string;
  rounds: number;
  resolve: (ordinal: number) => void;
  reject: (err: unknown) => void;
}

const positionId = (submitter: string, n: number) => `${submitter}\n${n}`;
const prefixId = (submitter: string, n: number) => `${submitter}\n-${n}`;
const prefixHeadId = (submitter: string) => `${submitter}\n-`;

export class TaskLists {
  private readonly docs: Collection<ListDocument>;
  private readonly waiting = new Map<string, Append[]>();
  private readonly appending = new Set<string>();
  /** Per submitter, a length this process knows (its last round's end, when nothing in it was taken by another). */
  private readonly known = new Map<string, number>();

  constructor(db: Db) {
    this.docs = db.collection<ListDocument>(TASK_LISTS_COLLECTION);
  }

  /** Adds a task at the end of its submitter's list; resolves with its ordinal once it is stored. */
  append(submitter: string, taskId: string, createdAt: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      let queue = this.waiting.get(submitter);
      if (!queue) this.waiting.set(submitter, (queue = []));
      queue.push({ taskId, createdAt, rounds: 0, resolve, reject });
      void this.appendRounds(submitter);
    });
  }

  private async appendRounds(submitter: string): Promise<void> {
    if (this.appending.has(submitter)) return;
    this.appending.add(submitter);
    try {
      for (;;) {
        const queue = this.waiting.get(submitter);
        if (!queue || queue.length === 0) break;
        const round = queue.splice(0, queue.length);
        try {
          const retry = await this.appendRound(submitter, round);
          queue.unshift(...retry);
        } catch (err) {
          for (const a of round) a.reject(err);
        }
      }
    } finally {
      this.waiting.delete(submitter);
      this.appending.delete(submitter);
      // An append that arrived while the loop was ending starts its own.
      if (this.waiting.get(submitter)?.length) void this.appendRounds(submitter);
    }
  }

  /** One round: numbers and inserts the round's tasks; returns those whose ordinal another process took. */
  private async appendRound(submitter: string, round: Append[]): Promise<Append[]> {
    // A process that alone appends to a submitter's list reads its length once, not at every round; after another
    // process took an ordinal (a duplicate below) the length is read again.
    const first = (this.known.get(submitter) ?? (await this.length(submitter))) + 1;
    // A round in creation order (ties: the greater id first, so newest-first pages break ties by id ascending).
    round.sort((a, b) =>
      a.createdAt === b.createdAt ? (a.taskId < b.taskId ? 1 : -1) : a.createdAt < b.createdAt ? -1 : 1
    );
    const docs = round.map((a, i) => {
      a.rounds++;
      return { _id: positionId(submitter, first + i), task_id: a.taskId };
    });
    let failed: ReturnType<typeof writeErrorsOf> = null;
    try {
      await this.docs.insertMany(docs, { ordered: false });
    } catch (err) {
      failed = writeErrorsOf(err);
      if (!failed) {
        this.known.delete(submitter);
        throw err;
      }
    }
    const retry: Append[] = [];
    let complete = true;
    round.forEach((a, i) => {
      const error = failed?.get(i);
      if (!error) return a.resolve(first + i);
      if (error.code === 11000 && a.rounds < MAX_ROUNDS) return retry.push(a);
      complete = false;
      a.reject(Object.assign(new Error(error.errmsg ?? 'the task could not be listed'), { code: error.code }));
    });
    // Every ordinal of the round now exists (ours or another process's) unless an insert failed otherwise.
    if (complete && retry.length === 0) this.known.set(submitter, first + round.length - 1);
    else this.known.delete(submitter);
    if (this.known.size > 10_000) this.known.clear();
    if (complete) await this.raiseHead(submitter, first + round.length - 1).catch(() => undefined);
    return retry;
  }

  private async raiseHead(submitter: string, n: number): Promise<void> {
    await retryingUpsert(() => this.docs.updateOne({ _id: submitter }, { $max: { n } }, { upsert: true }));
  }

  /** How many tasks the submitter's list holds (ordinals 1 … length all exist). */
  async length(submitter: string): Promise<number> {
    const head = await this.docs.findOne({ _id: submitter });
    let n = head?.n ?? 0;
    for (;;) {
      const ids = Array.from({ length: PROBE }, (_, i) => positionId(submitter, n + 1 + i));
      const found = new Set((await findByIds(this.docs, ids)).map((d) => d._id));
      let run = 0;
      while (run < PROBE && found.has(ids[run]!)) run++;
      n += run;
      if (run < PROBE) return n;
    }
  }

  /** The task ids at ordinals `from` down to `to` (inclusive, from >= to >= 1), newest first. */
  async taskIds(submitter: string, from: number, to: number): Promise<string[]> {
    const ids: string[] = [];
    for (let n = from; n >= Math.max(1, to); n--) ids.push(positionId(submitter, n));
    const byId = new Map((await findByIds(this.docs, ids)).map((d) => [d._id, d.task_id]));
    return ids.map((id) => byId.get(id)).filter((t): t is string => typeof t === 'string');
  }

  /** How many tasks the submitter's prefix holds (tasks stored before this version). */
  async prefixLength(submitter: string): Promise<number> {
    return (await this.docs.findOne({ _id: prefixHeadId(submitter) }))?.n ?? 0;
  }

  /**
   * Writes the submitter's prefix (task ids oldest first), then its length. Only the build writes it; a build run
   * again writes the same positions over them.
   */
  async writePrefix(submitter: string, taskIds: string[]): Promise<void> {
    for (let i = 0; i < taskIds.length; i += 16)
      await Promise.all(
        taskIds.slice(i, i + 16).map((taskId, k) => {
          const _id = prefixId(submitter, i + k + 1);
          return this.docs.replaceOne({ _id }, { task_id: taskId }, { upsert: true });
        })
      );
    await this.docs.replaceOne({ _id: prefixHeadId(submitter) }, { n: taskIds.length }, { upsert: true });
  }

  /** A page of the submitter's tasks, newest first (prefix and list), and how many there are. */
  async page(submitter: string, offset: number, limit: number): Promise<{ total: number; taskIds: string[] }> {
    const [prefix, appended] = await Promise.all([this.prefixLength(submitter), this.length(submitter)]);
    const total = prefix + appended;
    const from = total - offset;
    if (limit <= 0 || from < 1) return { total, taskIds: [] };
    const ids: string[] = [];
    for (let n = from; n >= Math.max(1, from - limit + 1); n--)
      ids.push(n > prefix ? positionId(submitter, n - prefix) : prefixId(submitter, n));
    const byId = new Map((await findByIds(this.docs, ids)).map((d) => [d._id, d.task_id]));
    return { total, taskIds: ids.map((id) => byId.get(id)).filter((t): t is string => typeof t === 'string') };
  }

  /** Every task id of the submitter's prefix and list (for the repair: scripts/tasks-recount.ts). */
  async listedTaskIds(submitter: string): Promise<string[]> {
    const prefix = await this.prefixLength(submitter);
    const ids = Array.from({ length: prefix }, (_, i) => prefixId(submitter, i + 1));
    const out: string[] = [];
    for (let i = 0; i < ids.length; i += 256)
      out.push(...(await findByIds(this.docs, ids.slice(i, i + 256))).map((d) => d.task_id!));
    return [...out, ...(await this.allTaskIds(submitter))];
  }

  /** Every task id of the submitter's list, oldest first (for the repair: scripts/tasks-recount.ts). */
  async allTaskIds(submitter: string): Promise<string[]> {
    const n = await this.length(submitter);
    const out: string[] = [];
    for (let to = 1; to <= n; to += 256)
      out.push(...(await this.taskIds(submitter, Math.min(n, to + 255), to)).reverse());
    return out;
  }
}
