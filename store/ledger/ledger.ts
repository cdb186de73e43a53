/**
 * The append-only ledger as the rest of the hub sees it: appends, which reach the ledger's writer through this
 * process's one WriterTransport (store/ledger/append.ts: here, the cluster primary, or the writer lease holder,
 * chosen once at start-up), and reads. No code path updates or deletes an entry.
 *
 * Where things are: the entries and their idempotency records (store/ledger/entries.ts), the head records and marks
 * (heads.ts), the tail and how entries are built on it (tail.ts), the group commit (commit-engine.ts), the ways to
 * the writer (writer/). The entry's bytes and hashes are in core/ledger/.
 */
import type { Collection, Db } from 'mongodb';
import { EMPTY_ROOT, fromHex, Hash, toHex } from '../../core/ledger/merkle.node';
import type { LedgerEntryDocument } from '../../core/ledger/ledger-entry';
import { FreshReads } from '../../core/fresh-reads';
import {
  AppendInput,
  AppendOptions,
  AppendResult,
  AppendWithdrawn,
  callerIdempotencyScope,
  QuotaClaim,
  WriterTransport
} from './append';
import { CommitEngine } from './commit-engine';
import { LEDGER_COLLECTION } from './entries';
import type { AppendsSince, LedgerHead, LedgerHeadWithTally, LedgerHeadWithTime } from './heads';
import { KeyTree } from './key-tree';
import { KeyTreeIndexer, type KeyTreeIndexerOptions } from './key-tree-indexer';
import { LatestFilter, LedgerReads } from './reads';
import { appendHere, type WriterChoice } from './writer/transports';

export class Ledger {
  private readonly entries: Collection<LedgerEntryDocument>;
  /** Where this process's own appends are committed (and every append whose transport falls back to here). */
  readonly engine: CommitEngine;
  private readonly transport: WriterTransport;
  private readonly reads: LedgerReads;
  /** The ledger's keys as a radix tree, for prefix reads (key-tree.ts). */
  readonly keyTree: KeyTree;
  /** Reads of the newest head record, shared by the head() calls that arrive together. */
  private readonly headReads = new FreshReads<LedgerHeadWithTally | null>(async () => {
    const record = await this.engine.heads.newest();
    return record
      ? {
          size: record.size,
          root: record.root,
          last_entry_at: record.last_entry_at ?? null,
          tally: record.tally ?? null
        }
      : null;
  });

  /**
   * `writer` picks the way appends reach the ledger's writer, given this process's engine (store/ledger/writer/
   * transports.ts); by default they are committed here.
   */
  constructor(db: Db, options: { writer?: WriterChoice } = {}) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
    this.engine = new CommitEngine(db);
    this.transport = (options.writer ?? appendHere)(this.engine);
    this.keyTree = new KeyTree(db);
    this.reads = new LedgerReads(db, this.engine, this.keyTree);
    this.db = db;
  }

  private readonly db: Db;

  /** The loop that keeps the key tree up with this ledger (key-tree-indexer.ts); `start()` it in API processes. */
  keyTreeIndexer(options: KeyTreeIndexerOptions = {}): KeyTreeIndexer {
    return new KeyTreeIndexer(
      this.db,
      this.keyTree,
      this.engine.heads,
      () => this.reads.scanKeys(),
      (first, last) => this.engine.positions.keys(first, last),
      options
    );
  }

  /** Which way this process's appends reach the writer. */
  get writerWay(): WriterTransport['way'] {
    return this.transport.way;
  }

  /**
   * Appends one entry; resolves once it is durably inserted (or matched by its idempotency key). Options as in
   * AppendOptions: a `signal` aborted before the write's batch began withdraws it (AppendWithdrawn, nothing written).
   */
  append(input: AppendInput, options: AppendOptions = {}): Promise<AppendResult> {
    if (options.signal?.aborted) return Promise.reject(new AppendWithdrawn());
    return this.transport.append(input, options);
  }

  /**
   * A truth write's append with its daily-quota slot, both made by the writer lease holder when another host holds
   * it: the result, or `'over_quota'` (nothing written). `null` when this process's transport does not carry them
   * together: the caller claims its slot and appends as usual. AppendWithdrawn as for append (no slot spent).
   */
  async appendCounted(
    input: AppendInput,
    quota: QuotaClaim,
    options: { signal?: AbortSignal; deadline?: number } = {}
  ): Promise<AppendResult | 'over_quota' | null> {
    if (options.signal?.aborted) throw new AppendWithdrawn();
    return this.transport.appendCounted(input, quota, options);
  }

  /** The seeding fast path (benchmarks, imports): see CommitEngine.appendBulk. */
  appendBulk(inputs: Iterable<Omit<AppendInput, 'idempotencyKey'>>, chunk = 1000): Promise<number> {
    return this.engine.appendBulk(inputs, chunk);
  }

  /** Resolves once the head records of every tail this process has written so far are inserted (or failed). */
  headPublished(): Promise<void> {
    return this.engine.headPublished();
  }

  /** Entries appended since `since`, from the ledger's marks (store/ledger/heads.ts). */
  appendsSince(since: Date, head?: LedgerHead): Promise<AppendsSince> {
    return this.engine.heads.appendsSince(since, head ?? this.head());
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
    const { published: publishedBefore, forwarded } = this.engine.ownHead();
    // A read that started after this call, shared with the calls that arrive with it (core/fresh-reads.ts).
    const head = await this.headReads.get('head');
    // This process's own acknowledged tail while its record was on its way when this call began (see publish);
    // records inserted before that are the head again (the read sees them).
    const own = this.engine.ownHead().acknowledged;
    if (own && own.size > publishedBefore && own.size > (head?.size ?? 0))
      return { size: own.size, root: own.root, last_entry_at: own.last_entry_at, tally: own.tally };
    // An entry another writer appended for this process, whose head record may still be on its way.
    if (forwarded && forwarded.size > (head?.size ?? 0)) return forwarded;
    return head ?? { size: 0, root: toHex(EMPTY_ROOT), last_entry_at: null, tally: {} };
  }

  get(seq: number): Promise<LedgerEntryDocument | null> {
    return this.entries.findOne({ _id: seq });
  }

  /** The entry written with this (did, idempotency key), if its idempotency record says where it is. */
  async findByIdempotencyKey(did: string | null, idempotencyKey: string): Promise<LedgerEntryDocument | null> {
    return (await this.engine.idems.find([callerIdempotencyScope(did, idempotencyKey)]))[0] ?? null;
  }

  /**
   * Entries whose key starts with `prefix` (any prefix), oldest first, at most `limit` (<= 200). The empty prefix and
   * seed-record prefixes are read by `_id` (store/ledger/reads.ts), any other prefix from the key tree (key-tree.ts).
   */
  /** A key's truth versions from the key tree, or null when it cannot answer (LedgerReads.truthVersions). */
  truthVersions(key: string, options: { limit?: number; before?: number; through?: number } = {}) {
    return this.reads.truthVersions(key, options);
  }

  findByKeyPrefix(prefix: string, limit: number): Promise<LedgerEntryDocument[]> {
    if (!prefix) return this.reads.range(0, limit);
    if (LedgerReads.seedPrefix(prefix)) return this.reads.seedAfter(prefix, 0, limit);
    return this.reads.byKeyPrefix(prefix, limit);
  }

  /** The newest entries first (those before seq `before` when given), optionally filtered by kind and truth type. */
  latest(limit: number, filter: LatestFilter & { before?: number } = {}): Promise<LedgerEntryDocument[]> {
    if (filter.before !== undefined && (filter.kind || filter.truthTypes))
      throw new Error('Ledger.latest: `before` goes with no filter');
    if (filter.before !== undefined) return this.reads.newest(limit, filter.before);
    return this.reads.latest(limit, filter);
  }

  /** Entries with seq > after, oldest first (with a key prefix: seed-record prefixes by `_id`, see findByKeyPrefix). */
  after(after: number, limit: number, filter: { keyPrefix?: string } = {}): Promise<LedgerEntryDocument[]> {
    if (!filter.keyPrefix) return this.reads.range(after, limit);
    if (LedgerReads.seedPrefix(filter.keyPrefix)) return this.reads.seedAfter(filter.keyPrefix, after, limit);
    return this.reads.legacyAfter(after, limit, filter.keyPrefix);
  }

  /** Every entry in seq order, streamed in batches (flat memory). */
  scan(batchSize = 1000): AsyncIterable<LedgerEntryDocument> {
    return this.reads.scan(batchSize);
  }

  /** Entries by seq, in the order asked (a seq with no entry is left out): `_id` lookups, LOOKUPS_AT_ONCE at a time. */
  bySeqs(seqs: number[]): Promise<LedgerEntryDocument[]> {
    return this.reads.bySeqs(seqs);
  }

  /**
   * The hex hashes of the perfect subtrees of 2^level leaves at `indices`, as recorded by the entries that completed
   * them (level 0: the entries' leaf_hash), looked up by `_id` at once; null where none is recorded.
   */
  async subtreeHashes(level: number, indices: number[]): Promise<(string | null)[]> {
    const projection = level === 0 ? { leaf_hash: 1 } : { completed: 1 };
    const docs = await Promise.all(
      indices.map((index) => this.entries.findOne({ _id: (index + 1) * 2 ** level }, { projection }))
    );
    return docs.map((d) => (level === 0 ? d?.leaf_hash : d?.completed?.[level]) ?? null);
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
