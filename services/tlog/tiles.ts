/**
 * GET /tlog/tile/…: C2SP tlog-tiles computed from the hashes the ledger stores (core/tlog/tiles.ts for the paths
 * and layout). A hash tile of level L is 256^L-leaf subtree hashes, each recorded by the entry completing it; an
 * entry bundle is the entries' canonical bytes. Every read is a set of `_id` lookups (no range, sort or $in: those
 * read the whole ledger on FerretDB). A tile the tree of the current head does not hold yet is 404; a full tile
 * never changes, a partial one only until it fills.
 *
 * What was served is kept (store/tlog/tiles.ts): a tile is a prefix of the same tile of any larger tree, so a read
 * takes the kept prefix (one lookup) and looks up only the hashes or entries past it, then keeps the longer prefix.
 * A full tile read once is one lookup from then on; the partial tile at the edge costs the entries written since
 * it was last read.
 */
import { AppError } from '../../core/errors';
import { ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import {
  entryBundle,
  entryBundleEnds,
  MAX_TLOG_ENTRY_BYTES,
  TILE_WIDTH,
  tilePath,
  TileRequest,
  tileWidthInTree
} from '../../core/tlog/tiles';
import type { Ledger } from '../../store/ledger/ledger';
import type { Logger } from 'pino';
import type { TileCache } from '../../store/tlog/tiles';

export interface Tile {
  bytes: Buffer;
  /** True for a full tile (256 wide): immutable. */
  full: boolean;
}

export type TlogTiles = ReturnType<typeof createTlogTiles>;

/** The byte length of the first `count` entries of an entry bundle. */
const bundlePrefixBytes = (bundle: Buffer, count: number) => entryBundleEnds(bundle, count).at(-1) ?? 0;

export function createTlogTiles(deps: { ledger: Ledger; cache: TileCache; logger: Logger }) {
  const { ledger, cache, logger } = deps;
  /** The width asked (256 for a full tile), or 404 when the current tree does not hold it yet. */
  async function widthOf(request: TileRequest): Promise<number> {
    const level = request.kind === 'entries' ? 0 : request.level;
    const { size } = await ledger.head();
    const available = tileWidthInTree(level, request.index, size);
    const wanted = request.width ?? TILE_WIDTH;
    const name = tilePath(request.kind === 'entries' ? 'entries' : request.level, request.index, request.width);
    if (available < wanted)
      throw new AppError('not_found', `tile/${name} is not in the tree of ${size} entries (yet)`, {
        tree_size: size
      });
    return wanted;
  }

  /** Indices `from` to `width - 1` of the tile at `index`, counted from the ledger's first leaf. */
  const indicesOf = (index: number, from: number, width: number) =>
    Array.from({ length: width - from }, (_, i) => index * TILE_WIDTH + from + i);

  /**
   * The tile at `position` of `width` items: the kept prefix, sliced (`prefixBytes`), and the items past it read by
   * `readPast`; a longer prefix than was kept is kept.
   */
  async function assemble(
    position: string,
    width: number,
    prefixBytes: (data: Buffer, count: number) => number,
    readPast: (from: number) => Promise<Buffer>
  ): Promise<Tile> {
    const kept = await cache.get(position);
    const have = Math.min(kept?.width ?? 0, width);
    const head = kept ? kept.data.subarray(0, prefixBytes(kept.data, have)) : Buffer.alloc(0);
    if (have === width) return { bytes: head, full: width === TILE_WIDTH };
    const bytes = Buffer.concat([head, await readPast(have)]);
    // Keeping it is for the next read: a failed write does not fail this one.
    await cache
      .put(position, { width, data: bytes })
      .catch((err: unknown) => logger.warn({ err, tile: position }, 'tlog: could not keep a tile served'));
    return { bytes, full: width === TILE_WIDTH };
  }

  async function hashTile(request: Extract<TileRequest, { kind: 'hashes' }>): Promise<Tile> {
    const width = await widthOf(request);
    return assemble(
      `${request.level}/${request.index}`,
      width,
      (_data, count) => 32 * count,
      async (from) => {
        const hashes = await ledger.subtreeHashes(8 * request.level, indicesOf(request.index, from, width));
        const missing = hashes.findIndex((h) => h === null);
        if (missing >= 0)
          throw new Error(
            `the ledger records no subtree at level ${8 * request.level}, index ${request.index * 256 + from + missing}`
          );
        return Buffer.concat(hashes.map((h) => Buffer.from(h!, 'hex')));
      }
    );
  }

  async function bundle(request: Extract<TileRequest, { kind: 'entries' }>): Promise<Tile> {
    const width = await widthOf(request);
    return assemble(`entries/${request.index}`, width, bundlePrefixBytes, async (from) => {
      const seqs = indicesOf(request.index, from, width).map((i) => i + 1);
      const docs = await ledger.bySeqs(seqs);
      if (docs.length !== seqs.length)
        throw new Error(`entries missing from the ledger among seqs ${seqs[0]}-${seqs.at(-1)}`);
      const entries = docs.map((d) => ledgerLeafBytes(d, d.value_json));
      const large = entries.findIndex((e) => e.length > MAX_TLOG_ENTRY_BYTES);
      if (large >= 0)
        throw new AppError(
          'entry_too_large',
          `entry ${seqs[large]} is ${entries[large]!.length} bytes, more than an entry bundle holds (${MAX_TLOG_ENTRY_BYTES}); read it with GET /api/proof/inclusion?seq=${seqs[large]} (docs/transparency.md#entry-bytes)`,
          { seq: seqs[large], bytes: entries[large]!.length }
        );
      return entryBundle(entries);
    });
  }

  return {
    read(request: TileRequest): Promise<Tile> {
      return request.kind === 'entries' ? bundle(request) : hashTile(request);
    }
  };
}
