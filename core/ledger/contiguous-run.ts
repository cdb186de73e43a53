/**
 * Finding the end of a contiguous run of numbered records (1, 2, …, k all present, k + 1 absent) with point
 * lookups only: probe 1, 2, 4, … ahead of a known point, then binary-search the gap, O(log distance) lookups.
 * Used where only `_id` lookups are cheap (FerretDB scans for anything else): the ledger's newest seq, the next
 * free quota slot.
 */

/**
 * The last present number of the run, starting from `from` (0, or a number known to be present), probing no
 * number above `max`: returns at most `max`.
 */
export async function lastOfRun(
  from: number,
  isPresent: (n: number) => Promise<boolean>,
  max = Number.MAX_SAFE_INTEGER
): Promise<number> {
  let low = from; // present (or 0)
  let step = 1;
  let high = Math.min(from + step, max + 1); // candidate; max + 1 counts as absent without a lookup
  while (high <= max && (await isPresent(high))) {
    low = high;
    step *= 2;
    high = Math.min(low + step, max + 1);
  }
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (await isPresent(mid)) low = mid;
    else high = mid;
  }
  return low;
}
