/** Daily quotas count per UTC day: when the next one starts, as a Retry-After. Pure: safe in the workflow sandbox. */

/** Seconds until the next UTC midnight (at least 1), when the daily quotas start again. */
export function secondsUntilUtcMidnight(now = new Date()): number {
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((midnight - now.getTime()) / 1000));
}
