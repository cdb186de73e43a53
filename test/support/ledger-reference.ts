/**
 * A brute-force model of the ledger's read paths (store/ledger/ledger.ts: findByKeyPrefix, latest, after, scan, get;
 * store/memory/memory.ts: a key's versions), computed in plain JS over every entry of a ledger, for tests that compare
 * the real reads with it; the comparison, whose failure says what differs; and a seeded PRNG to build random ledgers.
 *
 * Strings reach the database as UTF-8, as the driver encodes them: a lone UTF-16 surrogate (half of an astral
 * character) becomes U+FFFD, in a key written and in a prefix or key read alike (wellFormed). The model matches
 * prefixes and keys in that form; for every well-formed string it is plain `startsWith` / `===` on UTF-16 code units,
 * case-sensitive, without normalisation, with no character special.
 */
import { isDeepStrictEqual } from 'node:util';
import type { LedgerEntryDocument, LedgerEntryKind } from '../../core/ledger/ledger-entry';

// ---- seeded PRNG ----

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** An integer in [min, max]. */
  between(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
  /** A new array: `items` in random order. */
  shuffled<T>(items: readonly T[]): T[];
}

/** A 32-bit hash of a seed and labels, so each part of a test draws from a sequence of its own. */
export function seedFor(seed: number, ...labels: string[]): number {
  let h = seed >>> 0;
  for (const label of labels)
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x9e3779b1) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** sfc32, seeded through splitmix32: the same seed gives the same sequence on every machine. */
export function seededRng(seed: number): Rng {
  let s = seed >>> 0;
  const splitmix = () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  let [a, b, c, d] = [splitmix(), splitmix(), splitmix(), splitmix()];
  const next = () => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) >>> 0;
    return t / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return {
    next,
    int,
    between: (min, max) => min + int(max - min + 1),
    pick: (items) => {
      if (items.length === 0) throw new Error('pick from an empty list');
      return items[int(items.length)]!;
    },
    chance: (p) => next() < p,
    shuffled: (items) => {
      const out = [...items];
      for (let i = out.length - 1; i > 0; i--) {
        const j = int(i + 1);
        [out[i], out[j]] = [out[j]!, out[i]!];
      }
      return out;
    }
  };
}

// ---- strings as the database sees them ----

/** The string as it reaches the database (UTF-8): each lone surrogate replaced by U+FFFD (String#toWellFormed). */
export function wellFormed(s: string): string {
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

export function keyHasPrefix(key: string, prefix: string): boolean {
  return key.startsWith(wellFormed(prefix));
}

/** The prefixes of `s` that end on a code point boundary (never half of a surrogate pair), '' and `s` included. */
export function codePointPrefixes(s: string): string[] {
  const out = [''];
  let at = 0;
  for (const ch of s) {
    at += ch.length;
    out.push(s.slice(0, at));
  }
  return out;
}

// ---- the model ----

export interface LatestFilter {
  truthTypes?: string[];
  kind?: LedgerEntryKind;
}

export interface ModelVersion {
  version: number;
  entry: LedgerEntryDocument;
}

/** The answers the read paths should give, from every entry of the ledger. */
export class ReferenceLedger {
  readonly entries: readonly LedgerEntryDocument[];
  private readonly versionsByKey = new Map<string, LedgerEntryDocument[]>();

  /** `entries`: every entry, in any order (a plain find({})); they must be seqs 1..n without a gap. */
  constructor(entries: readonly LedgerEntryDocument[]) {
    this.entries = [...entries].sort((a, b) => a.seq - b.seq);
    this.entries.forEach((e, i) => {
      if (e.seq !== i + 1 || e._id !== e.seq)
        throw new Error(`reference: entry ${i + 1} has seq ${e.seq}, _id ${e._id}`);
      if (e.kind !== 'truth') return;
      const versions = this.versionsByKey.get(e.key) ?? [];
      versions.push(e);
      this.versionsByKey.set(e.key, versions);
    });
  }

  get size(): number {
    return this.entries.length;
  }

  /** The entries with seq ≤ `size` (the ledger as it was then). */
  upTo(size: number): ReferenceLedger {
    return new ReferenceLedger(this.entries.slice(0, Math.max(0, size)));
  }

  distinctKeys(): string[] {
    return [...new Set(this.entries.map((e) => e.key))];
  }

  get(seq: number): LedgerEntryDocument | null {
    return Number.isInteger(seq) ? (this.entries[seq - 1] ?? null) : null;
  }

  scan(): LedgerEntryDocument[] {
    return [...this.entries];
  }

  /** Entries whose key starts with `prefix` ('' : every entry), oldest first, at most `limit`. */
  findByKeyPrefix(prefix: string, limit: number): LedgerEntryDocument[] {
    return this.entries.filter((e) => keyHasPrefix(e.key, prefix)).slice(0, limit);
  }

  /** Newest first, at most `limit`: entries of `kind` (when given) whose truth_type is in `truthTypes` (when given). */
  latest(limit: number, filter: LatestFilter = {}): LedgerEntryDocument[] {
    const out: LedgerEntryDocument[] = [];
    for (let i = this.entries.length - 1; i >= 0 && out.length < limit; i--) {
      const e = this.entries[i]!;
      if (matchesLatestFilter(e, filter)) out.push(e);
    }
    return out;
  }

  /** Entries with seq > `after`, oldest first, at most `limit`, with the key prefix when one is given (not ''). */
  after(after: number, limit: number, filter: { keyPrefix?: string } = {}): LedgerEntryDocument[] {
    return this.entries
      .filter((e) => e.seq > after && (!filter.keyPrefix || keyHasPrefix(e.key, filter.keyPrefix)))
      .slice(0, limit);
  }

  /** The key's versions: its truth entries, oldest first (the key compared as the database sees it). */
  versions(key: string): LedgerEntryDocument[] {
    return this.versionsByKey.get(wellFormed(key)) ?? [];
  }

  countVersions(key: string, throughSeq?: number): number {
    const versions = this.versions(key);
    return throughSeq === undefined ? versions.length : versions.filter((e) => e.seq <= throughSeq).length;
  }

  memoryLatest(key: string): { latest: ModelVersion; versions: number } | null {
    const versions = this.versions(key);
    if (versions.length === 0) return null;
    return { latest: { version: versions.length, entry: versions[versions.length - 1]! }, versions: versions.length };
  }

  history(key: string, limit: number, before?: number): { versions: number; page: ModelVersion[] } {
    const versions = this.versions(key);
    const older = before === undefined ? versions.length : versions.filter((e) => e.seq < before).length;
    const page: ModelVersion[] = [];
    for (let v = older; v >= 1 && page.length < limit; v--) page.push({ version: v, entry: versions[v - 1]! });
    return { versions: versions.length, page };
  }
}

export function matchesLatestFilter(e: LedgerEntryDocument, filter: LatestFilter): boolean {
  if (filter.kind && e.kind !== filter.kind) return false;
  if (filter.truthTypes && (e.truth_type === null || !filter.truthTypes.includes(e.truth_type))) return false;
  return true;
}

// ---- comparison ----

const show = (s: string) => {
  const json = JSON.stringify(s);
  return json.length > 40 ? `${json.slice(0, 37)}…"(${s.length})` : json;
};
const brief = (e: LedgerEntryDocument | null | undefined) => (e ? `${e.seq}:${show(e.key)}` : String(e));
const seqList = (xs: readonly (LedgerEntryDocument | null)[]) => {
  const seqs = xs.map((e) => (e ? e.seq : 'null'));
  return seqs.length > 30 ? `[${seqs.slice(0, 15).join(',')} … ${seqs.slice(-10).join(',')}]` : `[${seqs.join(',')}]`;
};

/** The fields of two entries that differ. */
function differingFields(a: LedgerEntryDocument, b: LedgerEntryDocument): string[] {
  const fields = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...fields].filter(
    (f) => !isDeepStrictEqual(a[f as keyof LedgerEntryDocument], b[f as keyof LedgerEntryDocument])
  );
}

/**
 * Throws unless `actual` holds exactly the entries of `expected`, whole documents, in the same order. The message
 * starts with `context` (which says the seed and the call) and says where the lists first differ.
 */
export function expectSameEntries(
  actual: readonly (LedgerEntryDocument | null)[],
  expected: readonly (LedgerEntryDocument | null)[],
  context: string
): void {
  const n = Math.max(actual.length, expected.length);
  for (let i = 0; i < n; i++) {
    const [a, b] = [actual[i], expected[i]];
    if (isDeepStrictEqual(a, b)) continue;
    const detail =
      a && b && a.seq === b.seq
        ? `entry ${a.seq} differs in ${differingFields(a, b).join(', ')}`
        : `got ${brief(a)}, want ${brief(b)}`;
    throw new Error(
      `${context}\n  ${actual.length} entries ${seqList(actual)}, want ${expected.length} ${seqList(expected)}` +
        `\n  first difference at index ${i}: ${detail}`
    );
  }
}

/** Throws unless the two memory answers are equal (version numbers and whole entries). */
export function expectSameVersions(
  actual: { versions: number; page: ModelVersion[] },
  expected: { versions: number; page: ModelVersion[] },
  context: string
): void {
  if (actual.versions !== expected.versions)
    throw new Error(`${context}\n  versions ${actual.versions}, want ${expected.versions}`);
  const numbers = (p: ModelVersion[]) => p.map((v) => `v${v.version}@${v.entry.seq}`).join(',');
  if (numbers(actual.page) !== numbers(expected.page))
    throw new Error(`${context}\n  page [${numbers(actual.page)}], want [${numbers(expected.page)}]`);
  expectSameEntries(
    actual.page.map((v) => v.entry),
    expected.page.map((v) => v.entry),
    context
  );
}

/** Throws `${context}: ${message}` unless `ok`. */
export function check(ok: boolean, context: string, message: string): void {
  if (!ok) throw new Error(`${context}\n  ${message}`);
}
