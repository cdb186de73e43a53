/**
 * The ledger's reads, made of `_id` lookups and small documents addressed by `_id` (docs/ledger.md#reads): the
 * newest entries, a range of seqs, the newest of some categories, the seed records. FerretDB serves a sort, a range
 * or a regex by reading the whole collection (seconds at 10,000 entries, minutes at a million), and an `_id` lookup
 * from an index, so every read here is a known set of seqs looked up at once; real MongoDB runs the same code.
 *
 * How far the ledger goes: the newest head record, this process's own acknowledged tail, then `_id` probes past them
 * (lastSeqFrom: one lookup that finds nothing, usually). Entries after the newest head record that carries position
 * lists (store/ledger/positions.ts) are read by `_id` and filtered here; the lists serve the rest.
 *
 * A ledger begun before position lists has none: its filtered reads fall back to the queries of earlier versions
 * (scans on FerretDB), which stay correct.
 */
import type { Collection, Db, Filter } from 'mongodb';
import type { LedgerEntryDocument, LedgerEntryKind } from '../../core/ledger/ledger-entry';
import { tallyCategory } from '../../core/ledger/tally';
import { SEED_KEY_PREFIX } from '../../core/ledger/truth-record';
import { FreshReads } from '../../core/fresh-reads';
import { findByIds } from '../mongo';
import type { CommitEngine } from './commit-engine';
import { lastSeqFrom, LEDGER_COLLECTION } from './entries';
import type { LedgerHeadDocument } from './heads';
import { KeyTree, NODE_SEQS, wellFormed } from './key-tree';
import { listsOf, PositionCounts, PositionLists, SEED_LIST, TRUTH_LISTS } from './positions';

/** Entries looked up at once by one read, at most. */
const LOOKUPS_AT_ONCE = 256;
/** Entries a scan holds while waiting for an earlier seq (see scan). */
const SCAN_WINDOW = 4096;
/**
 * Entries past the key tree's `#indexed:edges` that a prefix read reads by `_id` at most; further behind (the tree being
 * built for an older ledger, or its indexer stopped), the read takes the query of earlier versions.
 */
const KEY_TREE_MAX_LAG = 2048;

export interface LatestFilter {
  truthTypes?: string[];
  kind?: LedgerEntryKind;
}

interface Bounds {
  /** The newest seq. */
  size: number;
  /** The newest head record carrying position lists (null: the ledger has none). */
  lists: { size: number; counts: PositionCounts } | null;
}

export class LedgerReads {
  private readonly entries: Collection<LedgerEntryDocument>;
  private readonly positions: PositionLists;
  private readonly records = new FreshReads<{
    newest: LedgerHeadDocument | null;
    withPositions: LedgerHeadDocument | null;
  }>(() => this.engine.heads.newestTwo());

  constructor(
    db: Db,
    private readonly engine: CommitEngine,
    private readonly keyTree: KeyTree
  ) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
    this.positions = engine.positions;
  }

  /** Entries by seq, in the order asked (seqs with no entry are left out). */
  async bySeqs(seqs: number[]): Promise<LedgerEntryDocument[]> {
    const found = new Map<number, LedgerEntryDocument>();
    for (let at = 0; at < seqs.length; at += LOOKUPS_AT_ONCE)
      for (const d of await findByIds(this.entries, seqs.slice(at, at + LOOKUPS_AT_ONCE))) found.set(d._id, d);
    return seqs.flatMap((s) => found.get(s) ?? []);
  }

  /**
   * Every entry in seq order, in flat memory, without a sort: FerretDB sorts the whole collection in its own memory
   * before answering a sorted find, so the collection is read in its stored order (the order of the inserts, in
   * practice) and put in seq order through a window of at most SCAN_WINDOW entries; an entry the window waits for
   * too long is looked up by `_id`, and a seq with no entry is skipped (the caller sees the gap), as a sorted read
   * would. Entries appended during the scan may be included. `fields` (a projection) reads only those.
   */
  scan(batchSize = 1000, window = SCAN_WINDOW): AsyncGenerator<LedgerEntryDocument> {
    return this.scanFields<LedgerEntryDocument>(batchSize, window);
  }

  /** scan, reading only the entries' keys. */
  scanKeys(batchSize = 5000): AsyncGenerator<Pick<LedgerEntryDocument, '_id' | 'key' | 'kind'>> {
    return this.scanFields(batchSize, SCAN_WINDOW, { key: 1, kind: 1 });
  }

  private async *scanFields<T extends { _id: number }>(
    batchSize: number,
    window: number,
    fields?: Record<string, 1>
  ): AsyncGenerator<T> {
    const options = fields ? { projection: fields } : {};
    const waiting = new Map<number, T>();
    let next = 1;
    const settle = async function* (this: LedgerReads, force: boolean): AsyncGenerator<T> {
      for (;;) {
        const ready = waiting.get(next);
        if (ready) {
          waiting.delete(next++);
          yield ready;
          continue;
        }
        if (waiting.size === 0 || (!force && waiting.size < window)) return;
        const found = (await this.entries.findOne({ _id: next }, options)) as T | null;
        if (found) waiting.set(next, found);
        else next += 1; // no entry at this seq: the caller sees the gap
      }
    }.bind(this);
    for await (const doc of this.entries.find({}, options).batchSize(batchSize) as AsyncIterable<T>) {
      if (doc._id < next || waiting.has(doc._id)) continue;
      waiting.set(doc._id, doc);
      yield* settle(false);
    }
    yield* settle(true);
  }

  /** The newest entries first, those before seq `before` when given. */
  async newest(limit: number, before?: number): Promise<LedgerEntryDocument[]> {
    const { size } = await this.bounds();
    const top = before === undefined ? size : Math.min(size, before - 1);
    return this.bySeqs(descending(top, Math.max(1, top - limit + 1)));
  }

  /** Entries with seq > after, oldest first. */
  async range(after: number, limit: number): Promise<LedgerEntryDocument[]> {
    const { size } = await this.bounds();
    const from = Math.max(1, after + 1);
    const to = Math.min(size, from + limit - 1);
    return this.bySeqs(ascending(from, to));
  }

  /** The newest entries first that match `filter` (kind, truth types), from the position lists. */
  async latest(limit: number, filter: LatestFilter): Promise<LedgerEntryDocument[]> {
    if (!filter.kind && !filter.truthTypes) return this.newest(limit);
    const bounds = await this.bounds();
    if (!bounds.lists) return this.legacyLatest(limit, filter);
    const types = filter.truthTypes ? new Set(filter.truthTypes) : null;
    const accept = (e: LedgerEntryDocument) =>
      (!filter.kind || e.kind === filter.kind) && (!types || (e.truth_type !== null && types.has(e.truth_type)));
    const lists = new Set<string>();
    if (filter.kind !== 'truth') lists.add('event');
    if (filter.kind !== 'event') {
      if (types) for (const t of types) lists.add(tallyCategory('truth', t));
      else for (const l of TRUTH_LISTS) lists.add(l);
    }
    const found = (await this.tail(bounds, 'newest')).filter(accept).slice(0, limit);
    if (found.length < limit)
      found.push(...(await this.fromLists(bounds.lists, [...lists], limit - found.length, accept)));
    return found;
  }

  /** Entries with seq > after whose key starts with the seed prefix `prefix`, oldest first (the seed list). */
  async seedAfter(prefix: string, after: number, limit: number): Promise<LedgerEntryDocument[]> {
    const bounds = await this.bounds();
    if (!bounds.lists) return this.legacyAfter(after, limit, prefix);
    const accept = (e: LedgerEntryDocument) => e.seq > after && e.key.startsWith(prefix);
    const out: LedgerEntryDocument[] = [];
    const count = bounds.lists.counts[SEED_LIST] ?? 0;
    // The seed list is read whole (a few documents: seed records are rare), its entries after `after` looked up.
    const seqs = (await this.positions.seqs(SEED_LIST, 1, count)).filter((s) => s > after);
    for (let at = 0; at < seqs.length && out.length < limit; at += LOOKUPS_AT_ONCE)
      out.push(...(await this.bySeqs(seqs.slice(at, at + LOOKUPS_AT_ONCE))).filter(accept));
    if (out.length < limit) out.push(...(await this.tail(bounds, 'oldest')).filter(accept));
    return out.slice(0, limit);
  }

  /**
   * Entries whose key starts with `prefix` (not empty: any string), oldest first, at most `limit` (<= 200): the
   * seqs of the key tree's node for the prefix up to `#indexed:edges`, then the entries after it read by `_id`.
   */
  async byKeyPrefix(prefix: string, limit: number): Promise<LedgerEntryDocument[]> {
    const [indexed, bounds] = await Promise.all([this.keyTree.indexedSize(), this.bounds()]);
    if (indexed === null || bounds.size - indexed > KEY_TREE_MAX_LAG || limit > NODE_SEQS)
      return this.legacyByKeyPrefix(prefix, limit);
    const stored = wellFormed(prefix);
    const seqs = await this.keyTree.oldest(stored);
    if (seqs === null) return this.legacyByKeyPrefix(prefix, limit);
    const out = await this.bySeqs(seqs.filter((s) => s <= indexed).slice(0, limit));
    if (out.length < limit && bounds.size > indexed) {
      const tail = await this.bySeqs(ascending(indexed + 1, bounds.size));
      out.push(...tail.filter((e) => e.key.startsWith(stored)));
    }
    return out.slice(0, limit);
  }

  /**
   * A key's truth versions (the memory gateway's reads) from the key tree: `versions`, how many have a seq up to
   * `through` (all when not given); `page`, the newest `limit` of those before seq `before`, newest first, each with
   * its number (from 1, oldest first). The versions up to the tree's indexed size come from the key's version
   * chunks, those after it from the entries read by `_id`. Null when the tree cannot answer (not built, far behind,
   * a key not as stored or holding U+0000): the caller reads otherwise.
   */
  async truthVersions(
    key: string,
    options: { limit?: number; before?: number; through?: number } = {}
  ): Promise<{ versions: number; page: { version: number; entry: LedgerEntryDocument }[] } | null> {
    const [indexed, bounds] = await Promise.all([this.keyTree.indexedSize(), this.bounds()]);
    if (indexed === null || bounds.size - indexed > KEY_TREE_MAX_LAG) return null;
    if (key !== wellFormed(key) || key.includes('\u0000')) return null;
    const { count, seqOf } = await this.keyTree.versions(key);
    // The versions up to the indexed size: the tree may have counted a few past it (a batch not recorded yet).
    let n = count;
    while (n > 0 && (await seqOf(n)) > indexed) n--;
    const tail =
      bounds.size > indexed
        ? (await this.bySeqs(ascending(indexed + 1, bounds.size))).filter((e) => e.key === key && e.kind === 'truth')
        : [];
    /** How many of versions 1 … n have a seq up to `seq` (seqs ascend with the numbers: a binary search). */
    const countedTo = async (seq: number): Promise<number> => {
      if (n === 0 || (await seqOf(n)) <= seq) return n;
      let [lo, hi] = [0, n]; // seqOf(lo) <= seq < seqOf(hi), version 0 before every seq
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if ((await seqOf(mid)) <= seq) lo = mid;
        else hi = mid;
      }
      return lo;
    };
    const through = options.through ?? Infinity;
    const versions = (await countedTo(through)) + tail.filter((e) => e.seq <= through).length;
    const limit = options.limit ?? 0;
    const before = options.before ?? Infinity;
    const page: { version: number; entry: LedgerEntryDocument }[] = [];
    for (let i = tail.length - 1; i >= 0 && page.length < limit; i--)
      if (tail[i]!.seq < before) page.push({ version: n + i + 1, entry: tail[i]! });
    const ordinals: number[] = [];
    for (let v = await countedTo(before - 1); v >= 1 && page.length + ordinals.length < limit; v--) ordinals.push(v);
    const seqs = await Promise.all(ordinals.map(seqOf));
    const entries = new Map((await this.bySeqs(seqs)).map((e) => [e.seq, e]));
    ordinals.forEach((version, i) => {
      const entry = entries.get(seqs[i]!);
      if (entry) page.push({ version, entry });
    });
    return { versions, page };
  }

  /** Whether the seed list serves a key prefix: every key starting with it is a seed record's. */
  static seedPrefix(prefix: string): boolean {
    return prefix.startsWith(SEED_KEY_PREFIX);
  }

  /** Entries whose key starts with `prefix`, oldest first, by the query of earlier versions (docs/known-issues.md). */
  legacyByKeyPrefix(prefix: string, limit: number): Promise<LedgerEntryDocument[]> {
    return this.entries
      .find({ key: { $regex: `^${escapeRegex(prefix)}` } })
      .sort({ _id: 1 })
      .limit(limit)
      .toArray();
  }

  legacyAfter(after: number, limit: number, keyPrefix?: string): Promise<LedgerEntryDocument[]> {
    const q: Filter<LedgerEntryDocument> = { _id: { $gt: after } };
    if (keyPrefix) q.key = { $regex: `^${escapeRegex(keyPrefix)}` };
    return this.entries.find(q).sort({ _id: 1 }).limit(limit).toArray();
  }

  private legacyLatest(limit: number, filter: LatestFilter): Promise<LedgerEntryDocument[]> {
    const q: Filter<LedgerEntryDocument> = {};
    if (filter.truthTypes) q.truth_type = { $in: filter.truthTypes };
    if (filter.kind) q.kind = filter.kind;
    return this.entries.find(q).sort({ _id: -1 }).limit(limit).toArray();
  }

  /** How far the ledger goes, and how far its position lists do. */
  private async bounds(): Promise<Bounds> {
    const { newest, withPositions } = await this.records.get('head');
    const own = this.engine.ownHead();
    const from = Math.max(newest?.size ?? 0, own.acknowledged?.size ?? 0, own.forwarded?.size ?? 0);
    const size = await lastSeqFrom(this.entries, from);
    const lists = withPositions?.positions
      ? { size: withPositions.size, counts: withPositions.positions }
      : newest
        ? null
        : { size: 0, counts: {} };
    return { size, lists };
  }

  /** The entries after the position lists' record (read by `_id`), newest or oldest first. */
  private async tail(bounds: Bounds, order: 'newest' | 'oldest'): Promise<LedgerEntryDocument[]> {
    const from = (bounds.lists?.size ?? 0) + 1;
    if (from > bounds.size) return [];
    return this.bySeqs(order === 'newest' ? descending(bounds.size, from) : ascending(from, bounds.size));
  }

  /**
   * The newest `limit` entries of `lists` accepted by `accept`, newest first. Each round takes, from every list,
   * the newest `need` positions not taken yet (the newest `need` of their union are among them), looks the newest
   * `need` of the union up, and keeps those accepted (a list may hold others: `other` holds every unknown type).
   */
  private async fromLists(
    at: { counts: PositionCounts },
    lists: string[],
    limit: number,
    accept: (e: LedgerEntryDocument) => boolean
  ): Promise<LedgerEntryDocument[]> {
    const next = new Map(lists.map((l) => [l, at.counts[l] ?? 0]));
    const out: LedgerEntryDocument[] = [];
    while (out.length < limit) {
      const need = limit - out.length;
      const windows = await Promise.all(
        [...next].map(async ([list, top]) => ({
          list,
          seqs: top > 0 ? (await this.positions.seqs(list, Math.max(1, top - need + 1), top)).reverse() : []
        }))
      );
      const candidates = windows
        .flatMap((w) => w.seqs.map((seq) => ({ seq, list: w.list })))
        .sort((a, b) => b.seq - a.seq)
        .slice(0, need);
      if (candidates.length === 0) break;
      for (const c of candidates) next.set(c.list, next.get(c.list)! - 1);
      const entries = await this.bySeqs(candidates.map((c) => c.seq));
      for (const e of entries) if (listsOf(e).some((l) => next.has(l)) && accept(e)) out.push(e);
    }
    return out;
  }
}

function descending(from: number, to: number): number[] {
  const out: number[] = [];
  for (let s = from; s >= to && s >= 1; s--) out.push(s);
  return out;
}

function ascending(from: number, to: number): number[] {
  const out: number[] = [];
  for (let s = from; s <= to; s++) out.push(s);
  return out;
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
