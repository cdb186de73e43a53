/**
 * A key's history numbers each version by how many versions of the key are at or before it, also while new versions
 * are written beside the read (store/memory/memory.ts): the numbers of one version never differ between two reads.
 */
import { Ledger } from '../../../store/ledger/ledger';
import { MemoryStore } from '../../../store/memory/memory';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('memory_history');

it('numbers the versions of a page exactly while versions are written beside the read', async () => {
  const ledger = new Ledger(testDb.db);
  const memory = new MemoryStore(testDb.db);
  const key = 'memory.history.racing';
  const write = (i: number) => ledger.append({ kind: 'truth', key, value: { i }, truth_type: 'data' });
  for (let i = 0; i < 10; i++) await write(i);
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
});
