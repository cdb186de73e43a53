/**
 * The ledger's commit engine: the one place entries are written. Appends queue in this process and are
 * group-committed (a batch shares one tail read and one head update), so writers of one process queue instead of
 * colliding; every other way an append takes (store/ledger/append.ts) ends in some process's engine.
 *
 * Concurrency without transactions: the insert of seq n is computed from entry n-1, and `_id` is unique, so two
 * engines that race for the same seq cannot both win; the loser re-reads the tail and retries.
 *
 * Reads that would need a scan are kept off the hot path. On FerretDB's SQLite backend every lookup that does not find
 * its document among the first rows scans the collection (a missing or recent seq costs ~1.4 s at 20,000 entries), so
 * neither appends nor the head look entries up in steady state: each process keeps the tail it last wrote, and the
 * head records (store/ledger/heads.ts) are inserted after its batches, at most one every HEAD_RECORD_INTERVAL_MS per
 * process, after the callers were answered (see publish). The tail is re-read from the entries themselves only after
 * losing a race to another process. A writer that stopped between its inserts and its head record leaves entries
 * the head does not cover yet (never acknowledged to their callers): the next batch, by any process, finds them
 * when its insert is refused and publishes them.
 *
 * Idempotency keys are not looked up before an insert: the unique index on `idem` refuses a key already in the
 * ledger, and only then is it looked up (store/ledger/entries.ts).
 */
import { Collection, Db, MongoBulkWriteError } from 'mongodb';
import { canonicalJson } from '../../core/ledger/canonical-json';
import type { LedgerEntryDocument } from '../../core/ledger/ledger-entry';
import { isDuplicateKey } from '../mongo';
import { AppendInput, AppendResult, AppendWithdrawn, callerIdempotencyScope, newEventId } from './append';
import { IdempotencyRecords, LEDGER_COLLECTION } from './entries';
import { HeadRecords, LedgerHeadWithTally, OwnHead } from './heads';
import { PositionCounts, PositionFields, PositionLists } from './positions';
import { BuiltEntry, buildEntries, EntryToBuild, ownHeadOf, stored, Tail, TailReader, tailOf } from './tail';

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

interface Pending extends EntryToBuild {
  resolve: (r: AppendResult) => void;
  reject: (e: unknown) => void;
}

export class CommitEngine {
  private readonly entries: Collection<LedgerEntryDocument>;
  readonly heads: HeadRecords;
  readonly idems: IdempotencyRecords;
  private readonly tails: TailReader;
  readonly positions: PositionLists;
  /**
   * Where this process's position lists stand: published up to `size` (the lists' lengths there), undefined when
   * to be read from the newest head record carrying them, null when the ledger has none (one begun before them).
   */
  private positionsAt: { size: number; counts: PositionCounts } | null | undefined = undefined;
  /** Entries this process wrote whose positions are not published yet (see publishPositions). */
  private readonly unpublished = new Map<number, PositionFields>();
  private queue: Pending[] = [];
  private committing = false;
  /** The tail this process last wrote or read; null when it must be re-read. */
  private knownTail: Tail | null = null;
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
  /** The newest entry another writer appended for this process (head reads answer at least that). */
  private forwardedHead: LedgerHeadWithTally | null = null;

  constructor(db: Db) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
    this.heads = new HeadRecords(db);
    this.idems = new IdempotencyRecords(db);
    this.tails = new TailReader(db, this.heads);
    this.positions = new PositionLists(db);
  }

  /**
   * What head reads add to the newest head record (Ledger.headWithTally): the newest head this process answered
   * for, the largest size whose head record it inserted, and the newest entry appended for it elsewhere.
   */
  ownHead(): { acknowledged: OwnHead | null; published: number; forwarded: LedgerHeadWithTally | null } {
    return { acknowledged: this.acknowledgedHead, published: this.publishedSize, forwarded: this.forwardedHead };
  }

  /** Another writer appended this for the process (a forwarding transport): its head record may still be on its way. */
  forwarded(result: AppendResult): AppendResult {
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

  /**
   * Appends one entry here; resolves once it is durably inserted (or matched by its idempotency key). `signal`
   * withdraws it while it still waits in this process's queue (AppendWithdrawn, nothing written); once its batch
   * has begun it settles as usual.
   */
  append(input: AppendInput, signal?: AbortSignal): Promise<AppendResult> {
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
    let tail = await this.tails.read();
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
      const docs = buildEntries(pending, tail);
      try {
        // Ordered and at most INSERT_CHUNK at a time, so a concurrent writer can only make it stop, never leave
        // entries built on a stale tail behind the refused one.
        for (let at = 0; at < docs.length; at += INSERT_CHUNK)
          await this.entries.insertMany(docs.slice(at, at + INSERT_CHUNK).map(stored), { ordered: true });
      } catch (err) {
        this.knownTail = null;
        this.positionsAt = undefined;
        throw err;
      }
      this.remember(docs);
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
    let tail: Tail | null = this.knownTail ?? (await this.tails.fromHeadRecord(0));
    if (this.knownTail && this.contended()) {
      const newer = await this.tails.fromHeadRecord(this.knownTail.size + 1);
      if (newer) {
        tail = newer;
        this.contendedUntil = Date.now() + CONTENDED_MS;
      }
    }
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= MAX_RETRIES) throw new Error('ledger append kept losing the race for the next seq');
      tail ??= await this.tails.read();
      const attemptTail = tail;
      const docs = buildEntries(pending, tail);
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
        // Another writer's entries may follow: the position lists restart from the newest record carrying them.
        this.positionsAt = undefined;
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
        tail = await this.tails.fromHeadRecord(refusedSeq);
        for (const wait of REFUSED_SEQ_WAITS_MS) {
          if (tail) break;
          await new Promise((resolve) => setTimeout(resolve, wait));
          tail = await this.tails.fromHeadRecord(refusedSeq);
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
      where === 'record' ? (await this.idems.find([refused.idem]))[0] : await this.idems.findInLedger(refused.idem);
    if (!entry) return rest;
    refused.resolve({ entry, duplicate: true });
    // A retry seldom comes alone (a client resending a batch, an activity appending again what its last attempt
    // may have written): the other keys of the batch are looked up now, together, instead of one refusal each.
    const others = rest.slice(1);
    const keyed = others.filter((p) => p.idem.startsWith('k:'));
    if (keyed.length === 0) return others;
    const found = new Map((await this.idems.find(keyed.map((p) => p.idem))).map((e) => [e.idem, e]));
    return others.filter((p) => {
      const existing = found.get(p.idem);
      if (existing) p.resolve({ entry: existing, duplicate: true });
      return !existing;
    });
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
   * HEAD_RECORD_INTERVAL_MS late was paid at nearly every write (docs/benchmarks.md).
   */
  private async publish(docs: BuiltEntry[]): Promise<void> {
    const last = docs[docs.length - 1]!;
    this.knownTail = tailOf(last);
    this.remember(docs);
    if (!this.acknowledgedHead || this.acknowledgedHead.size < last._id) this.acknowledgedHead = ownHeadOf(last);
    this.publishHead();
    await this.idems.record(docs);
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
    this.headInFlight = this.insertHead(head)
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

  /** Records the new tail locally and inserts the shared head record for it (the newest record is the head). */
  private async advanceHead(last: BuiltEntry): Promise<void> {
    this.knownTail = tailOf(last);
    await this.insertHead(ownHeadOf(last));
  }

  /** Keeps what the position lists need of entries this process wrote, until they are published. */
  private remember(docs: BuiltEntry[]): void {
    if (this.positionsAt === null) return;
    for (const d of docs)
      this.unpublished.set(d._id, { seq: d.seq, kind: d.kind, key: d.key, truth_type: d.truth_type });
  }

  /**
   * Inserts the head record of `head`, after publishing the position lists up to it (store/ledger/positions.ts)
   * from where this process last published them (or the newest record carrying them). When they cannot be
   * published (an entry of the range missing, a failed write) the record goes out without them: readers then start
   * from an older record with positions and read the entries after it by `_id`, and the next record tries again.
   */
  private async insertHead(head: OwnHead): Promise<void> {
    let counts: PositionCounts | undefined;
    try {
      counts = await this.publishPositions(head.size);
    } catch {
      counts = undefined;
    }
    const at = this.positionsAt;
    await this.heads.insert(head, counts, at ? at.size : head.size);
  }

  /** The lists' lengths at `size` after publishing them up to it; undefined when this record cannot carry them. */
  private async publishPositions(size: number): Promise<PositionCounts | undefined> {
    if (this.positionsAt === undefined) {
      const { newest, withPositions } = await this.heads.newestTwo();
      this.positionsAt = withPositions?.positions
        ? { size: withPositions.size, counts: withPositions.positions }
        : newest
          ? null // a ledger begun before position lists: none are kept (docs/ledger.md#reads)
          : { size: 0, counts: {} };
    }
    const from = this.positionsAt;
    if (from === null) {
      this.unpublished.clear();
      return undefined;
    }
    // Another writer published further: this older record carries none (its readers use that writer's).
    if (from.size > size) return undefined;
    const counts = await this.positions.publish(from, size, this.unpublished);
    if (this.positionsAt === from) this.positionsAt = { size, counts };
    for (const seq of this.unpublished.keys()) if (seq <= size) this.unpublished.delete(seq);
    return counts;
  }
}

/** How many entries of a refused ordered insertMany landed: the index of its first write error (0 when unknown). */
function landedBeforeRefusal(err: unknown): number {
  if (!(err instanceof MongoBulkWriteError)) return 0;
  const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  const indexes = errors.map((e) => e.index).filter((i) => Number.isInteger(i));
  return indexes.length > 0 ? Math.min(...indexes) : 0;
}
