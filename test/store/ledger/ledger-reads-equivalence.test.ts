/**
 * The ledger's read paths answer exactly what a brute-force reference computes over every entry
 * (test/support/ledger-reference.ts): Ledger.findByKeyPrefix, latest, after, scan and get, and MemoryStore.latest,
 * history and countVersions, compared as whole documents in order, on random ledgers against the embedded FerretDB.
 * The reference reads the ledger once with a plain find({}) and is itself checked against what was written.
 *
 * The ledgers are built through both write paths, mixed: group-committed appends (one to 64 at once, from one or two
 * processes, some with idempotency keys repeated) and the seeding fast path (appendBulk, in chunks of 7 to 1000). Keys
 * are chosen to trip a faster implementation: keys that are prefixes of one another (`a`, `ab`, `abc`, `ab.c`,
 * `ab.cd`), regex metacharacters (`a.b` beside `axb`, `a*` beside `aaa`, `(x)`, `[`, `\`), CJK, emoji, astral
 * characters, combining marks beside precomposed ones, U+FFFD, U+FFFF and private-use characters beside astral ones
 * (UTF-16 and UTF-8 order them differently), empty and white-space keys, keys of 255 and 256 characters, and a few
 * hot keys with many versions (as the memory gateway writes them), as truths and as events. Prefixes queried: a sample
 * of the code-point prefixes of the keys written (one character to the whole key), prefixes that match nothing, and
 * halves of surrogate pairs (see the test on them), with limits 1, 7, 50 and 200.
 *
 * Last, reads while writes continue: each read returns a consistent prefix of the ledger, never less than what was
 * acknowledged before it began.
 *
 * Each run draws a seed; LEDGER_READS_SEED=<seed> replays it, and every failure message begins with it.
 */
import { isDeepStrictEqual } from 'node:util';
import { randomInt } from 'node:crypto';
import type { Db } from 'mongodb';
import { canonicalJson } from '../../../core/ledger/canonical-json';
import type { LedgerEntryDocument, LedgerEntryKind } from '../../../core/ledger/ledger-entry';
import { PUBLIC_TRUTH_TYPES, SEED_KEY_PREFIX, TRUTH_TYPES } from '../../../core/ledger/truth-record';
import type { AppendInput } from '../../../store/ledger/append';
import { LEDGER_COLLECTION } from '../../../store/ledger/entries';
import { Ledger } from '../../../store/ledger/ledger';
import { MemoryStore } from '../../../store/memory/memory';
import {
  check,
  codePointPrefixes,
  expectSameEntries,
  expectSameVersions,
  LatestFilter,
  matchesLatestFilter,
  ReferenceLedger,
  Rng,
  seededRng,
  seedFor,
  wellFormed
} from '../../support/ledger-reference';
import { useStoreDb } from '../../support/store-db';

const SEED = process.env.LEDGER_READS_SEED ? Number(process.env.LEDGER_READS_SEED) : randomInt(2 ** 31);
const LIMITS = [1, 7, 50, 200];

// ---- keys ----

/** Keys that are prefixes of one another, and dotted keys as nodes write them. */
const SHARED_PREFIX_KEYS = ['a', 'ab', 'abc', 'abd', 'ab.c', 'ab.cd', 'ab.cde', 'abc.d', 'b', 'ba', 'Ab', 'AB', 'aB'];
const DOTTED_KEYS = [
  'ns.key',
  'ns.key.sub',
  'ns.keys',
  'ns.ke',
  'ns_other.k',
  'mysystem.deploy.20261120T101500Z',
  'mysystem.deploy.20261120T101501Z',
  'hub.node.state',
  'kernel.evolution.directive.1',
  'KERNEL.EVOLUTION.DIRECTIVE',
  `${SEED_KEY_PREFIX}1`,
  `${SEED_KEY_PREFIX}2`,
  `${SEED_KEY_PREFIX}10`,
  `${SEED_KEY_PREFIX}x.y`
];
/** Regex metacharacters, each beside a key its unescaped form would match. */
const METACHARACTER_KEYS = [
  'a.b',
  'axb',
  'a*',
  'aaa',
  'a+',
  'a?',
  'a|b',
  'a{2}',
  'aa',
  '(x)',
  'x',
  '(',
  ')',
  '[',
  '[a]',
  ']',
  '\\',
  '\\d',
  '\\\\',
  '1',
  '$',
  '$x',
  '^',
  '^x',
  'x$',
  '.',
  '..',
  '.*',
  '*',
  '+',
  '?x',
  '{1}',
  '-',
  '/x/',
  '#'
];
const UNICODE_KEYS = [
  '中',
  '中文',
  '中文.键',
  '中文.键值',
  '中文键',
  '😀',
  '😀😁',
  '😀.x',
  '😁',
  '𠀀',
  '𠀀𠀁',
  '\u00e9t\u00e9', // été, precomposed
  'e\u0301te\u0301', // été, with combining acute accents
  'e',
  'e\u0301',
  'e\u0301\u0301',
  '\u00c5',
  'A\u030a',
  'ﬁ',
  'fi',
  'İ',
  'i',
  'ß',
  'ss',
  '\uFFFD',
  '\uFFFDx',
  'p',
  'p\uFFFF',
  'p\uFFFE',
  'p\uE000',
  'p\uD7FF',
  'p😀',
  'p\u{10000}',
  'p\u{10FFFF}',
  'ＡＢ',
  '👨‍👩‍👧',
  '👨',
  '🇨🇳',
  'a\u200bb',
  'שלום.key'
];
// No NUL: PostgreSQL's jsonb refuses it (the routes refuse control characters in keys before that).
const EMPTYISH_KEYS = ['', ' ', '  ', '\t', '\n', 'a\n', 'a\nb', '\u00a0'];
const LONG_KEYS = [
  'L'.repeat(256),
  'L'.repeat(255),
  `${'L'.repeat(255)}M`,
  `${'L'.repeat(200)}.tail`,
  `long.${'x'.repeat(251)}`,
  '中'.repeat(256),
  '😀'.repeat(128),
  `${'中'.repeat(127)}😀`
];
/** Keys with many versions, written as truths and as events, as the memory gateway and the hub write them. */
const HOT_KEYS = ['mem.agent-1.notes', 'mem.agent-1.notes.v2', 'mem.agent-1', '记忆.笔记'];
const FIXED_KEYS = [
  ...SHARED_PREFIX_KEYS,
  ...DOTTED_KEYS,
  ...METACHARACTER_KEYS,
  ...UNICODE_KEYS,
  ...EMPTYISH_KEYS,
  ...LONG_KEYS
];
/** Pieces random keys are made of. */
const PIECES = ['a', 'b', 'ab', '.', '*', '(', ')', '[', '\\', '中', '😀', 'e\u0301', '\u00e9', '\uFFFD', '\uFFFF'];
const MORE_PIECES = ['𠀀', '-', '_', ':', '+', 'A', ' ', '\n', '$', '^', '|', '?', '{', '}', 'mem', 'ns.'];
/** Prefixes that match no key written. */
const NO_MATCH_PREFIXES = [
  'zzz',
  'a.c',
  'A*',
  '.x',
  '(y',
  '[b',
  '\\\\\\',
  '😂',
  '中文.键值x',
  'mem.agent-2',
  'L'.repeat(257),
  'ab.cdef',
  'KERNEL.EVOLUTION.DIRECTIVE.X',
  '\u{10FFFF}',
  'ｐ',
  'e\u0302'
];
/** Prefixes most likely to trip an implementation, read on the ledger that takes the corner cases. */
const TRICKY_PREFIXES = [
  'a',
  'ab',
  'ab.',
  'ab.c',
  'AB',
  'a.',
  'a*',
  'a{',
  '(',
  '[',
  '\\',
  '$',
  '^',
  '.',
  ' ',
  '\n',
  '\u0000',
  'e',
  'e\u0301',
  '\u00e9',
  '中',
  '中文.',
  '😀',
  '𠀀',
  '\uFFFD',
  'p',
  'p\uFFFF',
  'L'.repeat(255),
  '中'.repeat(200),
  SEED_KEY_PREFIX,
  'kernel.',
  'mem.agent-1'
];
const UNKNOWN_TRUTH_TYPES = ['secret', 'Data', 'DATA', 'custom-type', '', 'rule ', '数据'];
/** Filters of `latest`: the routes' (api/routes/ledger/read.ts) first, then others the signature allows. */
const LATEST_FILTERS: LatestFilter[] = [
  { truthTypes: PUBLIC_TRUTH_TYPES, kind: 'truth' },
  { kind: 'truth' },
  {},
  { kind: 'event' },
  { truthTypes: PUBLIC_TRUTH_TYPES },
  { truthTypes: ['secret', '', 'Data'] },
  { truthTypes: [] },
  { truthTypes: [...TRUTH_TYPES], kind: 'event' }
];
const ROUTE_FILTERS = 3;

const show = (v: unknown) => {
  const json = JSON.stringify(v) ?? 'undefined';
  return json.length > 48 ? `${json.slice(0, 40)}…(${json.length} chars)` : json;
};

/**
 * Draws the entries of a ledger: half of them with a fixed key, from a shuffled deck (each once before any repeats: a
 * ledger of 236 entries holds all 118), a quarter with a hot key.
 */
class EntryDrawer {
  private deck: string[] = [];
  private n = 0;
  private draws = 0;
  private retried: AppendInput[] = [];

  constructor(private readonly rng: Rng) {}

  key(): string {
    // Every other key comes from the deck, so that the fixed keys are all written early.
    if (this.draws++ % 2 === 0) {
      if (this.deck.length === 0) this.deck = this.rng.shuffled(FIXED_KEYS);
      return this.deck.pop()!;
    }
    const r = this.rng.next();
    if (r < 0.5) return this.rng.chance(0.6) ? HOT_KEYS[0]! : this.rng.pick(HOT_KEYS);
    if (r < 0.7) return `${SEED_KEY_PREFIX}${this.rng.int(40)}`;
    return this.composed();
  }

  /** A key made of random pieces. */
  composed(): string {
    const pieces = this.rng.between(1, 5);
    let key = '';
    for (let i = 0; i < pieces; i++) key += this.rng.pick(this.rng.chance(0.7) ? PIECES : MORE_PIECES);
    return key;
  }

  input(options: { idempotency?: boolean } = {}): AppendInput {
    const i = this.n++;
    // Some writes are retries: the first write's body under its Idempotency-Key, answered with the first entry and
    // writing nothing. A retry draws no key, so that every fixed key drawn is written.
    if (options.idempotency && this.retried.length > 0 && this.rng.chance(0.03))
      return { ...this.rng.pick(this.retried) };
    const kind: LedgerEntryKind = this.rng.chance(0.7) ? 'truth' : 'event';
    const t = this.rng.next();
    const truth_type = t < 0.55 ? this.rng.pick(TRUTH_TYPES) : t < 0.8 ? null : this.rng.pick(UNKNOWN_TRUTH_TYPES);
    const value: AppendInput['value'] = this.rng.chance(0.2)
      ? { i, text: this.composed(), nested: { r: this.rng.int(1000) } }
      : { i };
    const input: AppendInput = {
      kind,
      key: this.key(),
      value,
      truth_type,
      did: this.rng.pick([null, 'did:example:alice', 'did:example:bob'])
    };
    if (options.idempotency && this.rng.chance(0.07)) {
      input.idempotencyKey = `idem-${i}`;
      this.retried.push(input);
    }
    return input;
  }
}

/** Runs the tasks, at most `concurrency` at once; rejects with the first failure. */
async function runAll(tasks: (() => Promise<void>)[], concurrency = 3): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]!();
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Every entry of the ledger with one plain find({}) (the reference sorts them by seq). */
async function readReference(db: Db): Promise<ReferenceLedger> {
  return new ReferenceLedger(await db.collection<LedgerEntryDocument>(LEDGER_COLLECTION).find({}).toArray());
}

interface Written {
  input: AppendInput;
  path: 'append' | 'bulk';
}

/**
 * Builds a ledger of about `target` entries through both write paths, mixed in random segments. Returns what was
 * written at each seq (appends answered as duplicates wrote nothing).
 */
async function buildLedger(db: Db, rng: Rng, target: number): Promise<Map<number, Written>> {
  const [primary, secondary] = [new Ledger(db), new Ledger(db)];
  const drawer = new EntryDrawer(rng);
  const written = new Map<number, Written>();
  let size = 0;
  let appended = false;
  while (size < target) {
    const remaining = target - size;
    // The first batch by appendBulk and the second by append, so that every ledger is written both ways.
    if (size === 0 || (appended && rng.chance(0.35))) {
      const most = size === 0 ? Math.ceil(target / 3) : Math.min(remaining, 250);
      const inputs = Array.from({ length: rng.between(1, most) }, () => drawer.input());
      await Promise.all([primary.headPublished(), secondary.headPublished()]);
      const newSize = await primary.appendBulk(inputs, rng.pick([7, 64, 1000]));
      if (newSize !== size + inputs.length)
        throw new Error(`appendBulk left size ${newSize}, want ${size + inputs.length}`);
      inputs.forEach((input, i) => written.set(size + 1 + i, { input, path: 'bulk' }));
      size = newSize;
    } else {
      appended = true;
      const count = rng.between(1, Math.min(remaining, 150));
      const twoWriters = rng.chance(0.3);
      const inputs = Array.from({ length: count }, () => ({
        input: drawer.input({ idempotency: true }),
        ledger: twoWriters && rng.chance(0.5) ? secondary : primary
      }));
      const results: { input: AppendInput; seq: number; duplicate: boolean }[] = [];
      await runAll(
        inputs.map(({ input, ledger }) => async () => {
          const { entry, duplicate } = await ledger.append(input);
          results.push({ input, seq: entry.seq, duplicate });
        }),
        rng.pick([1, 4, 16, 64])
      );
      for (const r of results) if (!r.duplicate) written.set(r.seq, { input: r.input, path: 'append' });
      size += results.filter((r) => !r.duplicate).length;
    }
  }
  await Promise.all([primary.headPublished(), secondary.headPublished()]);
  return written;
}

/** The reference holds exactly what was written, at the seqs the writes answered. */
function checkReference(ref: ReferenceLedger, written: Map<number, Written>, context: string): void {
  check(ref.size === written.size, context, `the ledger holds ${ref.size} entries, ${written.size} were written`);
  for (const e of ref.entries) {
    const w = written.get(e.seq);
    check(w !== undefined, context, `entry ${e.seq} was not written`);
    const { input } = w!;
    const same =
      e.key === wellFormed(input.key) &&
      e.kind === input.kind &&
      e.truth_type === (input.truth_type ?? null) &&
      e.did === (input.did ?? null) &&
      e.value_json === canonicalJson(input.value);
    check(same, context, `entry ${e.seq} is not what was written there (${show(e.key)}, ${show(input.key)})`);
  }
  const paths = new Set([...written.values()].map((w) => w.path));
  check(paths.size === 2, context, `written through ${[...paths].join(', ')} only`);
}

/**
 * `count` prefixes to query, drawn from the code-point prefixes of every key (a few of a long key's) and prefixes that
 * match nothing: half of them from the likeliest to trip an implementation (a key's first one or two characters, the
 * whole key, a key and one more character, and the prefixes that match nothing), half from the rest.
 */
function samplePrefixes(rng: Rng, keys: string[], count: number): string[] {
  const first = new Set<string>(NO_MATCH_PREFIXES);
  const rest = new Set<string>();
  for (const key of keys) {
    const all = codePointPrefixes(key).slice(1); // not ''
    all.forEach((p, i) => {
      if (i < 2 || i === all.length - 1) first.add(p);
      else if (all.length <= 24 || i % 10 === 0) rest.add(p);
    });
    first.add(`${key}Ω`);
  }
  for (const p of first) rest.delete(p);
  const [a, b] = [rng.shuffled([...first]), rng.shuffled([...rest])];
  const out: string[] = [];
  while (out.length < count && (a.length > 0 || b.length > 0)) {
    const from = (out.length % 2 === 0 && a.length > 0) || b.length === 0 ? a : b;
    out.push(from.pop()!);
  }
  return out;
}

// ---- random ledgers, whole ----

interface Plan {
  name: string;
  entries: number;
  /** findByKeyPrefix calls (besides a few fixed ones). */
  prefixQueries: number;
  /** after calls (besides a few fixed ones and the cursor walks). */
  afterQueries: number;
  /** How many of the fixed points `after` is read from (0, 1, the middle, the end and around it, beyond it). */
  afterPoints: number;
  /** The limit of the cursor walk through the whole ledger (and a quarter of it through the seed keys). */
  walkLimit: number;
  /** The batch sizes of scan() (undefined: its default). */
  scanBatches: (number | undefined)[];
  getQueries: number;
  /** Limits of latest with the routes' filters. */
  latestLimits: number[];
  /** How many other filters are read (one random limit each). */
  otherFilters: number;
  /** Keys whose versions are read: the first `hotKeys` hot keys, `randomKeys` others and a few never written. */
  hotKeys: number;
  randomKeys: number;
  /** countVersions and history calls per key. */
  memoryCalls: number;
  /** The page size of paging back through the hottest key; null: not paged. */
  historyPage: number | null;
  /**
   * Whether this ledger also takes the corner cases: every fixed key written, the tricky prefixes read by
   * findByKeyPrefix and by after, and the prefixes that split a surrogate pair.
   */
  corners: boolean;
}

/**
 * Small ledgers take many queries, large ones a few: each read scans the collection on FerretDB/SQLite (about 0.3 ms
 * per entry with two cores), and the comparisons cost nothing beside it.
 */
const PLANS: Plan[] = [
  {
    name: 'small',
    entries: 260,
    prefixQueries: 100,
    afterQueries: 15,
    afterPoints: 7,
    walkLimit: 7,
    scanBatches: [undefined, 7],
    getQueries: 6,
    latestLimits: LIMITS,
    otherFilters: LATEST_FILTERS.length - ROUTE_FILTERS,
    hotKeys: 2,
    randomKeys: 4,
    memoryCalls: 2,
    historyPage: 7,
    corners: true
  },
  {
    name: 'medium',
    entries: 600,
    prefixQueries: 36,
    afterQueries: 6,
    afterPoints: 4,
    walkLimit: 50,
    scanBatches: [undefined],
    getQueries: 2,
    latestLimits: [1, 50],
    otherFilters: 3,
    hotKeys: 1,
    randomKeys: 1,
    memoryCalls: 1,
    historyPage: null,
    corners: false
  },
  {
    name: 'large',
    entries: 1500,
    prefixQueries: 10,
    afterQueries: 2,
    afterPoints: 3,
    walkLimit: 200,
    scanBatches: [undefined],
    getQueries: 2,
    latestLimits: [200],
    otherFilters: 2,
    hotKeys: 1,
    randomKeys: 0,
    memoryCalls: 1,
    historyPage: null,
    corners: false
  }
];

describe.each(PLANS)('a random ledger ($name, $entries entries)', (plan) => {
  const testDb = useStoreDb(`ledger_reads_${plan.name}`);
  let ledger: Ledger;
  let memory: MemoryStore;
  let ref: ReferenceLedger;
  const at = (what: string) => `LEDGER_READS_SEED=${SEED} [${plan.name} ledger] ${what}`;
  const rngFor = (part: string) => seededRng(seedFor(SEED, plan.name, part));

  beforeAll(async () => {
    const written = await buildLedger(testDb.db, rngFor('build'), plan.entries);
    ref = await readReference(testDb.db);
    checkReference(ref, written, at('the reference'));
    ledger = new Ledger(testDb.db);
    // The key tree up to the end, but for the small ledger, whose last entries are read as the tail after it.
    const upTo = plan.name === 'small' ? ref.size - 37 : ref.size;
    check((await ledger.keyTreeIndexer().catchUp({ upTo })) === upTo, at('the key tree'), `not built to ${upTo}`);
    memory = new MemoryStore(testDb.db, ledger);
  }, 60_000);

  it('findByKeyPrefix: any string prefix, oldest first, at most the limit', async () => {
    const rng = rngFor('findByKeyPrefix');
    const queries: [string, number][] = [
      ...LIMITS.map((limit): [string, number] => ['', limit]),
      [HOT_KEYS[0]!, 7],
      [SEED_KEY_PREFIX, 1]
    ];
    for (const prefix of samplePrefixes(rng, ref.distinctKeys(), plan.prefixQueries))
      queries.push([prefix, rng.pick(LIMITS)]);
    if (plan.corners) {
      const keys = new Set(ref.distinctKeys());
      const missing = FIXED_KEYS.filter((k) => !keys.has(k));
      check(missing.length === 0, at('the fixed keys'), `not written: ${missing.map(show).join(', ')}`);
      for (const prefix of TRICKY_PREFIXES) queries.push([prefix, rng.pick(LIMITS)]);
    }
    let cut = 0;
    await runAll(
      queries.map(([prefix, limit]) => async () => {
        const expected = ref.findByKeyPrefix(prefix, limit);
        if (ref.findByKeyPrefix(prefix, limit + 1).length > limit) cut++;
        expectSameEntries(
          await ledger.findByKeyPrefix(prefix, limit),
          expected,
          at(`findByKeyPrefix(${show(prefix)}, ${limit})`)
        );
      })
    );
    // Some answers are cut by their limit.
    check(cut >= 5, at('findByKeyPrefix'), `only ${cut} queries had more matches than their limit`);
    // The answers came from the key tree: each node holds the oldest 200 seqs under its prefix (past `#indexed:edges`
    // too, when a batch went further than the record), so no read fell back to the regex query (but those of a
    // prefix holding U+0000, which no `_id` on the embedded store can hold).
    const indexed = (await ledger.keyTree.indexedSize())!;
    await runAll(
      queries.map(([prefix]) => async () => {
        if (!prefix || prefix.includes('\u0000')) return;
        const seqs = await ledger.keyTree.oldest(wellFormed(prefix));
        const want = ref.findByKeyPrefix(prefix, 200).filter((e) => e.seq <= indexed);
        check(
          seqs !== null &&
            isDeepStrictEqual(
              seqs.filter((s) => s <= indexed).slice(0, want.length),
              want.map((e) => e.seq)
            ),
          at(`the key tree's node for ${show(prefix)}`),
          `seqs ${show(seqs)}, want ${show(want.map((e) => e.seq))}`
        );
      })
    );
  }, 60_000);

  if (plan.corners)
    it('matches a prefix that splits a surrogate pair as the database sees it: the lone half is U+FFFD', async () => {
      // Such a prefix never comes from HTTP (GET /api/truth?key=: Node refuses the raw bytes of a lone surrogate in
      // the request line, and the query parser leaves a percent-encoded one undecoded), only from code. The driver
      // sends it as UTF-8 with the half replaced by U+FFFD, so it matches the keys that begin with U+FFFD there, not
      // the keys holding the whole pair (as String#startsWith on UTF-16 code units would).
      const splits = [
        '😀'.slice(0, 1),
        'p😀'.slice(0, 2),
        '𠀀'.slice(0, 1),
        '😀'.slice(1),
        `\uFFFD${'😀'.slice(0, 1)}`
      ];
      for (const prefix of splits) {
        const expected = ref.findByKeyPrefix(prefix, 200);
        const pairs = ref.entries.filter((e) => e.key.startsWith(prefix) && !e.key.startsWith(wellFormed(prefix)));
        check(
          expected.every((e) => !pairs.includes(e)),
          at(`findByKeyPrefix(${show(prefix)})`),
          'the model matched a key that holds the whole pair'
        );
        expectSameEntries(
          await ledger.findByKeyPrefix(prefix, 200),
          expected,
          at(`findByKeyPrefix(${show(prefix)}, 200)`)
        );
        expectSameEntries(
          await ledger.after(0, 200, { keyPrefix: prefix }),
          ref.after(0, 200, { keyPrefix: prefix }),
          at(`after(0, 200, { keyPrefix: ${show(prefix)} })`)
        );
      }
      // Keys of both kinds are in the ledger, so the test tells the two readings apart.
      check(
        ref.findByKeyPrefix('\uFFFD', 1).length === 1 && ref.findByKeyPrefix('😀', 1).length === 1,
        at('keys beginning with U+FFFD and with an emoji'),
        'missing: the test shows nothing'
      );
    });

  it('after: seq > after, oldest first, with the key prefix when given; a cursor walk reads every entry once', async () => {
    const rng = rngFor('after');
    const n = ref.size;
    const prefixes = samplePrefixes(rng, ref.distinctKeys(), plan.afterQueries);
    const points = rng.shuffled([0, 1, n >> 1, n - 1, n, n + 1, n + 1000]).slice(0, plan.afterPoints);
    const queries: [number, number, string | undefined][] = points.map((a) => [
      a,
      rng.pick([...LIMITS, 500]),
      undefined
    ]);
    queries.push([0, 500, ''], [n >> 2, 200, SEED_KEY_PREFIX], [n >> 3, 7, HOT_KEYS[0]]);
    for (const prefix of prefixes) {
      const a = rng.chance(0.2) ? rng.pick(points) : rng.int(n + 2);
      queries.push([a, rng.pick([...LIMITS, 500]), rng.chance(0.3) ? undefined : prefix]);
    }
    if (plan.corners)
      for (const prefix of TRICKY_PREFIXES) queries.push([rng.chance(0.5) ? 0 : rng.int(n), rng.pick(LIMITS), prefix]);
    await runAll(
      queries.map(([a, limit, keyPrefix]) => async () => {
        const filter = keyPrefix === undefined ? {} : { keyPrefix };
        expectSameEntries(
          await ledger.after(a, limit, filter),
          ref.after(a, limit, filter),
          at(`after(${a}, ${limit}, ${show(filter)})`)
        );
      })
    );
    // As GET /api/sub-l0's stream and the seed chain's check (services/ledger/read-proofs.ts) read it.
    for (const [limit, keyPrefix] of [
      [plan.walkLimit, undefined],
      [Math.max(7, plan.walkLimit >> 2), SEED_KEY_PREFIX]
    ] as const) {
      const seen: LedgerEntryDocument[] = [];
      for (let cursor = 0; ;) {
        const page = await ledger.after(cursor, limit, keyPrefix ? { keyPrefix } : {});
        seen.push(...page);
        if (page.length < limit) break;
        cursor = page[page.length - 1]!.seq;
      }
      expectSameEntries(
        seen,
        ref.after(0, Infinity, { keyPrefix }),
        at(`a cursor walk by after(cursor, ${limit}, ${show(keyPrefix)})`)
      );
    }
  }, 60_000);

  it("latest: newest first, by kind and truth type (the routes' filters and others)", async () => {
    const rng = rngFor('latest');
    const queries: [number, LatestFilter][] = [];
    for (const filter of LATEST_FILTERS.slice(0, ROUTE_FILTERS))
      for (const limit of plan.latestLimits) queries.push([limit, filter]);
    for (const filter of rng.shuffled(LATEST_FILTERS.slice(ROUTE_FILTERS)).slice(0, plan.otherFilters))
      queries.push([rng.pick(LIMITS), filter]);
    if (ref.size < 300) queries.push([ref.size + 5, { truthTypes: PUBLIC_TRUTH_TYPES, kind: 'truth' }]);
    await runAll(
      queries.map(([limit, filter]) => async () => {
        expectSameEntries(
          await ledger.latest(limit, filter),
          ref.latest(limit, filter),
          at(`latest(${limit}, ${show(filter)})`)
        );
      })
    );
    // The routes' filters and the next two select something here, and (but for {}) leave something out.
    for (const filter of LATEST_FILTERS.slice(0, ROUTE_FILTERS + 2)) {
      const count = ref.entries.filter((e) => matchesLatestFilter(e, filter)).length;
      check(
        count > 0 && (count < ref.size || Object.keys(filter).length === 0),
        at(`latest(${show(filter)})`),
        `${count} entries match`
      );
    }
  }, 60_000);

  it('scan and get: every entry in seq order; one entry by its seq', async () => {
    const rng = rngFor('get');
    for (const batchSize of plan.scanBatches) {
      const scanned: LedgerEntryDocument[] = [];
      for await (const doc of ledger.scan(batchSize)) scanned.push(doc);
      expectSameEntries(scanned, ref.scan(), at(`scan(${batchSize ?? ''})`));
    }
    const n = ref.size;
    const seqs = [0, 1, n, n + 1];
    while (seqs.length < 4 + plan.getQueries) seqs.push(rng.between(2, n - 1));
    await runAll(
      seqs.map((seq) => async () => {
        expectSameEntries([await ledger.get(seq)], [ref.get(seq)], at(`get(${seq})`));
      })
    );
  }, 60_000);

  it("MemoryStore: a key's versions are its truth entries in seq order", async () => {
    const rng = rngFor('memory');
    const n = ref.size;
    const keys = ref.distinctKeys();
    const eventOnly = keys.filter((k) => ref.versions(k).length === 0);
    const sample = [...HOT_KEYS.slice(0, plan.hotKeys), ...rng.shuffled(keys).slice(0, plan.randomKeys)];
    // Keys with no version or few: one written only as events, a prefix of a hot key, a hot key in capitals, ''.
    if (plan.hotKeys > 1) sample.push(...eventOnly.slice(0, 1), 'mem.agent-1.note', 'MEM.AGENT-1.NOTES', '');
    const tasks: (() => Promise<void>)[] = [];
    for (const key of sample) {
      const versions = ref.versions(key);
      const ctx = (what: string) => at(`${what} of ${show(key)} (${versions.length} versions)`);
      tasks.push(async () => {
        const [got, want] = [await memory.latest(key), ref.memoryLatest(key)];
        check(
          (got === null) === (want === null),
          ctx('latest'),
          `got ${show(got?.versions)}, want ${show(want?.versions)}`
        );
        if (got && want)
          expectSameVersions(
            { versions: got.versions, page: [got.latest] },
            { versions: want.versions, page: [want.latest] },
            ctx('latest')
          );
      });
      // Around the key's versions: before the first, at it, at the middle one and after it, at the last, past the end.
      const seqs = versions.map((v) => v.seq);
      const mid = seqs[seqs.length >> 1];
      const around = mid ? [seqs[0]! - 1, seqs[0]!, mid, mid + 1, seqs[seqs.length - 1]!] : [];
      const throughs = rng.shuffled([undefined, 0, n, n + 10, ...around]).slice(0, plan.memoryCalls);
      for (const through of new Set([undefined, ...throughs]))
        tasks.push(async () => {
          const [got, want] = [await memory.countVersions(key, through), ref.countVersions(key, through)];
          check(got === want, ctx(`countVersions(…, ${through})`), `got ${got}, want ${want}`);
        });
      const befores = rng.shuffled([undefined, 1, n + 1, ...around]).slice(0, plan.memoryCalls);
      for (const before of befores) {
        const limit = rng.pick(LIMITS);
        tasks.push(async () => {
          expectSameVersions(
            await memory.history(key, limit, before),
            ref.history(key, limit, before),
            ctx(`history(…, ${limit}, ${before})`)
          );
        });
      }
    }
    await runAll(tasks);
    if (plan.historyPage === null) return;
    // Paging back through the hottest key as GET /memory/truth/:key/history does (next_before: the last one's seq).
    const key = HOT_KEYS[0]!;
    const paged: number[] = [];
    for (let before: number | undefined; ;) {
      const got = await memory.history(key, plan.historyPage, before);
      expectSameVersions(
        got,
        ref.history(key, plan.historyPage, before),
        at(`history(${show(key)}, ${plan.historyPage}, ${before})`)
      );
      paged.push(...got.page.map((v) => v.version));
      const last = got.page[got.page.length - 1];
      if (!last || last.version <= 1) break;
      before = last.entry.seq;
    }
    const count = ref.versions(key).length;
    check(count >= 10, at(`versions of ${key}`), `only ${count}`);
    check(
      paged.join() === Array.from({ length: count }, (_, i) => count - i).join(),
      at(`paging back through ${key}`),
      `versions ${paged.join()}`
    );
  }, 60_000);
});

// ---- reads while writes continue ----

describe('a ledger written to while it is read', () => {
  const testDb = useStoreDb('ledger_reads_live');
  const at = (what: string) => `LEDGER_READS_SEED=${SEED} [live ledger] ${what}`;
  const READS = 70;
  /** Entries written before the reads begin. */
  const SEEDED = 150;

  it('answers each read from a consistent prefix of the ledger, holding every entry acknowledged before it', async () => {
    const db = testDb.db;
    const rng = seededRng(seedFor(SEED, 'live', 'reads'));
    const drawer = new EntryDrawer(seededRng(seedFor(SEED, 'live', 'writes')));
    const writers = [new Ledger(db), new Ledger(db)];
    await writers[0]!.appendBulk(
      Array.from({ length: SEEDED }, () => drawer.input()),
      64
    );
    await writers[0]!.headPublished();
    // Four writers (two in each of two processes) append until the reads are done, a few milliseconds apart.
    let acknowledged = SEEDED;
    let reading = true;
    const writing = Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        while (reading) {
          const { entry } = await writers[w % 2]!.append(drawer.input({ idempotency: true }));
          acknowledged = Math.max(acknowledged, entry.seq);
          await new Promise((r) => setTimeout(r, 5 + w * 3));
        }
      })
    );

    const reader = new Ledger(db);
    const memory = new MemoryStore(db, reader);
    // The key tree follows the writes as an API process's indexer does, its `#indexed:edges` some entries behind.
    await writers[1]!.keyTreeIndexer().catchUp();
    const stopIndexer = writers[1]!.keyTreeIndexer({ pollMs: 30 }).start();
    const prefixes = ['', 'a', 'ab', 'mem.agent-1', HOT_KEYS[0]!, SEED_KEY_PREFIX, '中', '😀', 'L'];
    /**
     * Each read's check on the final ledger (`then`: the ledger up to what was acknowledged before the read began).
     * Checked once the writes have stopped, against the final ledger read whole.
     */
    const checks: ((final: ReferenceLedger) => void)[] = [];
    const read = async () => {
      const before = acknowledged;
      const limit = rng.pick(LIMITS);
      const prefix = rng.pick(prefixes);
      const key = rng.chance(0.7) ? HOT_KEYS[0]! : rng.pick(HOT_KEYS);
      const later = (what: string, verify: (final: ReferenceLedger, then: ReferenceLedger, ctx: string) => void) =>
        checks.push((final) => verify(final, final.upTo(before), at(`${what}, with ${before} entries acknowledged`)));
      /** `got` holds the first entries of the final answer, at least as many as the answer then. */
      const firstOf = (
        what: string,
        got: LedgerEntryDocument[],
        answer: (r: ReferenceLedger) => LedgerEntryDocument[]
      ) =>
        later(what, (final, then, ctx) => {
          expectSameEntries(got, answer(final).slice(0, got.length), ctx);
          check(got.length >= answer(then).length, ctx, `${got.length} entries; ${answer(then).length} were in before`);
        });
      switch (rng.int(10)) {
        case 0:
        case 1:
        case 2: {
          // The newest entries, as GET /api/ledger reads them: consecutive seqs down from the newest.
          const got = await reader.latest(limit);
          later(`latest(${limit})`, (final, _then, ctx) => {
            const top = got[0]?.seq ?? 0;
            check(top >= before, ctx, `newest ${top}`);
            expectSameEntries(got, final.upTo(top).latest(limit), ctx);
          });
          break;
        }
        case 3: {
          const filter = rng.pick(LATEST_FILTERS.slice(0, ROUTE_FILTERS - 1));
          const got = await reader.latest(limit, filter);
          later(`latest(${limit}, ${show(filter)})`, (final, then, ctx) => {
            // Newest first from some entry on, and no entry that matches between it and what was in before.
            const top = got[0]?.seq ?? 0;
            check(top >= (then.latest(1, filter)[0]?.seq ?? 0), ctx, `newest ${top}; a newer one was in before`);
            expectSameEntries(got, final.upTo(top).latest(limit, filter), ctx);
          });
          break;
        }
        case 4: {
          const got = await reader.findByKeyPrefix(prefix, limit);
          firstOf(`findByKeyPrefix(${show(prefix)}, ${limit})`, got, (r) => r.findByKeyPrefix(prefix, limit));
          break;
        }
        case 5: {
          // Reading at the end of the ledger, as GET /api/sub-l0 does.
          const from = Math.max(0, before - rng.int(30));
          const filter = rng.chance(0.5) ? {} : { keyPrefix: prefix };
          const got = await reader.after(from, limit, filter);
          firstOf(`after(${from}, ${limit}, ${show(filter)})`, got, (r) => r.after(from, limit, filter));
          break;
        }
        case 6: {
          const got: LedgerEntryDocument[] = [];
          for await (const doc of reader.scan(50)) got.push(doc);
          firstOf('scan(50)', got, (r) => r.scan());
          break;
        }
        case 7: {
          const seq = before + rng.between(-3, 5);
          const got = await reader.get(seq);
          later(`get(${seq})`, (final, _then, ctx) => {
            if (got !== null || seq <= before) expectSameEntries([got], [final.get(seq)], ctx);
          });
          break;
        }
        case 8: {
          const through = Math.max(0, before - rng.int(40));
          const [latest, count, countThrough] = await Promise.all([
            memory.latest(key),
            memory.countVersions(key),
            memory.countVersions(key, through)
          ]);
          later(`memory latest and countVersions of ${show(key)}`, (final, then, ctx) => {
            const top = latest?.latest.entry.seq ?? 0;
            check(
              top >= (then.versions(key).at(-1)?.seq ?? 0),
              ctx,
              `newest version at ${top}; a newer one was in before`
            );
            const want = final.upTo(top).memoryLatest(key);
            check(
              (latest === null) === (want === null),
              ctx,
              `got ${show(latest?.versions)}, want ${show(want?.versions)}`
            );
            if (latest && want)
              expectSameVersions(
                { versions: latest.versions, page: [latest.latest] },
                { versions: want.versions, page: [want.latest] },
                ctx
              );
            const [least, most] = [then.countVersions(key), final.countVersions(key)];
            check(count >= least && count <= most, ctx, `countVersions ${count}: ${least} before, ${most} at the end`);
            const exact = final.countVersions(key, through);
            check(countThrough === exact, ctx, `countVersions(…, ${through}) ${countThrough}, want ${exact}`);
          });
          break;
        }
        default: {
          // A page of history: before a seq already written (those versions no longer change), or the newest.
          const beforeSeq = rng.chance(0.5) ? Math.max(1, before - rng.int(60)) : undefined;
          const got = await memory.history(key, limit, beforeSeq);
          later(`memory.history(${show(key)}, ${limit}, ${beforeSeq})`, (final, then, ctx) => {
            const [least, most] = [then.countVersions(key), final.countVersions(key)];
            check(
              got.versions >= least && got.versions <= most,
              ctx,
              `${got.versions} versions: ${least} before, ${most} at the end`
            );
            const top = beforeSeq ?? (got.page[0]?.entry.seq ?? 0) + 1;
            if (beforeSeq === undefined)
              check(
                top > (then.versions(key).at(-1)?.seq ?? 0),
                ctx,
                `newest version at ${top - 1}; a newer one was in before`
              );
            const want = final.upTo(top - 1).history(key, limit, beforeSeq);
            expectSameEntries(
              got.page.map((v) => v.entry),
              want.page.map((v) => v.entry),
              ctx
            );
            // The page's numbers are exact; without `before`, `versions` is counted after the page, so versions
            // written meanwhile are in it too.
            expectSameVersions({ versions: want.versions, page: got.page }, want, ctx);
            if (beforeSeq === undefined)
              check(
                got.versions >= want.versions,
                ctx,
                `${got.versions} versions, fewer than the page's ${want.versions}`
              );
          });
        }
      }
    };
    await runAll(
      Array.from({ length: READS }, () => read),
      2
    );
    reading = false;
    stopIndexer();
    await writing;
    await Promise.all(writers.map((w) => w.headPublished()));
    const final = await readReference(db);
    // The writes went on through the reads (reads by `_id` are quick: a few dozen writes land meanwhile).
    check(final.size >= SEEDED + 10, at('the writes'), `only ${final.size - SEEDED} entries during ${READS} reads`);
    for (const verify of checks) verify(final);
  }, 90_000);
});
