/**
 * The ledger's head records and marks: the small collections that say how large the ledger is, its root, and how
 * many entries were appended lately, without reading entries.
 *
 * `ledger_head` holds the records each writer inserts after its batches (`_id` = the size, zero-padded; size, root,
 * frontier, the last entry's time, the tally): inserted, never updated, so the head only ever moves forward even
 * where a conditional update is a read-modify-write (FerretDB), the newest being the head; old records are pruned.
 * `ledger_marks` holds the size at the first head record of each MARK_BUCKET_MS (appendsSince).
 */
import type { Collection, Db } from 'mongodb';
import type { LedgerEntryDocument } from '../../core/ledger/ledger-entry';
import type { LedgerTally } from '../../core/ledger/tally';
import type { PositionCounts } from './positions';
import { isDuplicateKey } from '../mongo';
import { LEDGER_COLLECTION } from './entries';

export const LEDGER_HEAD_COLLECTION = 'ledger_head';

export interface LedgerHead {
  size: number;
  root: string;
}

/** The head and when its last entry was appended (null when the head record predates that field). */
export interface LedgerHeadWithTime extends LedgerHead {
  last_entry_at: string | null;
}

/** The head with the ledger's tally at it (null for a ledger begun before tallies existed: core/ledger/tally.ts). */
export interface LedgerHeadWithTally extends LedgerHeadWithTime {
  tally: LedgerTally | null;
}

/** Appends over a recent window, from the ledger's marks (see appendsSince). */
export interface AppendsSince {
  appends: number;
  /** False when no mark is old enough (a ledger younger than the window, or one written before marks existed). */
  marked: boolean;
}

/**
 * Every PRUNE_HEADS_EVERY head records, a process deletes the records older than the one it just inserted, so
 * `ledger_head` holds a handful. Its newest record is found by reading the collection whole (FerretDB sorts in its own
 * process, about 0.065 ms a record on either backend: 6.1 ms at 96 records, 0.9 ms at 8, 0.6 ms at 2, where a lookup
 * by `_id` costs 0.6 ms), and it is read by every head(), every status read, and every contended append.
 */
const PRUNE_HEADS_EVERY = 4;

/** One per batch: `_id` is the size, zero-padded (a record written by earlier versions has `_id` 'head'). */
export interface LedgerHeadDocument {
  _id: string;
  size: number;
  root: string;
  /** The Merkle frontier after entry `size` (records of earlier versions have none): the tail without reading it. */
  frontier?: string[];
  /** created_at of entry `size` (records of earlier versions have none). */
  last_entry_at?: string;
  /** The tally after entry `size` (absent in records of earlier versions and of ledgers begun before tallies). */
  tally?: LedgerTally;
  /**
   * Each position list's length at `size` (store/ledger/positions.ts): present when the lists were published up to
   * this record before it was inserted.
   */
  positions?: PositionCounts;
  updated_at: string;
}

/**
 * One per MARK_BUCKET_MS in which the ledger was written (`_id` = the bucket number, Date.now() / MARK_BUCKET_MS):
 * the size the first head record of that bucket published. How many entries were appended since a time is then the
 * head's size minus a mark near it (appendsSince): small reads of a small collection on every backend, where counting
 * entries by created_at reads every entry of the window (every entry of the ledger on FerretDB/SQLite). Kept
 * MARKS_KEPT_MS, and the newest older one.
 */
interface LedgerMarkDocument {
  _id: number;
  size: number;
  at: string;
}

export const LEDGER_MARKS_COLLECTION = 'ledger_marks';
export const MARK_BUCKET_MS = 5000;
const MARKS_KEPT_MS = 2 * 3_600_000;
/** Window starts whose marks a process keeps (appendsSince): the metrics' two windows over a few buckets. */
const MARK_SPANS_KEPT = 8;
/** Marks pruned every this many marks a process writes. */
const PRUNE_MARKS_EVERY = 60;

/** A head a writer wrote: an entry's size, root, frontier, time and tally. */
export interface OwnHead {
  size: number;
  root: string;
  frontier: string[];
  last_entry_at: string;
  tally: LedgerTally | null;
}

/** The head records and marks of one ledger, as one process writes and reads them. */
export class HeadRecords {
  private readonly heads: Collection<LedgerHeadDocument>;
  private readonly marks: Collection<LedgerMarkDocument>;
  private readonly entries: Collection<LedgerEntryDocument>;
  private batchesSinceHeadPrune = 0;
  /** The last bucket this process wrote a mark for (or found one in). */
  private markedBucket = 0;
  private marksSincePrune = 0;
  /** created_at of entry 1, once read (appendsSince). */
  private bornAt: string | null = null;
  /** The marks around the buckets windows started in lately (see appendsSince), oldest first. */
  private readonly markSpans = new Map<number, { before: LedgerMarkDocument | null; after: LedgerMarkDocument }>();

  constructor(db: Db) {
    this.heads = db.collection<LedgerHeadDocument>(LEDGER_HEAD_COLLECTION);
    this.marks = db.collection<LedgerMarkDocument>(LEDGER_MARKS_COLLECTION);
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
  }

  /**
   * Inserts the head record of `head` (a duplicate: another writer recorded this size, the same root), with the
   * position lists' lengths at it when they were published up to it. `keepFrom`: the newest size whose record has
   * positions, which pruning keeps (readers start from it).
   */
  async insert(head: OwnHead, positions?: PositionCounts, keepFrom = head.size): Promise<void> {
    const now = new Date();
    const record: LedgerHeadDocument = {
      _id: String(head.size).padStart(16, '0'),
      size: head.size,
      root: head.root,
      frontier: head.frontier,
      last_entry_at: head.last_entry_at,
      ...(head.tally ? { tally: head.tally } : {}),
      ...(positions ? { positions } : {}),
      updated_at: now.toISOString()
    };
    await this.heads.insertOne(record).catch((err) => {
      if (!isDuplicateKey(err)) throw err; // another writer recorded this size: the same root
    });
    await this.mark(head.size, now);
    if (++this.batchesSinceHeadPrune >= PRUNE_HEADS_EVERY) {
      this.batchesSinceHeadPrune = 0;
      // Best effort, and not waited for (a contended writer's callers wait for this record): stale records only cost
      // a larger collection to read. Only records older than this one go, so the newest (this one, or a newer one of
      // another writer) is never deleted and a concurrent read finds it.
      void this.heads.deleteMany({ size: { $lt: Math.min(head.size, keepFrom) } }).catch(() => undefined);
    }
  }

  /** The first head record of a bucket also marks it (see LedgerMarkDocument); best effort, like the pruning. */
  private async mark(size: number, now: Date): Promise<void> {
    const bucket = Math.floor(now.getTime() / MARK_BUCKET_MS);
    if (bucket <= this.markedBucket) return;
    this.markedBucket = bucket;
    // A duplicate: another process marked this bucket first.
    await this.marks.insertOne({ _id: bucket, size, at: now.toISOString() }).catch(() => undefined);
    if (++this.marksSincePrune >= PRUNE_MARKS_EVERY) {
      this.marksSincePrune = 0;
      // The newest mark older than the time kept stays, so a ledger idle for longer still has one before any window.
      const cutoff = bucket - MARKS_KEPT_MS / MARK_BUCKET_MS;
      const kept = await this.marks
        .find({ _id: { $lt: cutoff } })
        .sort({ _id: -1 })
        .limit(1)
        .next()
        .catch(() => null);
      if (kept) await this.marks.deleteMany({ _id: { $lt: kept._id } }).catch(() => undefined);
    }
  }

  /**
   * Entries appended since `since`, to MARK_BUCKET_MS: the head's size minus the mark of the first bucket after the
   * one `since` falls in (no such mark: nothing was appended since). Appends of the first seconds of the window
   * (up to that mark) are not counted; none from before it is. Without a mark at or before `since`, entry 1 says
   * why: a ledger begun after `since` (every entry counts, exactly), else one written before marks existed
   * (`marked` is false and the caller counts otherwise).
   */
  async appendsSince(since: Date, head: LedgerHead | Promise<LedgerHead>): Promise<AppendsSince> {
    const bucket = Math.floor(since.getTime() / MARK_BUCKET_MS);
    const known = this.markSpans.get(bucket);
    const [current, before, after] = await Promise.all([
      head,
      known
        ? known.before
        : this.marks
            .find({ _id: { $lte: bucket } })
            .sort({ _id: -1 })
            .limit(1)
            .next(),
      known?.after ??
        this.marks
          .find({ _id: { $gt: bucket } })
          .sort({ _id: 1 })
          .limit(1)
          .next()
    ]);
    // Marks are written for the bucket of their time, so the two around a past bucket (or the lack of one before
    // it) stay the same once the one after it is older than any clock difference between writers: kept, a
    // window's start is read once per bucket (on FerretDB each of these reads fetches every mark: some 7 ms of the
    // database's CPU at 80 marks, at every metrics read).
    if (!known && after && after._id < Math.floor(Date.now() / MARK_BUCKET_MS) - 2) {
      this.markSpans.set(bucket, { before, after });
      for (const old of this.markSpans.keys()) if (this.markSpans.size > MARK_SPANS_KEPT) this.markSpans.delete(old);
    }
    if (!before) {
      if (current.size === 0) return { appends: 0, marked: true };
      // The first entry's time never changes; read once (an early _id: found at once even where a lookup scans).
      this.bornAt ??= (await this.entries.findOne({ _id: 1 }, { projection: { created_at: 1 } }))?.created_at ?? null;
      return { appends: current.size, marked: this.bornAt !== null && this.bornAt >= since.toISOString() };
    }
    return { appends: after ? Math.max(0, current.size - after.size) : 0, marked: true };
  }

  /** The newest head record: a small collection, so the sort is cheap on every server. */
  newest(): Promise<LedgerHeadDocument | null> {
    return this.heads.find({}).sort({ size: -1 }).limit(1).next();
  }

  /** The newest head record, and the newest one that carries position lists (null: none does), from one read. */
  async newestTwo(): Promise<{ newest: LedgerHeadDocument | null; withPositions: LedgerHeadDocument | null }> {
    const records = await this.heads.find({}).toArray();
    let newest: LedgerHeadDocument | null = null;
    let withPositions: LedgerHeadDocument | null = null;
    for (const r of records) {
      if (!newest || r.size > newest.size) newest = r;
      if (r.positions && (!withPositions || r.size > withPositions.size)) withPositions = r;
    }
    return { newest, withPositions };
  }
}
