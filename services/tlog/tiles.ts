/**
 * GET /tlog/tile/…: C2SP tlog-tiles computed from the hashes the ledger stores (core/tlog/tiles.ts for the paths
 * and layout). A hash tile of level L is 256^L-leaf subtree hashes, each recorded by the entry completing it; an
 * entry bundle is the entries' canonical bytes. Every read is a set of `_id` lookups (no range, sort or $in: those
 * read the whole ledger on FerretDB). A tile the tree of the current head does not hold yet is 404; a full tile
 * never changes, a partial one only until it fills.
 */
import { AppError } from '../../core/errors';
import { ledgerLeafBytes } from '../../core/ledger/ledger-entry';
import {
  entryBundle,
  MAX_TLOG_ENTRY_BYTES,
  TILE_WIDTH,
  tilePath,
  TileRequest,
  tileWidthInTree
} from '../../core/tlog/tiles';
import type { Ledger } from '../../store/ledger/ledger';

export interface Tile {
  bytes: Buffer;
  /** True for a full tile (256 wide): immutable. */
  full: boolean;
}

export function createTlogTiles(ledger: Ledger) {
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

  const indicesOf = (index: number, width: number) => Array.from({ length: width }, (_, i) => index * TILE_WIDTH + i);

  async function hashTile(request: Extract<TileRequest, { kind: 'hashes' }>): Promise<Tile> {
    const width = await widthOf(request);
    const hashes = await ledger.subtreeHashes(8 * request.level, indicesOf(request.index, width));
    const missing = hashes.findIndex((h) => h === null);
    if (missing >= 0)
      throw new Error(
        `the ledger records no subtree at level ${8 * request.level}, index ${request.index * 256 + missing}`
      );
    return { bytes: Buffer.concat(hashes.map((h) => Buffer.from(h!, 'hex'))), full: width === TILE_WIDTH };
  }

  async function bundle(request: Extract<TileRequest, { kind: 'entries' }>): Promise<Tile> {
    const width = await widthOf(request);
    const seqs = indicesOf(request.index, width).map((i) => i + 1);
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
    return { bytes: entryBundle(entries), full: width === TILE_WIDTH };
  }

  return {
    read(request: TileRequest): Promise<Tile> {
      return request.kind === 'entries' ? bundle(request) : hashTile(request);
    }
  };
}
