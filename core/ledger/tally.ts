/**
 * The ledger's running tally: how many entries of each category the ledger holds up to and including an entry.
 * Like the Merkle frontier, every entry carries the tally after it and every head record the tally at its size, so
 * `GET /api/status-data/assets` reads one head record instead of grouping the whole ledger (seconds at a million
 * entries). Categories: `event` for the hub's events; for truths their type (TRUTH_TYPES), `untyped` without one,
 * and `other` for a type outside the list (the keys stay plain words: FerretDB refuses field names with `.` or `$`).
 * Only categories that occurred are kept.
 */
import type { LedgerEntryKind, LedgerTally } from './ledger-entry';
import { TRUTH_TYPES } from './truth-record';

export type { LedgerTally };

const KNOWN_TYPES: ReadonlySet<string> = new Set(TRUTH_TYPES);

export function tallyCategory(kind: LedgerEntryKind, truthType: string | null): string {
  if (kind === 'event') return 'event';
  if (truthType === null) return 'untyped';
  return KNOWN_TYPES.has(truthType) ? truthType : 'other';
}

/** The tally after one more entry of `category` (a new object: tallies already stored are never changed). */
export function addToTally(tally: LedgerTally, category: string): LedgerTally {
  return { ...tally, [category]: (tally[category] ?? 0) + 1 };
}

/** Whether two tallies count the same (categories at zero count as absent). */
export function talliesEqual(a: LedgerTally, b: LedgerTally): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if ((a[k] ?? 0) !== (b[k] ?? 0)) return false;
  return true;
}

/** The assets view of a tally: truths by type (every type listed, `other` only when some exist) and hub records. */
export function assetsFromTally(tally: LedgerTally): { truths_by_type: Record<string, number>; hub_records: number } {
  const truths: Record<string, number> = Object.fromEntries([...TRUTH_TYPES, 'untyped'].map((t) => [t, tally[t] ?? 0]));
  if (tally.other) truths.other = tally.other;
  return { truths_by_type: truths, hub_records: tally.event ?? 0 };
}
