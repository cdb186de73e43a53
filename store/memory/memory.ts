/**
 * Truth memory reads over the ledger (core/memory/memory-record.ts): a key's versions are its truth entries in seq
 * order. Writes go through the ledger's append (store/ledger/ledger.ts); this module only reads: from the key tree's
 * version chunks (Ledger.truthVersions: a few `_id` reads whatever the number of versions), or, while the tree cannot
 * answer (being built after an upgrade, far behind), by the ledger's `key` field (GIN-indexed equality on FerretDB,
 * whose matches are then sorted and counted: it grows with the key's versions).
 */
import { Collection, Db } from 'mongodb';
import type { LedgerEntryDocument } from '../../core/ledger/ledger-entry';
import { LEDGER_COLLECTION } from '../ledger/entries';
import type { Ledger } from '../ledger/ledger';

export interface MemoryVersion {
  version: number;
  entry: LedgerEntryDocument;
}

export class MemoryStore {
  private readonly entries: Collection<LedgerEntryDocument>;

  constructor(
    db: Db,
    private readonly ledger: Pick<Ledger, 'truthVersions'>
  ) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
  }

  /** How many versions the key has, counting only entries up to `throughSeq` when given. */
  async countVersions(key: string, throughSeq?: number): Promise<number> {
    const fromTree = await this.ledger.truthVersions(key, { through: throughSeq });
    if (fromTree) return fromTree.versions;
    return this.entries.countDocuments(
      throughSeq === undefined ? { key, kind: 'truth' } : { key, kind: 'truth', _id: { $lte: throughSeq } }
    );
  }

  /** The newest version of the key and how many it has, or null when it has none. */
  async latest(key: string): Promise<{ latest: MemoryVersion; versions: number } | null> {
    const fromTree = await this.ledger.truthVersions(key, { limit: 1 });
    if (fromTree) return fromTree.page[0] ? { latest: fromTree.page[0], versions: fromTree.versions } : null;
    const [entry] = await this.entries.find({ key, kind: 'truth' }).sort({ _id: -1 }).limit(1).toArray();
    if (!entry) return null;
    const versions = await this.countVersions(key, entry.seq);
    return { latest: { version: versions, entry }, versions };
  }

  /**
   * Versions newest first, at most `limit`, those before seq `before` when given; `versions` counts them all. The
   * page's numbers count the key's versions up to its newest entry, read after the page: a version written while the
   * page was read does not shift them (counted beside the page, it did).
   */
  async history(key: string, limit: number, before?: number): Promise<{ versions: number; page: MemoryVersion[] }> {
    const fromTree = await this.ledger.truthVersions(key, { limit, before });
    if (fromTree) return fromTree;
    const filter =
      before === undefined ? { key, kind: 'truth' as const } : { key, kind: 'truth' as const, _id: { $lt: before } };
    const page = await this.entries.find(filter).sort({ _id: -1 }).limit(limit).toArray();
    const [versions, newest] = await Promise.all([
      this.entries.countDocuments({ key, kind: 'truth' }),
      page.length === 0
        ? Promise.resolve(0)
        : this.entries.countDocuments({ key, kind: 'truth', _id: { $lte: page[0]!.seq } })
    ]);
    return { versions, page: page.map((entry, i) => ({ version: newest - i, entry })) };
  }
}
