/**
 * The reads bench:reads measures: every read endpoint of the hub (docs/endpoints.md, docs/ledger.md, docs/a2a.md,
 * docs/federation.md, docs/gateways.md, docs/chat.md, docs/compute.md), each with the credential its route declares
 * and what it must answer at the ledger's size: each read's count is checked against what the database holds
 * (counted through the driver, not through the hub; the prefix reads' counts from the fill's deterministic keys,
 * checked against the driver's counts on ledgers of up to 20,000 entries), so a read that answers 2xx with the wrong
 * entries is reported. Prefixes and keys are the ones the fill writes (reads-fill.ts).
 */
import type { Db } from 'mongodb';
import { PUBLIC_TRUTH_TYPES } from '../../core/ledger/truth-record';
import { Ledger } from '../../store/ledger/ledger';
import { entryBundleEnds, TILE_WIDTH, tilePath } from '../../core/tlog/tiles';
import { FILL_KEYS, type Fixtures, familyPrefixCounts } from './reads-fill';

export interface ReadSpec {
  name: string;
  url: string;
  headers?: Record<string, string>;
  /** What the answer returned: entries, nodes, tasks, …; 1 for a summary (it also sizes the read's floor). */
  count(body: unknown): number;
  /** Why the answer is not what the read expects at this size, or null. */
  expect(count: number): string | null;
  /** What a summary answered, shown beside its count. */
  detail?(body: unknown): string;
  /** The floor's lookups go to the node documents (a node read), not to the ledger. */
  floor?: 'nodes';
  /** The answer is not JSON: count() and detail() get its bytes (a Buffer). */
  bytes?: true;
}

/** Where the reads go and what the database holds when they start (the writes beside them only add entries). */
export interface CatalogContext {
  base: string;
  hub: string;
  memory: string;
  /** The ledger's size when the measurements of this size begin. */
  size: number;
  fixtures: Fixtures;
  /** GET /api/ledger takes `before` (a cursor to page back with) on this hub: see ledgerTakesBefore. */
  ledgerPaging: boolean;
}

/** Whether this hub's GET /api/ledger pages back with `before`, as its OpenAPI document says. */
export async function ledgerTakesBefore(base: string): Promise<boolean> {
  const doc = (await (await fetch(`${base}/openapi.json`)).json()) as {
    paths?: Record<string, { get?: { parameters?: { name: string }[] } }>;
  };
  return (doc.paths?.['/api/ledger']?.get?.parameters ?? []).some((p) => p.name === 'before');
}

type Json = Record<string, unknown>;
const list = (field: string) => (body: unknown) => ((body as Json)[field] as unknown[]).length;
const one = () => 1;
const between = (min: number, max: number) => (count: number) =>
  count >= min && count <= max ? null : `expected ${min === max ? min : `${min}..${max}`}`;
const exactly = (n: number) => between(n, n);

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * How many entries the prefix reads should find (up to 1,000 each: the reads return at most 200): the key families
 * and the early keys from the fill's own counters, the late keys as the fill recorded them. On a small ledger the
 * same counts are also read from the database, and a difference stops the bench: the check that the counters
 * model the ledger, without a whole-collection regex count at a million entries (minutes each on FerretDB).
 */
interface PrefixCounts {
  hot: number;
  spread: number;
  nested: number;
  unicode: number;
  early: number;
  lateCount: number;
}

async function expectedPrefixCounts(db: Db, size: number, f: Fixtures, late: string): Promise<PrefixCounts> {
  const families = [FILL_KEYS.hotMemoryKey, FILL_KEYS.spreadPrefix, FILL_KEYS.nestedPrefix, FILL_KEYS.unicodePrefix];
  const ledger = db.collection('ledger');
  const scanned = (prefix: string) =>
    ledger.countDocuments({ key: { $regex: `^${escapeRegex(prefix)}` } }, { limit: 1000 });
  const modelled = [
    ...familyPrefixCounts(f.filled, families),
    f.early,
    f.lastLateCount ?? (f.lastLate ? await scanned(late) : 0)
  ];
  if (size <= 20_000) {
    const counted = await Promise.all([...families, FILL_KEYS.earlyPrefix, late].map(scanned));
    const differ = counted.findIndex((n, i) => n !== modelled[i]);
    if (differ >= 0)
      throw new Error(
        `the fill's counters say ${modelled[differ]} keys under one prefix, the ledger holds ${counted[differ]}: ${JSON.stringify({ modelled, counted })}`
      );
  }
  const [hot, spread, nested, unicode] = modelled as [number, number, number, number];
  return { hot, spread, nested, unicode, early: modelled[4]!, lateCount: modelled[5]! };
}

/** The reads of one ledger size, with their expectations from the fill's counters and the database. */
export async function buildCatalog(ctx: CatalogContext, db: Db): Promise<ReadSpec[]> {
  const { base, hub, memory, size, fixtures: f } = ctx;
  const homologous = { 'x-zr-token': f.homologousToken };
  // The A2A binding's operations name the protocol version (a missing one means 0.3, which the hub refuses).
  const a2a = { ...homologous, 'a2a-version': '1.0' };
  const late = f.lastLate || `${FILL_KEYS.latePrefix}none.`;
  const { hot, spread, nested, unicode, early, lateCount } = await expectedPrefixCounts(db, size, f, late);
  // Truths and public truths from the tally the head carries (the writes beside the reads only add to both).
  const { tally } = await new Ledger(db).headWithTally();
  const truths = tally ? Object.entries(tally).reduce((s, [k, n]) => (k === 'event' ? s : s + n), 0) : null;
  const publicTruths = tally ? PUBLIC_TRUTH_TYPES.reduce((s, t) => s + (tally[t] ?? 0), 0) : null;
  const atLeast = (total: number | null, limit: number) =>
    total === null ? between(1, limit) : between(Math.min(limit, total), limit);
  const nodes = db.collection('nodes');
  const tasks = db.collection('tasks');
  const [nodeCount, online, pending, brandPending, gpus, taskCount, mine, proposals, orders] = await Promise.all([
    nodes.countDocuments({}),
    nodes.countDocuments({ state: 'online' }),
    nodes.countDocuments({ state: 'pending_review' }),
    nodes.countDocuments({ state: 'pending_review', 'brand.code': 'custom' }),
    db.collection('gpu_registry').countDocuments({}),
    tasks.countDocuments({}),
    tasks.countDocuments({ submitted_by: f.homologousId }),
    db.collection('tree_proposals').countDocuments({ state: 'open' }),
    db.collection('instructions').countDocuments({ node_id: f.instructionsNode, acked_at: null })
  ]);
  const half = Math.max(1, Math.floor(size / 2));
  const small = Math.min(1000, size);
  const truth = (query: string) => `${base}/api/truth?${query}`;
  const enc = encodeURIComponent;
  const hotKey = enc(FILL_KEYS.hotMemoryKey);
  const deepTasks = Math.floor(mine / 2);

  const specs: ReadSpec[] = [
    { name: 'GET /api/status', url: `${base}/api/status`, count: one, expect: () => null },
    { name: '/api/ledger limit 20', url: `${base}/api/ledger?limit=20`, count: list('entries'), expect: exactly(20) },
    {
      name: '/api/ledger limit 200',
      url: `${base}/api/ledger?limit=200`,
      count: list('entries'),
      expect: exactly(200)
    },
    // Where the route pages back (`before`): a page from the middle, which must start right below the cursor.
    ...(ctx.ledgerPaging
      ? [
          {
            name: '/api/ledger page back from the middle, limit 200',
            url: `${base}/api/ledger?limit=200&before=${half}`,
            count: (body: unknown) => {
              const entries = (body as { entries: { seq: number }[] }).entries;
              if (entries[0] && entries[0].seq !== half - 1)
                throw new Error(`the page starts at ${entries[0].seq}, not ${half - 1}`);
              return entries.length;
            },
            expect: exactly(Math.min(200, half - 1))
          }
        ]
      : []),
    {
      name: '/api/truth exact key (a memory key, versions spread)',
      url: truth(`key=${hotKey}`),
      count: list('results'),
      expect: exactly(Math.min(50, hot))
    },
    {
      name: '/api/truth prefix spread through the ledger',
      url: truth(`key=${enc(FILL_KEYS.spreadPrefix)}`),
      count: list('results'),
      expect: exactly(Math.min(50, spread))
    },
    {
      name: '/api/truth same prefix, limit 200',
      url: truth(`key=${enc(FILL_KEYS.spreadPrefix)}&limit=200`),
      count: list('results'),
      expect: exactly(Math.min(200, spread))
    },
    {
      name: '/api/truth keys prefixes of one another',
      url: truth(`key=${enc(FILL_KEYS.nestedPrefix)}`),
      count: list('results'),
      expect: exactly(Math.min(50, nested))
    },
    {
      name: '/api/truth unicode prefix',
      url: truth(`key=${enc(FILL_KEYS.unicodePrefix)}`),
      count: list('results'),
      expect: exactly(Math.min(50, unicode))
    },
    {
      name: '/api/truth prefix with no match',
      url: truth(`key=${enc(FILL_KEYS.absentPrefix)}`),
      count: list('results'),
      expect: exactly(0)
    },
    {
      name: '/api/truth prefix only at the start',
      url: truth(`key=${enc(FILL_KEYS.earlyPrefix)}`),
      count: list('results'),
      expect: exactly(Math.min(50, early))
    },
    {
      name: '/api/truth prefix only at the end',
      url: truth(`key=${enc(late)}`),
      count: list('results'),
      expect: exactly(Math.min(50, lateCount))
    },
    {
      name: '/api/truth/public',
      url: `${base}/api/truth/public`,
      count: list('results'),
      expect: atLeast(publicTruths, 50)
    },
    {
      name: '/api/truth/public limit 200',
      url: `${base}/api/truth/public?limit=200`,
      count: list('results'),
      expect: atLeast(publicTruths, 200)
    },
    {
      name: '/api/sub-l0 from the start',
      url: `${base}/api/sub-l0?after=1`,
      count: list('entries'),
      expect: exactly(Math.min(100, size - 1))
    },
    {
      name: '/api/sub-l0 from the middle',
      url: `${base}/api/sub-l0?after=${half}`,
      count: list('entries'),
      expect: exactly(Math.min(100, size - half))
    },
    {
      name: '/api/sub-l0 from near the end',
      url: `${base}/api/sub-l0?after=${Math.max(0, size - 50)}`,
      count: list('entries'),
      expect: between(Math.min(50, size), 100)
    },
    {
      name: '/api/report/truths/list',
      url: `${base}/api/report/truths/list`,
      count: list('truths'),
      expect: atLeast(truths, 100)
    },
    {
      name: '/api/verify-seed',
      url: `${base}/api/verify-seed`,
      count: one,
      expect: () => null,
      detail: (b) => {
        const body = b as Json;
        if (body.ok !== true || body.chain_length !== f.seeds)
          throw new Error(`chain ok=${String(body.ok)}, ${String(body.chain_length)} seed records (${f.seeds} filled)`);
        return `chain of ${String(body.chain_length)}`;
      }
    },
    ...['metrics', 'sync', 'assets'].map((resource): ReadSpec => ({
      name: `/api/status-data/${resource}`,
      url: `${base}/api/status-data/${resource}`,
      count: one,
      expect: () => null
    })),
    {
      name: '/api/status-data/nodes',
      url: `${base}/api/status-data/nodes`,
      count: list('nodes'),
      expect: exactly(Math.min(1000, nodeCount)),
      floor: 'nodes'
    },
    {
      name: '/api/instructions/<node_id>',
      url: `${base}/api/instructions/${f.instructionsNode}`,
      headers: { 'x-did': f.readerDid },
      count: list('instructions'),
      expect: exactly(Math.min(200, orders))
    },
    ...[
      ['/api/proof/inclusion small tree', `seq=2&tree_size=${small}`],
      ['/api/proof/inclusion whole ledger', `seq=${half}&tree_size=${size}`]
    ].map(([name, query]): ReadSpec => ({
      name: name!,
      url: `${base}/api/proof/inclusion?${query}`,
      count: list('audit_path'),
      expect: between(1, 64)
    })),
    ...[
      ['/api/proof/consistency small trees', `first=10&second=${small}`],
      ['/api/proof/consistency whole ledger', `first=${half}&second=${size}`]
    ].map(([name, query]): ReadSpec => ({
      name: name!,
      url: `${base}/api/proof/consistency?${query}`,
      count: list('proof'),
      expect: between(1, 128)
    })),
    // The transparency log (docs/transparency.md): what a tlog-tiles client (the Go verifier, litewitness, a
    // monitor) reads. A full tile is the middle one of the ledger; the partial ones are at its edge when the reads
    // begin (a partial tile stays servable as the tree grows past it).
    {
      name: 'GET /tlog/checkpoint',
      url: `${base}/tlog/checkpoint`,
      bytes: true,
      count: one,
      expect: () => null,
      detail: (body) => `size ${(body as Buffer).toString('utf8').split('\n')[1]}`
    },
    ...tileReads(size).map(([name, path, entries, width]): ReadSpec => ({
      name,
      url: `${base}/tlog/tile/${path}`,
      bytes: true,
      count: (body) => (entries ? entryBundleEnds(body as Buffer).length : (body as Buffer).length / 32),
      expect: exactly(width)
    })),
    {
      name: 'memory GET /truth/<key> (latest)',
      url: `${memory}/truth/${hotKey}`,
      count: one,
      expect: () => null,
      detail: (b) => `${String((b as Json).versions)} versions`
    },
    {
      name: 'memory GET /truth/<key>/history',
      url: `${memory}/truth/${hotKey}/history`,
      count: list('history'),
      expect: exactly(Math.min(50, hot))
    },
    {
      name: 'memory history limit 200',
      url: `${memory}/truth/${hotKey}/history?limit=200`,
      count: list('history'),
      expect: exactly(Math.min(200, hot))
    },
    {
      name: '/a2a/nodes',
      url: `${base}/a2a/nodes`,
      count: list('nodes'),
      expect: exactly(Math.min(50, nodeCount)),
      floor: 'nodes'
    },
    {
      name: '/a2a/nodes limit 200',
      url: `${base}/a2a/nodes?limit=200`,
      count: list('nodes'),
      expect: exactly(Math.min(200, nodeCount)),
      floor: 'nodes'
    },
    {
      name: '/a2a/nodes online, limit 200',
      url: `${base}/a2a/nodes?state=online&limit=200`,
      count: list('nodes'),
      expect: exactly(Math.min(200, online)),
      floor: 'nodes'
    },
    {
      name: '/a2a/nodes page in the middle',
      url: `${base}/a2a/nodes?offset=${Math.floor(nodeCount / 2)}`,
      count: list('nodes'),
      expect: exactly(Math.min(50, nodeCount - Math.floor(nodeCount / 2))),
      floor: 'nodes'
    },
    {
      name: '/a2a/nodes one brand, pending review',
      url: `${base}/a2a/nodes?brand=custom&state=pending_review`,
      count: list('nodes'),
      expect: exactly(Math.min(50, brandPending)),
      floor: 'nodes'
    },
    {
      // The node and its hour of heartbeat history (reads-fixtures.ts nodeHistoryHour): one lookup per interval.
      name: '/a2a/nodes/<node_id>',
      url: `${base}/a2a/nodes/${f.instructionsNode}`,
      count: (body) => 1 + ((body as { node: { heartbeat_history: unknown[] } }).node.heartbeat_history.length ?? 0),
      expect: between(2, 61),
      floor: 'nodes'
    },
    {
      name: '/a2a/dashboard',
      url: `${base}/a2a/dashboard`,
      count: one,
      expect: () => null,
      detail: (b) => {
        const body = b as Json;
        if (body.nodes_total !== nodeCount)
          throw new Error(`nodes_total ${String(body.nodes_total)}, ${nodeCount} nodes`);
        return `${String(body.nodes_total)} nodes, ${String(body.online)} online`;
      },
      floor: 'nodes'
    },
    {
      name: '/a2a/review/queue',
      url: `${base}/a2a/review/queue`,
      headers: homologous,
      count: list('nodes'),
      expect: exactly(Math.min(50, pending))
    },
    {
      name: '/a2a/directory-tree/latest',
      url: `${base}/a2a/directory-tree/latest`,
      count: one,
      expect: () => null
    },
    {
      name: '/a2a/directory-tree/review',
      url: `${base}/a2a/directory-tree/review`,
      count: list('proposals'),
      expect: exactly(Math.min(50, proposals))
    },
    {
      name: '/api/nodes',
      url: `${base}/api/nodes`,
      headers: homologous,
      count: list('nodes'),
      expect: exactly(Math.min(100, online)),
      floor: 'nodes'
    },
    {
      name: '/api/nodes limit 500',
      url: `${base}/api/nodes?limit=500`,
      headers: homologous,
      count: list('nodes'),
      expect: exactly(Math.min(500, online)),
      floor: 'nodes'
    },
    {
      name: 'A2A GetTask GET /a2a/tasks/<id>',
      url: `${base}/a2a/tasks/${f.taskId}`,
      headers: a2a,
      count: one,
      expect: () => null
    },
    {
      name: 'A2A ListTasks GET /a2a/tasks',
      url: `${base}/a2a/tasks`,
      headers: a2a,
      count: list('tasks'),
      expect: exactly(Math.min(50, mine))
    },
    {
      name: 'A2A ListTasks page in the middle, size 100',
      url: `${base}/a2a/tasks?pageSize=100&pageToken=${deepTasks}`,
      headers: a2a,
      count: list('tasks'),
      expect: exactly(Math.min(100, mine - deepTasks))
    },
    {
      name: 'hub GET /a2a/task/<id>',
      url: `${hub}/a2a/task/${f.taskId}`,
      headers: homologous,
      count: one,
      expect: () => null
    },
    {
      name: '/a2a/queue/stats',
      url: `${base}/a2a/queue/stats`,
      count: one,
      expect: () => null,
      detail: (b) => {
        if ((b as Json).total !== taskCount) throw new Error(`total ${String((b as Json).total)}, ${taskCount} tasks`);
        return `${taskCount} tasks`;
      }
    },
    {
      name: '/v1/gpu/nodes',
      url: `${base}/v1/gpu/nodes`,
      count: list('gpus'),
      expect: exactly(Math.min(100, gpus))
    },
    {
      name: '/v1/usage',
      url: `${base}/v1/usage`,
      headers: { authorization: `Bearer ${f.chatKey}` },
      count: list('days'),
      expect: between(1, 7)
    }
  ];
  return specs;
}

/** The tiles measured at a ledger of `size`: [name, path, an entry bundle?, its width]. */
function tileReads(size: number): [string, string, boolean, number][] {
  const reads: [string, string, boolean, number][] = [];
  const fullTiles = Math.floor(size / TILE_WIDTH);
  const edge = size % TILE_WIDTH;
  if (fullTiles > 0) {
    const middle = Math.floor(fullTiles / 2);
    reads.push(['tlog hash tile level 0, full', tilePath(0, middle), false, TILE_WIDTH]);
    reads.push(['tlog entry bundle, full', tilePath('entries', middle), true, TILE_WIDTH]);
  }
  if (edge > 0) {
    reads.push(['tlog hash tile level 0, partial at the edge', tilePath(0, fullTiles, edge), false, edge]);
    reads.push(['tlog entry bundle, partial at the edge', tilePath('entries', fullTiles, edge), true, edge]);
  }
  // Level 1: 256 hashes of 256-leaf subtrees each, full from 65,536 entries.
  const level1 = Math.min(TILE_WIDTH, fullTiles);
  if (level1 > 0)
    reads.push([
      `tlog hash tile level 1, ${level1 === TILE_WIDTH ? 'full' : 'partial'}`,
      tilePath(1, 0, level1 === TILE_WIDTH ? null : level1),
      false,
      level1
    ]);
  return reads;
}
