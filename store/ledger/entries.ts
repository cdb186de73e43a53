/**
 * The ledger's entries collection and its idempotency records.
 *
 * One document per entry, `_id` = seq (1, 2, 3, … with no gaps); no code path updates or deletes an entry.
 *
 * Idempotency: the unique index on `idem` guarantees one entry per key. Looking a key up by that field would scan
 * the whole ledger on FerretDB, once per keyed append, so each keyed entry also gets a record in
 * `ledger_idempotency` (`_id` = the key, `seq`), written right after the entry and read by _id. A missing record
 * (a writer stopped between the two inserts) only costs speed: the entry's insert is refused by the unique index
 * and the key is then looked up in the ledger itself (findInLedger).
 */
import type { Collection, Db } from 'mongodb';
import { lastOfRun } from '../../core/ledger/contiguous-run';
import type { LedgerEntryDocument } from '../../core/ledger/ledger-entry';
import { findByIds } from '../mongo';

export const LEDGER_COLLECTION = 'ledger';
export const LEDGER_IDEMPOTENCY_COLLECTION = 'ledger_idempotency';

/**
 * The newest seq from `from` (0 or a seq that exists) on, by `_id` lookups (usually one: from + 1 is missing): where
 * the ledger ends, as far as the entries after a known prefix say (the tail's writer and the readers both ask).
 */
export function lastSeqFrom(entries: Collection<LedgerEntryDocument>, from: number): Promise<number> {
  return lastOfRun(from, async (seq) => (await entries.findOne({ _id: seq }, { projection: { _id: 1 } })) !== null);
}

interface IdempotencyRecord {
  _id: string; // the entry's idem
  seq: number;
}

/** Where the entries written with a caller's key are, by `_id`. */
export class IdempotencyRecords {
  private readonly entries: Collection<LedgerEntryDocument>;
  private readonly records: Collection<IdempotencyRecord>;

  constructor(db: Db) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
    this.records = db.collection<IdempotencyRecord>(LEDGER_IDEMPOTENCY_COLLECTION);
  }

  /** Records where the entries written with a caller's key are, for the lookup by _id. */
  async record(docs: LedgerEntryDocument[]): Promise<void> {
    const records = docs.filter((d) => d.idem.startsWith('k:')).map((d) => ({ _id: d.idem, seq: d._id }));
    if (records.length === 0) return;
    // Best effort: the entries are stored; a record that is missing or already there changes nothing.
    await this.records.insertMany(records, { ordered: false }).catch(() => undefined);
  }

  /**
   * The entries written with these idems, found through their idempotency records by `_id` (store/mongo.ts
   * findByIds: a lookup each, as an `_id: { $in }` read the whole ledger on FerretDB).
   */
  async find(idems: string[]): Promise<LedgerEntryDocument[]> {
    const records = await findByIds(this.records, idems);
    if (records.length === 0) return [];
    const entries = await findByIds(
      this.entries,
      records.map((r) => r.seq)
    );
    const wanted = new Set(idems);
    return entries.filter((e) => wanted.has(e.idem));
  }

  /**
   * The entry written with `idem`, searched in the ledger itself (its record was missing: a writer stopped between
   * the entry and the record); the record is written now, so the next retry of the key finds it fast.
   */
  async findInLedger(idem: string): Promise<LedgerEntryDocument | null> {
    const entry = await this.entries.findOne({ idem });
    if (entry) await this.records.insertOne({ _id: entry.idem, seq: entry._id }).catch(() => undefined);
    return entry;
  }
}
