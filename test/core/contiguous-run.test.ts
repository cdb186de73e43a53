import { lastOfRun } from '../../core/ledger/contiguous-run';

/** A run 1..k, with a count of the lookups made. */
function run(k: number) {
  const probes: number[] = [];
  return { probes, isPresent: async (n: number) => (probes.push(n), n >= 1 && n <= k) };
}

it('finds the end of the run from any known point, never probing above max', async () => {
  for (let k = 0; k <= 40; k++) {
    for (let from = 0; from <= k; from++) {
      for (const max of [from, from + 1, Math.floor((from + k) / 2), k, k + 1, 1000]) {
        if (max < from) continue;
        const r = run(k);
        expect(await lastOfRun(from, r.isPresent, max)).toBe(Math.min(k, max));
        expect(r.probes.every((n) => n > from && n <= max)).toBe(true);
      }
    }
  }
});

it('needs one lookup when nothing follows the known point, and O(log distance) otherwise', async () => {
  const none = run(500);
  expect(await lastOfRun(500, none.isPresent)).toBe(500);
  expect(none.probes).toEqual([501]);
  const far = run(100_000);
  expect(await lastOfRun(0, far.isPresent)).toBe(100_000);
  expect(far.probes.length).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(100_000)) + 2);
});
