/**
 * The append-only ledger: one MongoDB collection, one document per entry, `_id` = seq (1, 2, 3, … with no gaps).
 * This module exposes appending and reading and nothing else: no code path updates or deletes an entry.
 *
 * Every entry carries the Merkle state after it (RFC 6962 hashing, see core/ledger/merkle.node.ts): its leaf hash and
 * the root, plus the perfect subtrees it completes, so a proof needs O(log n) reads. The frontier after it (roots of
 * the perfect subtrees of the tree of `seq` leaves) is what the next append builds on: the head records carry it, and
 * where the tail must be read from the entries it is rebuilt from the subtrees they completed (frontierAt; entries of
 * earlier versions stored it too). An append is then one insert after a read of the tail, usually none.
 *
 * Concurrency without transactions: the insert of seq n is computed from entry n-1, and `_id` is unique, so two
 * writers that race for the same seq cannot both win; the loser re-reads the tail and retries. Inside one process,
 * appends are group-committed (a batch shares one tail read and one head update), so writers queue instead of
 * colliding.
 *
 * Reads that would need a scan are kept off the hot path. On FerretDB's SQLite backend every lookup that does not find
 * its document among the first rows scans the collection (a missing or recent seq costs ~1.4 s at 20,000 entries), so
 * neither appends nor `head()` look entries up in steady state: each process keeps the tail it last wrote, and the
 * small `ledger_head` collection holds the records each writer inserts after its batches (`_id` = the size,
 * zero-padded; size and root; at most one insert every HEAD_RECORD_INTERVAL_MS per process, after the callers
 * were answered: see publish), the newest being the head. Records are inserted, never updated, so the head only ever moves forward even where a
 * conditional update is a read-modify-write (FerretDB), and old records are pruned. The tail is re-read from the
 * entries themselves only after losing a race to another process. A writer that stopped between its inserts and its
 * head record leaves entries the head does not cover yet (never acknowledged to their callers): the next batch, by
 * any process, finds them when its insert is refused and publishes them.
 *
 * Idempotency: the unique index on `idem` guarantees one entry per key. Looking a key up by that field would scan
 * the whole ledger on FerretDB, once per keyed append, so each keyed entry also gets a record in
 * `ledger_idempotency` (`_id` = the key, `seq`), written right after the entry and read by _id. A missing record
 * (a writer stopped between the two inserts) only costs speed: the entry's insert is refused by the unique index
 * and the key is then looked up in the ledger itself.
 */
import { randomHex } from '../../core/random-hex.node';
import { Collection, Db, MongoBulkWriteError } from 'mongodb';
import { canonicalJson, JsonValue } from '../../core/ledger/canonical-json';
import {
  appendToFrontier,
  fromHex,
  frontierEnds,
  Hash,
  leafHash,
  rootFromFrontier,
  toHex,
  EMPTY_ROOT
} from '../../core/ledger/merkle.node';
import { LedgerEntryDocument, LedgerEntryKind, ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import { lastOfRun } from '../../core/ledger/contiguous-run';
import { FreshReads } from '../../core/fresh-reads';
import { addToTally, LedgerTally, tallyCategory } from '../../core/ledger/tally';
import { findByIds, IdLookups, isDuplicateKey } from '../mongo';
import type { ForwardAppend, ForwardCountedAppend, QuotaClaim } from './ledger-forwarding';

export const LEDGER_COLLECTION = 'ledger';
export const LEDGER_HEAD_COLLECTION = 'ledger_head';
export const LEDGER_IDEMPOTENCY_COLLECTION = 'ledger_idempotency';
const MAX_BATCH = 256;
/**
 * Entries per ordered insertMany: at most FerretDB's insertion batch size (100, its `--test-batch-size` default).
 * FerretDB v1.24 splits a larger insert into batches of that size and, when a document of one batch is refused, stops
 * only that batch and still inserts the next one: an ordered insertMany of 256 entries refused at entry 10 still
 * inserted entries 101-200, built on a tail that was not the real one (a ledger verify rejected after a two-process
 * burst; pinned by test/store/ledger/ledger-insert-chunks.test.ts). Within one batch
 * it stops at the first refusal, as MongoDB does for the whole call.
 */
export const INSERT_CHUNK = 100;
const MAX_RETRIES = 1000;
/** Least time between the starts of two head-record inserts by one process (see publishHead). */
const HEAD_RECORD_INTERVAL_MS = 20;
/**
 * How long a process writes as a contended writer after its insert was last refused on a seq another writer took
 * (while contended, a head record newer than its own tail found at a batch's start extends it): see commit and
 * publish. Writers taking turns see each other at every batch and stay contended; a writer alone again (another
 * process wrote once, e.g. the worker's hub event) goes back to the cheaper uncontended appends after this long.
 * Measured at concurrency 1 on PostgreSQL (p50): an append alone 0.9-1.1 ms uncontended, 3.0-3.2 ms contended; two
 * writers taking turns 3.3 ms contended, 10.9 ms not.
 */
const CONTENDED_MS = 1000;
/** After a seq was refused: the pauses between reads of the head records while waiting for one covering it. */
const REFUSED_SEQ_WAITS_MS = [2, 4, 8, 16, 30];

export interface AppendInput {
  kind: LedgerEntryKind;
  key: string;
  value: { [key: string]: JsonValue };
  truth_type?: string | null;
  did?: string | null;
  /** A retried write with the same (did, idempotency key) returns the first entry instead of a second one. */
  idempotencyKey?: string | null;
}

export interface AppendResult {
  entry: LedgerEntryDocument;
  /** True when the idempotency key matched an earlier entry and nothing new was written. */
  duplicate: boolean;
}

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

interface Pending {
  input: AppendInput;
  eventId: string;
  createdAt: Date;
  idem: string;
  valueJson: string;
  resolve: (r: AppendResult) => void;
  reject: (e: unknown) => void;
}

/** The `idem` of an entry written with a caller's Idempotency-Key: scoped to the writer's DID. */
function callerIdempotencyScope(did: string | null, idempotencyKey: string): string {
  return `k:${did ?? ''}:${idempotencyKey}`;
}

/** How an append is made (see Ledger.append). */
export interface AppendOptions {
  signal?: AbortSignal;
  deadline?: number;
  direct?: boolean;
}

/** A forwarded append the writer did not take (not reached, or refused before it did anything): nothing was written there. */
export class ForwardNotDelivered extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ForwardNotDelivered';
  }
}

/** An append withdrawn (its signal aborted) before its batch began: nothing was written. */
export class AppendWithdrawn extends Error {
  constructor() {
    super('append withdrawn before it started');
    this.name = 'AppendWithdrawn';
  }
}

export function newEventId(): string {
  // Time-ordered and unique: 9 base36 chars of milliseconds, 12 hex chars of randomness.
  return `truth-${Date.now().toString(36).padStart(9, '0')}${randomHex(6)}`;
}

/**
 * Every PRUNE_HEADS_EVERY head records, a process deletes the records older than the one it just inserted, so
 * `ledger_head` holds a handful. Its newest record is found by reading the collection whole (FerretDB sorts in its own
 * process, about 0.065 ms a record on either backend: 6.1 ms at 96 records, 0.9 ms at 8, 0.6 ms at 2, where a lookup
 * by `_id` costs 0.6 ms), and it is read by every head(), every status read, and every contended append.
 */
const PRUNE_HEADS_EVERY = 4;

/** One per batch: `_id` is the size, zero-padded (a record written by earlier versions has `_id` 'head'). */
interface LedgerHeadDocument {
  _id: string;
  size: number;
  root: string;
  /** The Merkle frontier after entry `size` (records of earlier versions have none): the tail without reading it. */
  frontier?: string[];
  /** created_at of entry `size` (records of earlier versions have none). */
  last_entry_at?: string;
  /** The tally after entry `size` (absent in records of earlier versions and of ledgers begun before tallies). */
  tally?: LedgerTally;
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

interface IdempotencyRecord {
  _id: string; // the entry's idem
  seq: number;
}

interface Tail {
  size: number;
  frontier: Hash[];
  /** Null when the entry at `size` has none (a ledger begun before tallies): the entries built on it get none. */
  tally: LedgerTally | null;
}

/** An entry as an append builds it: with the frontier it leaves, which is not stored (LedgerEntryDocument.frontier). */
type BuiltEntry = LedgerEntryDocument & { frontier: string[] };
/** What is inserted for a built entry. */
const stored = ({ frontier: _leaves, ...doc }: BuiltEntry): LedgerEntryDocument => doc;

const tailOf = (doc: BuiltEntry): Tail => ({
  size: doc._id,
  frontier: doc.frontier.map(fromHex),
  tally: doc.tally ?? null
});
const EMPTY_TAIL: Tail = { size: 0, frontier: [], tally: {} };

/** A head this process wrote: an entry's size, root, frontier, time and tally. */
interface OwnHead {
  size: number;
  root: string;
  frontier: string[];
  last_entry_at: string;
  tally: LedgerTally | null;
}
const ownHeadOf = (last: BuiltEntry): OwnHead => ({
  size: last._id,
  root: last.root,
  frontier: last.frontier,
  last_entry_at: last.created_at,
  tally: last.tally ?? null
});

export class Ledger {
  private readonly entries: Collection<LedgerEntryDocument>;
  private readonly heads: Collection<LedgerHeadDocument>;
  private readonly idempotency: Collection<IdempotencyRecord>;
  /** How the database answers `_id` lookups (store/mongo.ts IdLookups). */
  private readonly idLookups: IdLookups;
  private readonly marks: Collection<LedgerMarkDocument>;
  /** created_at of entry 1, once read (appendsSince). */
  private bornAt: string | null = null;
  /** The marks around the buckets windows started in lately (see appendsSince), oldest first. */
  private readonly markSpans = new Map<number, { before: LedgerMarkDocument | null; after: LedgerMarkDocument }>();
  /** The last bucket this process wrote a mark for (or found one in). */
  private markedBucket = 0;
  private marksSincePrune = 0;
  private queue: Pending[] = [];
  private committing = false;
  /** The tail this process last wrote or read; null when it must be re-read. */
  private knownTail: Tail | null = null;
  private batchesSinceHeadPrune = 0;
  /** The newest tail this process wrote and answered for (its head record may still be on its way). */
  private acknowledgedHead: OwnHead | null = null;
  /** The largest size whose head record this process inserted. */
  private publishedSize = 0;
  private headInFlight: Promise<void> | null = null;
  /** The size the head-record insert under way records. */
  private headInFlightSize = 0;
  private headTimer: NodeJS.Timeout | null = null;
  private lastHeadStartedAt = 0;
  /** Until when this process writes as a contended writer (see CONTENDED_MS). */
  private contendedUntil = 0;
  /** Reads of the newest head record, shared by the head() calls that arrive together. */
  private readonly headReads = new FreshReads<LedgerHeadWithTally | null>(async () => {
    const record = await this.newestHeadRecord();
    return record
      ? {
          size: record.size,
          root: record.root,
          last_entry_at: record.last_entry_at ?? null,
          tally: record.tally ?? null
        }
      : null;
  });

  /** Where appends go when this process is not the writer (store/ledger/ledger-forwarding.ts); else appended here. */
  private readonly forward: ForwardAppend | null;
  /** Where a truth write's slot and append go together when another host holds the writer lease (appendCounted). */
  private readonly forwardCounted: ForwardCountedAppend | null;
  /** The newest entry an append forwarded from here came back with (head() answers at least that). */
  private forwardedHead: LedgerHeadWithTally | null = null;

  constructor(
    db: Db,
    options: {
      forward?: ForwardAppend | null;
      forwardCounted?: ForwardCountedAppend | null;
      idLookups?: IdLookups;
    } = {}
  ) {
    this.idLookups = options.idLookups ?? 'indexed';
    this.forward = options.forward ?? null;
    this.forwardCounted = options.forwardCounted ?? null;
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
    this.heads = db.collection<LedgerHeadDocument>(LEDGER_HEAD_COLLECTION);
    this.idempotency = db.collection<IdempotencyRecord>(LEDGER_IDEMPOTENCY_COLLECTION);
    this.marks = db.collection<LedgerMarkDocument>(LEDGER_MARKS_COLLECTION);
  }

  /**
   * Appends one entry; resolves once it is durably inserted (or matched by its idempotency key).
   *
   * `signal` withdraws a write that has not started: aborted while it still waits in this process's queue, it is
   * removed and rejects with `AppendWithdrawn`, and nothing is written. Once its batch has begun it is no longer
   * withdrawn and settles as usual. `deadline` (ms since the epoch) is when the caller's signal fires, for a writer
   * elsewhere to withdraw it by then itself; `direct` appends in this host even where another host holds the writer
   * lease (an append forwarded from there).
   */
  append(input: AppendInput, options: AppendOptions = {}): Promise<AppendResult> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(new AppendWithdrawn());
    const forwarded = this.forward?.(input, signal, {
      direct: options.direct ?? false,
      deadline: options.deadline ?? null
    });
    if (forwarded) {
      return forwarded.then(
        (result) => this.forwardedAnswer(result),
        // Nothing reached the writer (store/ledger/writer-forwarding.ts): appended here instead.
        (err: unknown) => (err instanceof ForwardNotDelivered ? this.appendHere(input, signal) : Promise.reject(err))
      );
    }
    return this.appendHere(input, signal);
  }

  /**
   * A truth write's append with its daily-quota slot, both made by the writer lease holder when another host holds
   * it (one request instead of a slot claim and an append; store/ledger/writer-forwarding.ts): the result, or
   * `'over_quota'` (nothing written). `null` when no other host holds the lease or nothing reached it: the caller
   * claims its slot and appends here as usual. AppendWithdrawn as for append (no slot spent).
   */
  async appendCounted(
    input: AppendInput,
    quota: QuotaClaim,
    options: { signal?: AbortSignal; deadline?: number } = {}
  ): Promise<AppendResult | 'over_quota' | null> {
    if (options.signal?.aborted) throw new AppendWithdrawn();
    const forwarded = this.forwardCounted?.(input, quota, options.signal, options.deadline ?? null);
    if (!forwarded) return null;
    try {
      const result = await forwarded;
      return result === 'over_quota' ? result : this.forwardedAnswer(result);
    } catch (err) {
      if (err instanceof ForwardNotDelivered) return null;
      throw err;
    }
  }

  /** An append forwarded from here was made: head() answers at least its entry. */
  private forwardedAnswer(result: AppendResult): AppendResult {
    const { entry } = result;
    if (!this.forwardedHead || this.forwardedHead.size < entry._id)
      this.forwardedHead = {
        size: entry._id,
        root: entry.root,
        last_entry_at: entry.created_at,
        tally: entry.tally ?? null
      };
    return result;
  }

  private appendHere(input: AppendInput, signal: AbortSignal | undefined): Promise<AppendResult> {
    if (signal?.aborted) return Promise.reject(new AppendWithdrawn());
    return new Promise<AppendResult>((resolve, reject) => {
      const eventId = newEventId();
      const withdraw = () => {
        const at = this.queue.indexOf(pending);
        if (at < 0) return; // its batch has begun
        this.queue.splice(at, 1);
        reject(new AppendWithdrawn());
      };
      const settled = () => signal?.removeEventListener('abort', withdraw);
      const pending: Pending = {
        input,
        eventId,
        createdAt: new Date(),
        idem: input.idempotencyKey ? callerIdempotencyScope(input.did ?? null, input.idempotencyKey) : `e:${eventId}`,
        valueJson: canonicalJson(input.value),
        resolve: (r) => {
          settled();
          resolve(r);
        },
        reject: (e) => {
          settled();
          reject(e);
        }
      };
      signal?.addEventListener('abort', withdraw, { once: true });
      this.queue.push(pending);
      void this.drain();
    });
  }

  /**
   * The seeding fast path (benchmarks, imports): appends `inputs` in order, one insertMany per `chunk` entries
   * instead of one insert each, without idempotency keys. Only for a ledger nothing else appends to meanwhile: a
   * concurrent writer makes an insert fail on a taken seq, and the call throws having written a valid prefix.
   * Returns the ledger's size after the last chunk.
   *
   * The tail is read once per call, so a large fill is one call over an iterable (a generator), not a call per
   * part: on FerretDB/SQLite reading the tail looks up the seq after the newest head record, a lookup that does
   * not find its document and so scans the whole ledger (100,000 entries: about 25 s of FerretDB CPU).
   */
  async appendBulk(inputs: Iterable<Omit<AppendInput, 'idempotencyKey'>>, chunk = 1000): Promise<number> {
    // Read, not remembered: others may have appended since this process last wrote.
    let tail = await this.readTail();
    let part: Omit<AppendInput, 'idempotencyKey'>[] = [];
    const flush = async () => {
      const createdAt = new Date();
      const pending = part.map((input): Pending => {
        const eventId = newEventId();
        return {
          input,
          eventId,
          createdAt,
          idem: `e:${eventId}`,
          valueJson: canonicalJson(input.value),
          resolve: () => undefined,
          reject: () => undefined
        };
      });
      part = [];
      const docs = this.buildDocs(pending, tail);
      try {
        // Ordered and at most INSERT_CHUNK at a time, so a concurrent writer can only make it stop, never leave
        // entries built on a stale tail behind the refused one.
        for (let at = 0; at < docs.length; at += INSERT_CHUNK)
          await this.entries.insertMany(docs.slice(at, at + INSERT_CHUNK).map(stored), { ordered: true });
      } catch (err) {
        this.knownTail = null;
        throw err;
      }
      await this.advanceHead(docs[docs.length - 1]!);
      tail = this.knownTail!;
      // (appendBulk writes no idempotency records: its inputs carry no keys)
    };
    for (const input of inputs) {
      part.push(input);
      if (part.length >= chunk) await flush();
    }
    if (part.length > 0) await flush();
    return tail.size;
  }

  private async drain(): Promise<void> {
    if (this.committing) return;
    this.committing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        await this.commit(batch).catch((err) => batch.forEach((p) => p.reject(err)));
      }
    } finally {
      this.committing = false;
    }
  }

  /**
   * Appends a batch in order: ordered insertMany calls of at most INSERT_CHUNK entries each, stopping at the first
   * refusal. A unique-index refusal says exactly which entry lost (the first write error's index; everything before
   * it landed, nothing after it did), and the rest is rebuilt on the real tail.
   */
  private async commit(batch: Pending[]): Promise<void> {
    // Keys are not looked up before the insert: the unique index on idem refuses a key that is in the ledger already
    // (a retry), and only then is it looked up. On FerretDB/SQLite a lookup scans its collection (idempotency records:
    // 150-220 ms at 50,000 records), so a look before every keyed insert (every hub event, every node write with an
    // Idempotency-Key) made those writes slower the longer the ledger.
    let pending = this.joinRepeatedKeys(batch);
    // Where the next attempt starts: the tail this process wrote last, else the newest head record (see headRecordTail).
    // A contended writer reads the newest record first: another process's writes since this one's last batch are
    // there already (it published before answering, see publish), and one small read is cheaper than an insert
    // refused on a taken seq followed by that same read.
    let tail: Tail | null = this.knownTail ?? (await this.headRecordTail(0));
    if (this.knownTail && this.contended()) {
      const newer = await this.headRecordTail(this.knownTail.size + 1);
      if (newer) {
        tail = newer;
        this.contendedUntil = Date.now() + CONTENDED_MS;
      }
    }
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= MAX_RETRIES) throw new Error('ledger append kept losing the race for the next seq');
      tail ??= await this.readTail();
      const attemptTail = tail;
      const docs = this.buildDocs(pending, tail);
      let inserted = 0;
      try {
        while (inserted < docs.length) {
          const chunk = docs.slice(inserted, inserted + INSERT_CHUNK);
          try {
            await this.entries.insertMany(chunk.map(stored), { ordered: true });
          } catch (err) {
            inserted += landedBeforeRefusal(err);
            throw err;
          }
          inserted += chunk.length;
        }
        await this.publish(docs);
        pending.forEach((p, i) => p.resolve({ entry: docs[i]!, duplicate: false }));
        return;
      } catch (err) {
        if (inserted > 0) await this.publish(docs.slice(0, inserted));
        this.knownTail = null;
        pending.slice(0, inserted).forEach((p, i) => p.resolve({ entry: docs[i]!, duplicate: false }));
        if (!isDuplicateKey(err)) throw err;
        // Refused: another writer took this seq, or (only for a write with a caller's key) the key is in the ledger
        // already. Servers differ in saying which unique index refused (FerretDB does not say). A write with a
        // caller's key looks its key up (its record; failing that, the ledger further down). Otherwise the other
        // writer publishes its head record right after its entries: start again from a record covering the refused
        // seq (no entry read; on FerretDB/SQLite reading a recent entry scans the ledger). No record covering it
        // within 60 ms: a writer that stopped before its record. An entry without a caller's key has a fresh random
        // idem, so its refusal can only be the seq.
        const rest = pending.slice(inserted);
        const refusedSeq = docs[inserted]!._id;
        const keyed = rest[0]!.idem.startsWith('k:');
        // Where the next attempt starts when the refused write turns out to be a retry: if its key caused the
        // refusal the seq is still free, so where this attempt's inserts ended (a wrong guess only costs another
        // refusal).
        const resumeAt = inserted > 0 ? tailOf(docs[inserted - 1]!) : attemptTail;
        if (keyed) {
          // The key may be in the ledger (a retry): its idempotency record says so. Asked first, even while another
          // writer is busy (whose records would otherwise make a retry look like a lost race, again and again).
          pending = await this.settleRefusedKey(rest, 'record');
          if (pending.length < rest.length) {
            tail = resumeAt;
            continue;
          }
        }
        this.contendedUntil = Date.now() + CONTENDED_MS;
        tail = await this.headRecordTail(refusedSeq);
        for (const wait of REFUSED_SEQ_WAITS_MS) {
          if (tail) break;
          await new Promise((resolve) => setTimeout(resolve, wait));
          tail = await this.headRecordTail(refusedSeq);
        }
        pending = rest;
        // Still unexplained: the key's record may be missing (its writer stopped between the entry and the record),
        // so the ledger itself is searched.
        if (!tail && keyed) {
          pending = await this.settleRefusedKey(rest, 'ledger');
          if (pending.length < rest.length) tail = resumeAt;
        }
      }
    }
  }

  /**
   * Writes of one batch that repeat a caller's key: the first is appended, the others answer with its entry
   * (`duplicate: true`) or its failure. Returns the writes to append.
   */
  private joinRepeatedKeys(batch: Pending[]): Pending[] {
    const first = new Map<string, Pending>();
    const rest: Pending[] = [];
    for (const p of batch) {
      const leader = p.idem.startsWith('k:') ? first.get(p.idem) : undefined;
      if (!leader) {
        if (p.idem.startsWith('k:')) first.set(p.idem, p);
        rest.push(p);
        continue;
      }
      const leaderResolve = leader.resolve;
      const leaderReject = leader.reject;
      leader.resolve = (r) => {
        leaderResolve(r);
        p.resolve({ entry: r.entry, duplicate: true });
      };
      leader.reject = (e) => {
        leaderReject(e);
        p.reject(e);
      };
    }
    return rest;
  }

  /**
   * After the insert of `rest[0]` (a write with a caller's key) was refused: finds the entry its key wrote, through
   * its idempotency record or in the ledger itself. Found: that write is answered with it (`duplicate: true`), so
   * are the others of `rest` whose keys have records, and the remaining ones are returned; not found: `rest`
   * unchanged.
   */
  private async settleRefusedKey(rest: Pending[], where: 'record' | 'ledger'): Promise<Pending[]> {
    const refused = rest[0]!;
    const entry =
      where === 'record'
        ? (await this.findByIdems([refused.idem]))[0]
        : await this.entries.findOne({ idem: refused.idem });
    if (!entry) return rest;
    // Found in the ledger itself: its record was missing; written now, so the next retry of the key finds it fast.
    if (where === 'ledger')
      await this.idempotency.insertOne({ _id: entry.idem, seq: entry._id }).catch(() => undefined);
    refused.resolve({ entry, duplicate: true });
    // A retry seldom comes alone (a client resending a batch, an activity appending again what its last attempt
    // may have written): the other keys of the batch are looked up now, together, instead of one refusal each.
    const others = rest.slice(1);
    const keyed = others.filter((p) => p.idem.startsWith('k:'));
    if (keyed.length === 0) return others;
    const found = new Map((await this.findByIdems(keyed.map((p) => p.idem))).map((e) => [e.idem, e]));
    return others.filter((p) => {
      const existing = found.get(p.idem);
      if (existing) p.resolve({ entry: existing, duplicate: true });
      return !existing;
    });
  }

  private buildDocs(pending: Pending[], tail: Tail): BuiltEntry[] {
    let size = tail.size;
    let frontier = tail.frontier;
    let tally = tail.tally;
    return pending.map((p) => {
      const seq = size + 1;
      const fields = {
        seq,
        event_id: p.eventId,
        kind: p.input.kind,
        key: p.input.key,
        truth_type: p.input.truth_type ?? null,
        did: p.input.did ?? null,
        created_at: p.createdAt.toISOString()
      };
      const leaf = leafHash(ledgerLeafBytes(fields, p.valueJson));
      const next = appendToFrontier(frontier, size, leaf);
      size = seq;
      frontier = next.frontier;
      if (tally) tally = addToTally(tally, tallyCategory(fields.kind, fields.truth_type));
      return {
        _id: seq,
        ...fields,
        value_json: p.valueJson,
        idem: p.idem,
        leaf_hash: toHex(leaf),
        completed: next.completed.map(toHex),
        frontier: frontier.map(toHex),
        root: toHex(rootFromFrontier(frontier)),
        ...(tally ? { tally } : {})
      };
    });
  }

  /** The real tail: the newest entry, found from the head record forward (the head may lag a crashed writer). */
  private async readTail(): Promise<Tail> {
    const head = await this.newestHeadRecord();
    const from = head?.size ?? 0;
    const seq = await this.lastSeqFrom(from);
    // The head is the tail (the usual case): its record has the frontier, no entry needs reading.
    if (head?.frontier && seq === from)
      return { size: from, frontier: head.frontier.map(fromHex), tally: head.tally ?? null };
    const projection = { _id: 1, frontier: 1, tally: 1 };
    const newest = seq > 0 ? await this.entries.findOne({ _id: seq }, { projection }) : null;
    // No entry at the head's size: entries were removed behind the ledger's back; take what is really there.
    const last =
      newest ?? (from > 0 ? await this.entries.find({}, { projection }).sort({ _id: -1 }).limit(1).next() : null);
    if (!last) return EMPTY_TAIL;
    // An entry of an earlier version carries its frontier; a newer one is rebuilt from the entries that completed it.
    const frontier = last.frontier ? last.frontier.map(fromHex) : await this.frontierAt(last._id);
    return { size: last._id, frontier, tally: last.tally ?? null };
  }

  /** The frontier of the tree of `size` leaves, from the `completed` hashes of the entries that recorded it. */
  private async frontierAt(size: number): Promise<Hash[]> {
    const ends = frontierEnds(size);
    const bySeq = new Map(
      (
        await findByIds(
          this.entries,
          ends.map((e) => e.seq),
          this.idLookups
        )
      ).map((d) => [d._id, d])
    );
    return ends.map(({ seq, level }) => {
      const hex = bySeq.get(seq)?.completed[level];
      if (!hex) throw new Error(`ledger entry ${seq} is missing or has no subtree at level ${level}`);
      return fromHex(hex);
    });
  }

  /**
   * The tail as the newest head record states it, when that record has its frontier and covers `atLeast` (null
   * otherwise). Not proof that nothing follows (a writer may have stopped before its head record): an insert on it
   * that is refused moves on to a newer record or to readTail.
   */
  private async headRecordTail(atLeast: number): Promise<Tail | null> {
    const head = await this.newestHeadRecord();
    return head?.frontier && head.size >= atLeast
      ? { size: head.size, frontier: head.frontier.map(fromHex), tally: head.tally ?? null }
      : null;
  }

  /** The newest seq from `from` (0 or a seq that exists) on, by `_id` lookups (usually one: from + 1 is missing). */
  private lastSeqFrom(from: number): Promise<number> {
    return lastOfRun(
      from,
      async (seq) => (await this.entries.findOne({ _id: seq }, { projection: { _id: 1 } })) !== null
    );
  }

  /**
   * After entries landed: the tail is this process's at once, the idempotency records are written before the
   * callers are answered (a retry of an acknowledged write must find its entry by _id), and the head record goes
   * out without holding anyone (publishHead).
   *
   * Why answering before the head record is safe. Crash: the entries are durable; a head record missing for them
   * is the state a writer stopped before its head record always left (the published head is a valid older prefix,
   * verify says consistent, and the next batch of any process finds the entries by its refused insert and
   * publishes them), only now the entries may have been acknowledged. Races: another process starts from the head
   * record and its insert of a taken seq is refused; it waits for a record covering that seq (publishHead starts
   * it within HEAD_RECORD_INTERVAL_MS, so it is there within that plus one insert) before it reads the tail. Readers: this process answers head()
   * from its own tail when that is newer than the newest record, so a client reading status from the process that
   * acknowledged its write sees it; another process's status may lag by the one insert in flight.
   *
   * A contended writer (see CONTENDED_MS) inserts its head record before
   * its callers are answered, without the interval: the other writer's next batch then starts from it (see commit)
   * instead of having its insert refused and waiting for the record. Measured with two API processes taking turns
   * on one ledger (bench:ledger, BENCH_API_PROCESSES=1,2): the wait for a record published up to
   * HEAD_RECORD_INTERVAL_MS late was paid at nearly every write (README, Benchmarks).
   */
  private async publish(docs: BuiltEntry[]): Promise<void> {
    const last = docs[docs.length - 1]!;
    this.knownTail = tailOf(last);
    if (!this.acknowledgedHead || this.acknowledgedHead.size < last._id) this.acknowledgedHead = ownHeadOf(last);
    this.publishHead();
    await this.recordIdempotencyKeys(docs);
    if (this.contended()) await this.headAttempted(last._id);
  }

  /**
   * Resolves once an attempt to insert a head record covering `size` has settled (or one was inserted already),
   * starting it now if it waits for the interval. One attempt: a failed one is left to the next batch, as always.
   */
  private async headAttempted(size: number): Promise<void> {
    for (;;) {
      if (this.publishedSize >= size) return;
      this.publishHeadNow();
      const flight = this.headInFlight;
      if (!flight) return;
      const covers = this.headInFlightSize >= size;
      await flight;
      if (covers) return;
    }
  }

  private contended(): boolean {
    return Date.now() < this.contendedUntil;
  }

  /**
   * Inserts the head record of the newest tail this process wrote: one insert at a time, and at most one started
   * every HEAD_RECORD_INTERVAL_MS, so tails acknowledged meanwhile are covered by the next record (a steady writer
   * at concurrency 1 would otherwise double its inserts: on FerretDB/SQLite, one writer at a time, the next entry
   * waited for the previous head record). The bound matters to other processes only: one that lost a race for a
   * seq waits up to 60 ms for a record covering it (see commit), longer than this interval plus one insert; a
   * contended writer publishes at once (see publish).
   * Failures are left to the next batch, whose record covers these entries too (until then the published head is
   * an older, valid prefix).
   */
  private publishHead(): void {
    if (this.headInFlight || this.headTimer) return;
    const head = this.acknowledgedHead;
    if (!head || head.size <= this.publishedSize) return;
    const wait = this.lastHeadStartedAt + HEAD_RECORD_INTERVAL_MS - Date.now();
    if (wait > 0) {
      this.headTimer = setTimeout(() => {
        this.headTimer = null;
        this.publishHead();
      }, wait);
      return;
    }
    this.lastHeadStartedAt = Date.now();
    this.headInFlightSize = head.size;
    this.headInFlight = this.insertHeadRecord(head)
      .then(() => {
        this.publishedSize = Math.max(this.publishedSize, head.size);
      })
      .catch(() => undefined)
      .finally(() => {
        this.headInFlight = null;
        this.publishHead();
      });
  }

  /** Starts the head record that waits for the interval (if one does) at once. */
  private publishHeadNow(): void {
    if (!this.headTimer) return;
    clearTimeout(this.headTimer);
    this.headTimer = null;
    this.lastHeadStartedAt = 0;
    this.publishHead();
  }

  /** Resolves once the head records of every tail this process has written so far are inserted (or failed). */
  async headPublished(): Promise<void> {
    for (;;) {
      this.publishHeadNow();
      if (!this.headInFlight) return;
      await this.headInFlight;
    }
  }

  /** Records where the entries written with a caller's key are, for the lookup by _id (see the module comment). */
  private async recordIdempotencyKeys(docs: LedgerEntryDocument[]): Promise<void> {
    const records = docs.filter((d) => d.idem.startsWith('k:')).map((d) => ({ _id: d.idem, seq: d._id }));
    if (records.length === 0) return;
    // Best effort: the entries are stored; a record that is missing or already there changes nothing.
    await this.idempotency.insertMany(records, { ordered: false }).catch(() => undefined);
  }

  /**
   * The entries written with these idems, found through their idempotency records by `_id` (store/mongo.ts
   * findByIds: where every lookup scans, one read of the records and one of their entries however many idems, as a
   * lookup per idem scanned its collection once each; where `_id` is indexed, a lookup each, as an `_id: { $in }`
   * read the whole ledger on FerretDB).
   */
  private async findByIdems(idems: string[]): Promise<LedgerEntryDocument[]> {
    const records = await findByIds(this.idempotency, idems, this.idLookups);
    if (records.length === 0) return [];
    const entries = await findByIds(
      this.entries,
      records.map((r) => r.seq),
      this.idLookups
    );
    const wanted = new Set(idems);
    return entries.filter((e) => wanted.has(e.idem));
  }

  /** Records the new tail locally and inserts the shared head record for it (the newest record is the head). */
  private async advanceHead(last: BuiltEntry): Promise<void> {
    this.knownTail = tailOf(last);
    await this.insertHeadRecord(ownHeadOf(last));
  }

  private async insertHeadRecord(head: OwnHead): Promise<void> {
    const now = new Date();
    const record: LedgerHeadDocument = {
      _id: String(head.size).padStart(16, '0'),
      size: head.size,
      root: head.root,
      frontier: head.frontier,
      last_entry_at: head.last_entry_at,
      ...(head.tally ? { tally: head.tally } : {}),
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
      void this.heads.deleteMany({ size: { $lt: head.size } }).catch(() => undefined);
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
  async appendsSince(since: Date, head?: LedgerHead): Promise<AppendsSince> {
    const bucket = Math.floor(since.getTime() / MARK_BUCKET_MS);
    const known = this.markSpans.get(bucket);
    const [current, before, after] = await Promise.all([
      head ?? this.head(),
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
  private newestHeadRecord(): Promise<LedgerHeadDocument | null> {
    return this.heads.find({}).sort({ size: -1 }).limit(1).next();
  }

  // ---- reads ----

  /**
   * Size and root of the ledger: the newest head record (see advanceHead). One small read, whatever the ledger's
   * size; entries of a writer that stopped before recording its head are published by the next batch.
   */
  async head(): Promise<LedgerHead> {
    const { size, root } = await this.headWithTime();
    return { size, root };
  }

  /** The head and when its last entry was appended, from the same read (no entry is read). */
  async headWithTime(): Promise<LedgerHeadWithTime> {
    const { size, root, last_entry_at } = await this.headWithTally();
    return { size, root, last_entry_at };
  }

  /** The head with the ledger's tally at it (core/ledger/tally.ts), from the same read (no entry is read). */
  async headWithTally(): Promise<LedgerHeadWithTally> {
    // Taken before the read: a record inserted while the read runs may be missing from what it returns.
    const publishedBefore = this.publishedSize;
    // A read that started after this call, shared with the calls that arrive with it (core/fresh-reads.ts).
    const head = await this.headReads.get('head');
    // This process's own acknowledged tail while its record was on its way when this call began (see publish);
    // records inserted before that are the head again (the read sees them).
    const own = this.acknowledgedHead;
    if (own && own.size > publishedBefore && own.size > (head?.size ?? 0))
      return { size: own.size, root: own.root, last_entry_at: own.last_entry_at, tally: own.tally };
    // An entry the writer appended for this process, whose head record may still be on its way.
    if (this.forwardedHead && this.forwardedHead.size > (head?.size ?? 0)) return this.forwardedHead;
    return head ?? { size: 0, root: toHex(EMPTY_ROOT), last_entry_at: null, tally: {} };
  }

  get(seq: number): Promise<LedgerEntryDocument | null> {
    return this.entries.findOne({ _id: seq });
  }

  /** The entry written with this (did, idempotency key), if its idempotency record says where it is. */
  async findByIdempotencyKey(did: string | null, idempotencyKey: string): Promise<LedgerEntryDocument | null> {
    return (await this.findByIdems([callerIdempotencyScope(did, idempotencyKey)]))[0] ?? null;
  }

  /** Entries whose key starts with `prefix`, oldest first. */
  findByKeyPrefix(prefix: string, limit: number): Promise<LedgerEntryDocument[]> {
    const filter = prefix ? { key: { $regex: `^${escapeRegex(prefix)}` } } : {};
    return this.entries.find(filter).sort({ _id: 1 }).limit(limit).toArray();
  }

  /** The newest entries first, optionally filtered by truth type. */
  latest(
    limit: number,
    filter: { truthTypes?: string[]; kind?: LedgerEntryKind } = {}
  ): Promise<LedgerEntryDocument[]> {
    const q: Record<string, unknown> = {};
    if (filter.truthTypes) q.truth_type = { $in: filter.truthTypes };
    if (filter.kind) q.kind = filter.kind;
    return this.entries.find(q).sort({ _id: -1 }).limit(limit).toArray();
  }

  /** Entries with seq > after, oldest first. */
  after(after: number, limit: number, filter: { keyPrefix?: string } = {}): Promise<LedgerEntryDocument[]> {
    const q: Record<string, unknown> = { _id: { $gt: after } };
    if (filter.keyPrefix) q.key = { $regex: `^${escapeRegex(filter.keyPrefix)}` };
    return this.entries.find(q).sort({ _id: 1 }).limit(limit).toArray();
  }

  /** Every entry in seq order, streamed in batches (flat memory). */
  scan(batchSize = 1000): AsyncIterable<LedgerEntryDocument> {
    return this.entries.find({}).sort({ _id: 1 }).batchSize(batchSize);
  }

  /** The perfect subtree of 2^level leaves at `index`, as recorded by the entry that completed it. */
  async perfectSubtree(level: number, index: number): Promise<Hash> {
    const seq = (index + 1) * 2 ** level;
    const doc = await this.entries.findOne({ _id: seq }, { projection: { completed: 1 } });
    const hex = doc?.completed[level];
    if (!hex) throw new Error(`ledger has no subtree at level ${level}, index ${index}`);
    return fromHex(hex);
  }
}

/** How many entries of a refused ordered insertMany landed: the index of its first write error (0 when unknown). */
function landedBeforeRefusal(err: unknown): number {
  if (!(err instanceof MongoBulkWriteError)) return 0;
  const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  const indexes = errors.map((e) => e.index).filter((i) => Number.isInteger(i));
  return indexes.length > 0 ? Math.min(...indexes) : 0;
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
