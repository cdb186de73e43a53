/**
 * A key's history numbers each version by how many versions of the key are at or before it, also while new versions
 * are written beside the read (store/memory/memory.ts): the numbers of one version never differ between two reads.
 * Both ways the store reads: by the ledger's `key` field (no key tree yet), and from the key tree's version chunks
 * with its indexer following the writes (some versions then read as the tail after the tree).
 */
import { Ledger } from '../../../store/ledger/ledger';
import { MemoryStore } from '../../../store/memory/memory';
import { useStoreDb } from '../../support/store-db';

const byKey = useStoreDb('memory_history');
const fromTree = useStoreDb('memory_history_tree');

it.each([
  ['by the key field (no key tree)', byKey, false],
  ['from the key tree, its indexer following', fromTree, true]
])('numbers the versions of a page exactly while versions are written beside the read: %s', async (_, testDb, tree) => {
  const ledger = new Ledger(testDb.db);
  const memory = new MemoryStore(testDb.db, ledger);
  const key = 'memory.history.racing';
  const write = (i: number) => ledger.append({ kind: 'truth', key, value: { i }, truth_type: 'data' });
  // Other keys' truths and an event of this key, which are no versions of it.
  await ledger.append({ kind: 'truth', key: `${key}.other`, value: { i: -1 }, truth_type: 'data' });
  await ledger.append({ kind: 'event', key, value: { i: -2 } });
  for (let i = 0; i < 10; i++) await write(i);
  const stopIndexer = tree ? ledger.keyTreeIndexer({ pollMs: 20 }).start() : () => {};
  try {
    /** seq → version, as every read has numbered it. */
    const numbered = new Map<number, number>();
    // Each read runs beside a write of the key.
    for (let i = 10; i < 60; i++) {
      const [{ versions, page }] = await Promise.all([memory.history(key, 5), write(i)]);
      expect(page.length).toBe(5);
      expect(versions).toBeGreaterThanOrEqual(page[0]!.version);
      page.forEach((v, j) => {
        expect(v.version).toBe(page[0]!.version - j);
        expect(numbered.get(v.entry.seq) ?? v.version).toBe(v.version);
        numbered.set(v.entry.seq, v.version);
      });
    }
    // Every number given is the version's place among the key's entries in seq order.
    const all = (await memory.history(key, 200)).page.reverse();
    expect(all.map((v) => v.version)).toEqual(all.map((_, i) => i + 1));
    for (const v of all) if (numbered.has(v.entry.seq)) expect(numbered.get(v.entry.seq)).toBe(v.version);
    // Pages by `before`, the latest and the counts agree with the whole history.
    const page = await memory.history(key, 7, all[30]!.entry.seq);
    expect(page.page.map((v) => v.version)).toEqual([30, 29, 28, 27, 26, 25, 24]);
    expect((await memory.latest(key))!.latest.entry.seq).toBe(all[59]!.entry.seq);
    expect(await memory.countVersions(key, all[19]!.entry.seq)).toBe(20);
    expect(await memory.latest(`${key}.none`)).toBeNull();
    if (tree) expect(await ledger.truthVersions(key)).not.toBeNull();
  } finally {
    stopIndexer();
  }
});
