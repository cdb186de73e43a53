/**
 * The transparency log's tiles kept once served (services/tlog/tiles.ts, store/tlog/tiles.ts) against the embedded
 * FerretDB: every tile read through the cache has the bytes computed from the ledger alone, whatever was kept before
 * (nothing, a shorter prefix, a longer one); a kept tile is served from the cache (shown by altering the ledger
 * underneath it), and a shorter write never replaces a longer prefix.
 */
import { ledgerLeafBytes } from '../../../core/ledger/ledger-entry';
import { entryBundle, parseTilePath } from '../../../core/tlog/tiles';
import { createTlogTiles } from '../../../services/tlog/tiles';
import { Ledger } from '../../../store/ledger/ledger';
import { TileCache, TLOG_TILES_COLLECTION } from '../../../store/tlog/tiles';
import pino from 'pino';
import { useStoreDb } from '../../support/store-db';

const store = useStoreDb('tlog_tiles');
const SIZE = 600;

let ledger: Ledger;
let tiles: ReturnType<typeof createTlogTiles>;
const read = async (path: string) => (await tiles.read(parseTilePath(path))).bytes;

/** The tile computed from the ledger alone: `width` items from `first` (a leaf index, counted from 0). */
async function fromLedger(kind: 'hashes' | 'entries', level: number, first: number, width: number) {
  const indices = Array.from({ length: width }, (_, i) => first + i);
  if (kind === 'hashes') {
    const hashes = await ledger.subtreeHashes(8 * level, indices);
    return Buffer.concat(hashes.map((h) => Buffer.from(h!, 'hex')));
  }
  const docs = await ledger.bySeqs(indices.map((i) => i + 1));
  return entryBundle(docs.map((d) => ledgerLeafBytes(d, d.value_json)));
}

beforeAll(async () => {
  ledger = new Ledger(store.db);
  await ledger.appendBulk(
    Array.from({ length: SIZE }, (_, i) => ({
      kind: 'truth' as const,
      key: `tiles.${i}`,
      value: { i, pad: 'x'.repeat(i % 7) },
      truth_type: 'data',
      did: 'did:example:tiles'
    }))
  );
  tiles = createTlogTiles({ ledger, cache: new TileCache(store.db), logger: pino({ level: 'silent' }) });
}, 60_000);

it('serves full and partial tiles with the bytes of the ledger, first read and kept alike', async () => {
  for (let round = 0; round < 2; round++) {
    expect(await read('0/001')).toEqual(await fromLedger('hashes', 0, 256, 256));
    expect(await read('entries/001')).toEqual(await fromLedger('entries', 0, 256, 256));
    expect(await read('0/002.p/50')).toEqual(await fromLedger('hashes', 0, 512, 50));
    expect(await read('entries/002.p/50')).toEqual(await fromLedger('entries', 0, 512, 50));
    expect(await read('1/000.p/2')).toEqual(await fromLedger('hashes', 1, 0, 2));
  }
  const kept = store.db.collection<{ _id: string; width: number }>(TLOG_TILES_COLLECTION);
  expect(await kept.findOne({ _id: '0/1' })).toMatchObject({ width: 256 });
  expect(await kept.findOne({ _id: 'entries/2' })).toMatchObject({ width: 50 });
});

it('grows a kept prefix with the items past it, and serves a shorter one as its slice', async () => {
  // entries/002 holds 50 entries from the first test: 80 reads 30 more, 20 is a slice of what is kept.
  expect(await read('entries/002.p/80')).toEqual(await fromLedger('entries', 0, 512, 80));
  expect(await read('0/002.p/88')).toEqual(await fromLedger('hashes', 0, 512, 88));
  expect(await read('entries/002.p/20')).toEqual(await fromLedger('entries', 0, 512, 20));
  expect(await read('0/002.p/7')).toEqual(await fromLedger('hashes', 0, 512, 7));
  const kept = store.db.collection<{ _id: string; width: number }>(TLOG_TILES_COLLECTION);
  // A shorter write never replaces the longer prefix.
  await new TileCache(store.db).put('entries/2', { width: 3, data: await fromLedger('entries', 0, 512, 3) });
  expect(await kept.findOne({ _id: 'entries/2' })).toMatchObject({ width: 80 });
  expect(await kept.findOne({ _id: '0/2' })).toMatchObject({ width: 88 });
});

it('serves a kept tile from what was kept, not from the ledger read again', async () => {
  const before = await read('0/001');
  // Alter a hash the ledger stores for a leaf of that tile: a tile computed again would carry it.
  await store.db
    .collection<{ _id: number; leaf_hash: string }>('ledger')
    .updateOne({ _id: 300 }, { $set: { leaf_hash: 'ff'.repeat(32) } });
  expect(await read('0/001')).toEqual(before);
  expect((await fromLedger('hashes', 0, 256, 256)).equals(before)).toBe(false);
});
