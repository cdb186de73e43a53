/**
 * C2SP tlog-tiles (c2sp.org/tlog-tiles) over the ledger's Merkle tree: tile paths, which tiles a tree of a size has,
 * and entry bundles. Tile height is 8: hash i of tile N at level L is the Merkle hash of the perfect subtree of
 * 256^L leaves at index N·256 + i; a level-0 tile holds leaf hashes. An entry of a bundle is the ledger entry's
 * canonical bytes (core/ledger/ledger-entry.ts ledgerLeafBytes), so SHA-256(0x00 || bytes) is its leaf hash.
 * Pure code (no I/O).
 */
import { AppError } from '../errors';
import { ledgerLeafBytes, LedgerLeafFields } from '../ledger/ledger-entry';

export const TILE_WIDTH = 256;
/** A bundle's entries carry a big-endian uint16 length: the largest entry it can hold. */
export const MAX_TLOG_ENTRY_BYTES = 65_535;
/** Levels the tree can reach below 2^53 leaves (256^7 > 2^53). */
const MAX_USEFUL_LEVEL = 6;

export type TileRequest =
  | { kind: 'hashes'; level: number; index: number; width: number | null }
  | { kind: 'entries'; index: number; width: number | null };

const bad = (path: string, why: string) =>
  new AppError('invalid_request', `tile path "${path}": ${why}`, {
    fields: [{ field: 'params.path', message: why }]
  });

/**
 * Parses what follows `tile/`: `<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]`, with N in 3-digit elements, all but the
 * last prefixed with `x`. Anything else is a 400 naming the rule broken; a well-formed path past the tree is the
 * caller's 404.
 */
export function parseTilePath(path: string): TileRequest {
  const parts = path.split('/');
  if (parts.length > 16) throw bad(path, 'too many path elements');
  const head = parts.shift();
  let width: number | null = null;
  if (parts.length >= 2 && parts[parts.length - 2]!.endsWith('.p')) {
    const w = parts.pop()!;
    if (!/^[1-9]\d{0,2}$/.test(w) || Number(w) > 255) throw bad(path, 'a partial width is 1 to 255, no leading zero');
    width = Number(w);
    parts[parts.length - 1] = parts[parts.length - 1]!.slice(0, -2);
  }
  if (parts.length === 0) throw bad(path, 'no tile index');
  let index = 0;
  parts.forEach((part, i) => {
    const last = i === parts.length - 1;
    if (!(last ? /^\d{3}$/ : /^x\d{3}$/).test(part))
      throw bad(path, 'the index is 3-digit elements, all but the last prefixed with x (1234067: x001/x234/067)');
    index = index * 1000 + Number(last ? part : part.slice(1));
  });
  if (!Number.isSafeInteger(index)) throw bad(path, 'the index is too large');
  if (head === 'entries') return { kind: 'entries', index, width };
  if (head === undefined || !/^(0|[1-9]\d?)$/.test(head) || Number(head) > 63)
    throw bad(path, 'the level is "entries" or 0 to 63, no leading zero');
  return { kind: 'hashes', level: Number(head), index, width };
}

/** The path of a tile under `tile/` (the inverse of parseTilePath). */
export function tilePath(level: number | 'entries', index: number, width: number | null = null): string {
  const digits = String(index).padStart(3, '0');
  const groups: string[] = [];
  for (let end = digits.length; end > 0; end -= 3) groups.unshift(digits.slice(Math.max(0, end - 3), end));
  if (groups[0]!.length < 3) groups[0] = groups[0]!.padStart(3, '0');
  const n = groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
  return `${level}/${n}${width !== null ? `.p/${width}` : ''}`;
}

/**
 * How many hashes tile `index` at `level` has in a tree of `size` leaves: 256 for a full tile, 1-255 for the
 * partial one, 0 when it does not exist yet. Entry bundles are level 0.
 */
export function tileWidthInTree(level: number, index: number, size: number): number {
  if (level > MAX_USEFUL_LEVEL) return 0;
  const subtrees = Math.floor(size / TILE_WIDTH ** level);
  return Math.max(0, Math.min(TILE_WIDTH, subtrees - index * TILE_WIDTH));
}

/** An entry bundle: each entry as a big-endian uint16 length and its bytes. */
/** Where each entry of an entry bundle ends (byte offsets into it), for at most its first `count` entries. */
export function entryBundleEnds(bundle: Buffer, count = Infinity): number[] {
  const ends: number[] = [];
  for (let at = 0; at < bundle.length && ends.length < count;) {
    at += 2 + bundle.readUInt16BE(at);
    ends.push(at);
  }
  return ends;
}

export function entryBundle(entries: Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const bytes of entries) {
    if (bytes.length > MAX_TLOG_ENTRY_BYTES) throw new RangeError(`an entry of ${bytes.length} bytes`);
    const length = Buffer.alloc(2);
    length.writeUInt16BE(bytes.length);
    parts.push(length, bytes);
  }
  return Buffer.concat(parts);
}

/**
 * The most bytes an entry with these fields and value can take once appended, whatever its seq and time: the leaf
 * bytes with the longest seq (2^53 - 1) and an event id as long as any the ledger makes (store/ledger/append.ts
 * newEventId, 27 characters).
 */
export function leafBytesBound(
  fields: Pick<LedgerLeafFields, 'kind' | 'key' | 'truth_type' | 'did'>,
  valueJson: string
): number {
  return ledgerLeafBytes(
    {
      ...fields,
      seq: Number.MAX_SAFE_INTEGER,
      event_id: 'truth-'.padEnd(27, 'z'),
      created_at: new Date(0).toISOString()
    },
    valueJson
  ).length;
}

/**
 * Refuses (413) a write whose entry could not go into an entry bundle (docs/transparency.md#entry-bytes): every
 * write route that takes a caller's value checks it before anything is spent or started.
 */
export function assertFitsEntryBundle(
  fields: Pick<LedgerLeafFields, 'kind' | 'key' | 'truth_type' | 'did'>,
  valueJson: string
): void {
  const bound = leafBytesBound(fields, valueJson);
  if (bound > MAX_TLOG_ENTRY_BYTES)
    throw new AppError(
      'payload_too_large',
      `the entry would take up to ${bound} bytes with its key, DID and metadata; a transparency-log entry holds at most ${MAX_TLOG_ENTRY_BYTES} (docs/transparency.md#entry-bytes)`,
      { limit: MAX_TLOG_ENTRY_BYTES }
    );
}
