/**
 * The ledger's position lists: for each list (a category of entries the read endpoints filter on), the seqs of its
 * entries in order, kept as small documents addressed by `_id`, so "the newest N of a category" or "every seed
 * record" is a few `_id` reads instead of a sort or a filter over the whole ledger (which FerretDB serves by reading
 * every entry: docs/ledger.md#reads).
 *
 * Lists: the tally categories (core/ledger/tally.ts: `event`, each truth type, `untyped`, `other`) and `seed` (the
 * execution-seed records, keys starting with SEED_KEY_PREFIX). The n-th entry of a list (its ordinal, from 1) is
 * field `p<i>` of document `<list>:<chunk>` in `ledger_positions`, where chunk = (n - 1) / POSITION_CHUNK and
 * i = (n - 1) % POSITION_CHUNK. A write sets fields, never removes one: publishing the same entries again (a retry,
 * a second writer, a repair) writes the same values.
 *
 * When they are written: by the ledger's writer, for the entries up to a head record, before that record is
 * inserted; the record carries each list's length at its size (`positions`). So the newest head record with
 * `positions` says how far the lists are complete; entries after it (acknowledged, their record on its way, or left
 * by a writer that stopped) are read by `_id` (store/ledger/reads.ts). Entries another writer left are read back by
 * `_id` when a writer publishes past them.
 */
import type { AnyBulkWriteOperation, Collection, Db } from 'mongodb';
import type { LedgerEntryDocument, LedgerEntryKind } from '../../core/ledger/ledger-entry';
import { tallyCategory } from '../../core/ledger/tally';
import { SEED_KEY_PREFIX, TRUTH_TYPES } from '../../core/ledger/truth-record';
import { findByIds, writeInCommands } from '../mongo';
import { LEDGER_COLLECTION } from './entries';

export const LEDGER_POSITIONS_COLLECTION = 'ledger_positions';
export const POSITION_CHUNK = 256;

/** Each list's length at some ledger size. */
export type PositionCounts = Record<string, number>;

/** Every list a truth belongs to by its category (each truth is in exactly one of these). */
export const TRUTH_LISTS: readonly string[] = [...TRUTH_TYPES, 'untyped', 'other'];
export const SEED_LIST = 'seed';
/** Not a list: the entries' keys by seq, published with the lists for the key tree (PositionLists.keys). */
const KEYS_LIST = 'keys';

/** An entry's key as published for the key tree, and whether the entry is a truth (a version of its key). */
export interface PublishedKey {
  key: string;
  truth: boolean;
}

/** What an entry's lists are computed from. */
export type PositionFields = Pick<LedgerEntryDocument, 'seq' | 'kind' | 'key' | 'truth_type'>;

/** The lists an entry belongs to. */
export function listsOf(entry: { kind: LedgerEntryKind; key: string; truth_type: string | null }): string[] {
  const lists = [tallyCategory(entry.kind, entry.truth_type)];
  if (entry.key.startsWith(SEED_KEY_PREFIX)) lists.push(SEED_LIST);
  return lists;
}

interface PositionDocument {
  _id: string;
  [field: `p${number}`]: number;
  /** In `keys:<chunk>`: the key of seq chunk·POSITION_CHUNK + i + 1, and 1 when that entry is a truth (else 0). */
  [key: `k${number}`]: string;
  [truth: `t${number}`]: number;
}

const chunkId = (list: string, chunk: number) => `${list}:${chunk}`;

export class PositionLists {
  private readonly positions: Collection<PositionDocument>;
  private readonly entries: Collection<LedgerEntryDocument>;

  constructor(db: Db) {
    this.positions = db.collection<PositionDocument>(LEDGER_POSITIONS_COLLECTION);
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
  }

  /**
   * Writes the positions of entries `from.size + 1 … size` given the lists' lengths at `from.size`, and returns
   * their lengths at `size`. `known` holds entries of that range the caller has (the writer's own); the others are
   * read by `_id`. Throws what the writes throw (nothing is published then: the caller's head record waits).
   */
  async publish(
    from: { size: number; counts: PositionCounts },
    size: number,
    known: ReadonlyMap<number, PositionFields>
  ): Promise<PositionCounts> {
    const counts = { ...from.counts };
    if (size <= from.size) return counts;
    const missing: number[] = [];
    for (let seq = from.size + 1; seq <= size; seq++) if (!known.has(seq)) missing.push(seq);
    const read = new Map<number, PositionFields>();
    for (let at = 0; at < missing.length; at += 256) {
      const docs = await findByIds(this.entries, missing.slice(at, at + 256));
      for (const d of docs) read.set(d._id, d);
    }
    const sets = new Map<string, Record<string, number | string>>();
    for (let seq = from.size + 1; seq <= size; seq++) {
      const entry = known.get(seq) ?? read.get(seq);
      if (!entry) throw new Error(`ledger entry ${seq} is missing: its positions cannot be published`);
      // The entry's key, for the key tree's indexer (keys): field k<i> of `keys:<chunk>`, by seq.
      const keysId = chunkId(KEYS_LIST, Math.floor((seq - 1) / POSITION_CHUNK));
      let keys = sets.get(keysId);
      if (!keys) sets.set(keysId, (keys = {}));
      keys[`k${(seq - 1) % POSITION_CHUNK}`] = entry.key;
      keys[`t${(seq - 1) % POSITION_CHUNK}`] = entry.kind === 'truth' ? 1 : 0;
      for (const list of listsOf(entry)) {
        const ordinal = (counts[list] ?? 0) + 1;
        counts[list] = ordinal;
        const id = chunkId(list, Math.floor((ordinal - 1) / POSITION_CHUNK));
        let set = sets.get(id);
        if (!set) sets.set(id, (set = {}));
        set[`p${(ordinal - 1) % POSITION_CHUNK}`] = seq;
      }
    }
    const ops: AnyBulkWriteOperation<PositionDocument>[] = [...sets].map(([_id, $set]) => ({
      updateOne: { filter: { _id }, update: { $set: $set as Partial<PositionDocument> }, upsert: true }
    }));
    await writeInCommands(this.positions, ops, { retryUpserts: true });
    return counts;
  }

  /**
   * The keys of entries `first … last` as the writer published them with their positions (`keys:<chunk>`, one
   * document per POSITION_CHUNK seqs), and whether each is a truth: what the key tree's indexer reads instead of each
   * entry. A seq whose key was not published (a ledger begun before this, or a range whose positions could not be
   * published) is left out.
   */
  async keys(first: number, last: number): Promise<Map<number, PublishedKey>> {
    const chunks: string[] = [];
    for (let c = Math.floor((first - 1) / POSITION_CHUNK); c <= Math.floor((last - 1) / POSITION_CHUNK); c++)
      chunks.push(chunkId(KEYS_LIST, c));
    const out = new Map<number, PublishedKey>();
    for (const doc of await findByIds(this.positions, chunks)) {
      const chunk = Number(doc._id.slice(KEYS_LIST.length + 1));
      const fields = doc as unknown as Record<string, unknown>;
      for (let i = 0; i < POSITION_CHUNK; i++) {
        const seq = chunk * POSITION_CHUNK + i + 1;
        const [key, truth] = [fields[`k${i}`], fields[`t${i}`]];
        if (seq >= first && seq <= last && typeof key === 'string' && typeof truth === 'number')
          out.set(seq, { key, truth: truth === 1 });
      }
    }
    return out;
  }

  /**
   * The seqs of ordinals `first … last` of `list` (1-based, inclusive), in ordinal order; a position not written
   * (a list shorter than asked) ends the answer early.
   */
  async seqs(list: string, first: number, last: number): Promise<number[]> {
    if (last < first) return [];
    const chunks: number[] = [];
    for (let c = Math.floor((first - 1) / POSITION_CHUNK); c <= Math.floor((last - 1) / POSITION_CHUNK); c++)
      chunks.push(c);
    const docs = await findByIds(
      this.positions,
      chunks.map((c) => chunkId(list, c))
    );
    const byId = new Map(docs.map((d) => [d._id, d]));
    const out: number[] = [];
    for (let n = first; n <= last; n++) {
      const doc = byId.get(chunkId(list, Math.floor((n - 1) / POSITION_CHUNK)));
      const seq = doc?.[`p${(n - 1) % POSITION_CHUNK}`];
      if (typeof seq !== 'number') break;
      out.push(seq);
    }
    return out;
  }
}
