/**
 * The tiles of the transparency log already served (services/tlog/tiles.ts), kept so the next read of a tile is one
 * `_id` lookup rather than one per hash or entry (256 for a full tile: about 150 ms on FerretDB).
 *
 * Collection `tlog_tiles`, every read and write by `_id`, one document per tile position: `<L>/<N>` for the hash
 * tile of level L at index N, `entries/<N>` for the entry bundle N. It holds the longest prefix of that tile served
 * so far: `width` hashes or entries, and `data` their bytes as served (a hash tile's concatenated hashes, an entry
 * bundle's length-prefixed entries). A tile of a tree is a prefix of the same tile of any larger tree (the ledger is
 * append-only), so every width up to `width` is a slice of `data`, and a wider one needs only the lookups past it.
 *
 * A write replaces the document only where it holds fewer items (`width < w`); where it holds as many or more, the
 * upsert's insert meets the `_id` and is dropped. Two racing writes can leave the shorter of two prefixes (FerretDB
 * applies an update by reading and writing the document back): still a prefix, so still right. An entry bundle
 * whose bytes exceed MAX_DATA_BYTES is not kept (the document limit is 16 MiB; a bundle of large entries is read
 * from the ledger each time).
 */
import { Binary, type Collection, type Db } from 'mongodb';
import { isDuplicateKey, retryingUpsert } from '../mongo';

export const TLOG_TILES_COLLECTION = 'tlog_tiles';

/** The largest tile data kept in one document. */
export const MAX_DATA_BYTES = 4 * 1024 * 1024;

export interface CachedTile {
  /** The hashes or entries it holds, from the start of the tile. */
  width: number;
  data: Buffer;
}

interface TileDocument {
  _id: string;
  width: number;
  data: Binary;
}

export class TileCache {
  private readonly docs: Collection<TileDocument>;

  constructor(db: Db) {
    this.docs = db.collection<TileDocument>(TLOG_TILES_COLLECTION);
  }

  /** What is kept of the tile at `position` (`<L>/<N>` or `entries/<N>`), or null. */
  async get(position: string): Promise<CachedTile | null> {
    const doc = await this.docs.findOne({ _id: position });
    if (!doc) return null;
    return { width: doc.width, data: Buffer.from(doc.data.buffer) };
  }

  /** Keeps `width` items of the tile at `position`, unless as many or more are kept already. */
  async put(position: string, tile: CachedTile): Promise<void> {
    if (tile.data.length > MAX_DATA_BYTES) return;
    // The collection's first writes, racing, may meet NamespaceExists (48): retried.
    await retryingUpsert(() =>
      this.docs
        .updateOne(
          { _id: position, width: { $lt: tile.width } },
          { $set: { width: tile.width, data: new Binary(tile.data) } },
          { upsert: true }
        )
        .catch((err: unknown) => {
          // The document holds as many items or more: the upsert's insert met its `_id`. Nothing to retry.
          if (isDuplicateKey(err)) return null;
          throw err;
        })
    );
  }
}
