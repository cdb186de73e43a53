/**
 * bench:reads' ledger fill: Ledger.appendBulk from the bench process into the stack's database (the seeding fast
 * path bench:ledger fills with; it maintains whatever the ledger's reads rely on, the head records and tallies
 * included), with keys of the shapes real writers use and sharing prefixes:
 *   node.n<i>.metric.<name>          35 %: node metrics; ids unpadded, so node.n12 is a prefix of node.n123's keys
 *   mem.agent<i>.notes               15 %: truth-memory keys, each with many versions
 *   mem.hot.profile                   1 %: one memory key whose versions run through the whole ledger
 *   app.config[.v2[.beta[.<i>]]]     10 %: keys that are prefixes of one another
 *   deploy.svc<i>.<timestamp>        12 %: the recommended <system>.<event>.<timestamp>
 *   i18n.<名前|ключ|café|😀>.<i>        5 %: unicode keys (no HTTP write makes them: KEY_PATTERN is ASCII; a ledger
 *                                      imported or written before the key rule has them, and the reads must cope)
 *   hub.bench.tick.<i>                5 %: events (kind event), as the hub's own records are
 *   data.sensor<i>.reading.<i>       17 %: the rest
 * truths typed in turn with every truth type, values of ~150 bytes (some with unicode text). Besides those, what the
 * reads look for: `early.boot.<i>` (up to 50) at the start of the first fill only; at the end of each fill,
 * `late.s<size>.<i>` (up to 20); and a few execution-seed records (KERNEL.EVOLUTION.DIRECTIVE.<n>) through each fill,
 * each naming the leaf hash of the one before as GET /api/verify-seed checks (appended one at a time, so the
 * bench can read its leaf hash).
 * What the bench set up (credentials, the fill's counters) is kept in <data dir>/bench-reads.json, so a run on a
 * kept data dir (BENCH_DATA_DIR) continues the same ledger and the same fixtures.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Db } from 'mongodb';
import { TRUTH_TYPES, SEED_KEY_PREFIX } from '../../core/ledger/truth-record';
import type { AppendInput } from '../../store/ledger/append';
import { Ledger } from '../../store/ledger/ledger';
import { isDuplicateKey } from '../../store/mongo';

/** The keys and prefixes the reads look for (reads-catalog.ts). */
export const FILL_KEYS = {
  hotMemoryKey: 'mem.hot.profile',
  spreadPrefix: 'node.',
  nestedPrefix: 'app.config.v2',
  unicodePrefix: 'i18n.名前.',
  absentPrefix: 'absent.nothing.',
  earlyPrefix: 'early.',
  latePrefix: 'late.'
} as const;

const FILLER_DID = 'did:bench:filler';

/** What the bench set up and must find again on a kept data dir (secrets of a scratch bench stack only). */
export interface Fixtures {
  homologousToken: string;
  /** The token's principal id: the A2A tasks the bench reads are submitted under it. */
  homologousId: string;
  readerDid: string;
  writerDids: string[];
  /** The chat key whose usage GET /v1/usage reads. */
  chatKey: string;
  /** The one API key every bench node was stored with (their heartbeats send it). */
  nodeKey: string;
  instructionsNode: string;
  taskId: string;
  /** Seed records so far, and the leaf hash of the newest. */
  seeds: number;
  seedHead: string | null;
  /** Entries of the key families appended so far (the families continue across fills). */
  filled: number;
  early: number;
  /** The newest fill's late prefix, `late.s<size>.`, and how many keys it has (absent on older data dirs). */
  lastLate: string;
  lastLateCount?: number;
}

export const fixturesFile = (dataDir: string) => path.join(dataDir, 'bench-reads.json');

export function loadFixtures(dataDir: string): Partial<Fixtures> {
  const file = fixturesFile(dataDir);
  return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Fixtures>) : {};
}

export function saveFixtures(dataDir: string, fixtures: Partial<Fixtures>): void {
  fs.writeFileSync(fixturesFile(dataDir), JSON.stringify(fixtures, null, 2), { mode: 0o600 });
}

type BulkInput = Omit<AppendInput, 'idempotencyKey'>;
const METRICS = ['cpu', 'mem', 'gpu', 'latency', 'disk'];
const UNICODE = ['名前', 'ключ', 'café', '😀'];
const NOTES = ['ok', 'température 温度 🌡', 'nominal', 'Grüße, мир', 'steady'];

/** The g-th entry of the key families (deterministic: a kept ledger continues where it stopped). */
export function familyEntry(g: number): BulkInput {
  const r = g % 100;
  const mix = (g * 2654435761) % 4294967296;
  let key: string;
  let kind: 'truth' | 'event' = 'truth';
  if (r < 35) key = `node.n${mix % 1000}.metric.${METRICS[g % METRICS.length]}`;
  else if (r < 50) key = `mem.agent${mix % 200}.notes`;
  else if (r === 50) key = FILL_KEYS.hotMemoryKey;
  else if (r < 61)
    key = ['app.config', 'app.config.v2', 'app.config.v2.beta', `app.config.v2.beta.${mix % 50}`][g % 4]!;
  else if (r < 73) {
    const stamp = new Date(Date.UTC(2026, 0, 1) + g * 60_000).toISOString().replace(/[-:]|\.\d+/g, '');
    key = `deploy.svc${mix % 40}.${stamp}`;
  } else if (r < 78) key = `i18n.${UNICODE[g % UNICODE.length]}.${g}`;
  else if (r < 83) {
    key = `hub.bench.tick.${g}`;
    kind = 'event';
  } else key = `data.sensor${mix % 500}.reading.${g}`;
  return {
    kind,
    key,
    value: { n: g, v: mix % 1000, at: new Date(Date.UTC(2026, 0, 1) + g * 1000).toISOString(), note: NOTES[g % 5]! },
    truth_type: kind === 'event' ? 'config' : TRUTH_TYPES[g % TRUTH_TYPES.length]!,
    did: FILLER_DID
  };
}

/**
 * Appends `count` entries made by `make(i)` through appendBulk, in calls of at most 20,000 (each reads the tail
 * once). Should another writer's append land meanwhile (the stack's own events), appendBulk stops at the refused
 * insert: what of the call had landed is counted in the ledger and the rest appended again. Where the call began
 * comes from the head (this process's own acknowledged tail included), not from the newest entry: on FerretDB a sort
 * on `_id` reads the whole collection, minutes per call at a million entries. Only the rare refused call scans.
 */
async function appendPiece(ledger: Ledger, db: Db, count: number, make: (i: number) => BulkInput): Promise<number> {
  const entries = db.collection<{ _id: number; did?: string | null }>('ledger');
  const newestOfFiller = async () =>
    (await entries.find({ did: FILLER_DID }).sort({ _id: -1 }).limit(1).toArray())[0]?._id ?? 0;
  let done = 0;
  let last = 0;
  let before = (await ledger.head()).size;
  for (let refused = 0; done < count;) {
    const part = Math.min(20_000, count - done);
    const from = done;
    try {
      last = await ledger.appendBulk(
        (function* () {
          for (let i = 0; i < part; i++) yield make(from + i);
        })()
      );
      done += part;
      before = last;
    } catch (err) {
      if (!isDuplicateKey(err) || ++refused > 20) throw err;
      done += await entries.countDocuments({ _id: { $gt: before }, did: FILLER_DID });
      const newest = await newestOfFiller();
      if (done >= count) last = newest;
      before = Math.max(before, newest);
      console.log(`  the fill met another writer's append after ${before}: continuing from ${done}/${count}`);
    }
  }
  return last;
}

/**
 * How many of the first `filled` family entries have a key starting with each prefix, each counted up to `cap`
 * (the reads expect at most 200): the families are deterministic, so the reads' expectations need no scan of the
 * ledger (a regex count reads the whole collection on FerretDB). Nothing else writes those prefixes.
 */
export function familyPrefixCounts(filled: number, prefixes: readonly string[], cap = 1000): number[] {
  const counts = prefixes.map(() => 0);
  for (let g = 0; g < filled && counts.some((c) => c < cap); g++) {
    const { key } = familyEntry(g);
    prefixes.forEach((prefix, j) => {
      if (counts[j]! < cap && key.startsWith(prefix)) counts[j]!++;
    });
  }
  return counts;
}

/**
 * Fills the ledger up to `target` entries (nothing when it holds that many already): the early keys on the first
 * fill, the key families with seed records between them, the late keys last. Returns what it appended and how long
 * it took, or null.
 */
export async function fillLedger(
  ledger: Ledger,
  db: Db,
  target: number,
  fixtures: Fixtures,
  save: () => void
): Promise<{ added: number; seconds: number } | null> {
  const start = (await ledger.head()).size;
  const missing = target - start;
  if (missing <= 0) return null;
  const t0 = Date.now();
  const early = fixtures.early === 0 ? Math.min(50, Math.max(1, Math.floor(missing / 20))) : 0;
  const late = Math.min(20, Math.max(1, Math.floor(missing / 20)));
  const seeds = missing >= 1000 ? 3 : 1;
  const body = Math.max(0, missing - early - late - seeds);
  if (early > 0) {
    await appendPiece(ledger, db, early, (i) => ({
      kind: 'truth',
      key: `${FILL_KEYS.earlyPrefix}boot.${i}`,
      value: { i, stage: 'boot' },
      truth_type: 'config',
      did: FILLER_DID
    }));
    fixtures.early = early;
    save();
  }
  let appended = 0;
  for (let part = 0; part <= seeds; part++) {
    const size = Math.floor(body / (seeds + 1)) + (part === seeds ? body % (seeds + 1) : 0);
    if (size > 0) {
      const from = fixtures.filled;
      await appendPiece(ledger, db, size, (i) => {
        if (missing >= 200_000 && (appended + i) % 100_000 === 0 && appended + i > 0)
          console.log(`  filling: ${appended + i}/${body} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
        return familyEntry(from + i);
      });
      appended += size;
      fixtures.filled = from + size;
      save();
    }
    if (part < seeds) await appendSeed(ledger, db, fixtures, save);
  }
  fixtures.lastLate = `${FILL_KEYS.latePrefix}s${target}.`;
  fixtures.lastLateCount = late;
  await appendPiece(ledger, db, late, (i) => ({
    kind: 'truth',
    key: `${fixtures.lastLate}${i}`,
    value: { i, stage: 'late' },
    truth_type: 'data',
    did: FILLER_DID
  }));
  save();
  await ledger.headPublished();
  return { added: (await ledger.head()).size - start, seconds: (Date.now() - t0) / 1000 };
}

/** One execution-seed record naming the leaf hash of the one before (null for the first), and its own leaf hash. */
async function appendSeed(ledger: Ledger, db: Db, fixtures: Fixtures, save: () => void): Promise<void> {
  const n = fixtures.seeds + 1;
  const seq = await appendPiece(ledger, db, 1, () => ({
    kind: 'truth',
    key: `${SEED_KEY_PREFIX}${n}`,
    value: { directive: `evolve step ${n}`, prev_seed_hash: fixtures.seedHead },
    truth_type: 'protocol',
    did: FILLER_DID
  }));
  const entry = await ledger.get(seq);
  if (!entry || entry.key !== `${SEED_KEY_PREFIX}${n}`) throw new Error(`seed record ${n} is not at seq ${seq}`);
  fixtures.seeds = n;
  fixtures.seedHead = entry.leaf_hash;
  save();
}
