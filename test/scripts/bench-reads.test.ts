/**
 * `npm run bench:reads`, CI-sized: a ledger of 200 entries, a few nodes, tasks and chat keys, a few requests per read
 * and one paced writer beside them. Figures are printed, not asserted: this proves the bench runs end to end, that
 * every read it measures answered 2xx with what the database says it should return, and that its output has every
 * line (a table row per read, verify, the writes beside them, the phases, the stack's log).
 */
import fs from 'node:fs';
import { runBench } from './run-bench';

/** Every read the bench measures, as its table names it. */
const READS = [
  'GET /api/status',
  '/api/ledger limit 20',
  '/api/ledger limit 200',
  '/api/truth exact key (a memory key, versions spread)',
  '/api/truth prefix spread through the ledger',
  '/api/truth same prefix, limit 200',
  '/api/truth keys prefixes of one another',
  '/api/truth unicode prefix',
  '/api/truth prefix with no match',
  '/api/truth prefix only at the start',
  '/api/truth prefix only at the end',
  '/api/truth/public',
  '/api/truth/public limit 200',
  '/api/sub-l0 from the start',
  '/api/sub-l0 from the middle',
  '/api/sub-l0 from near the end',
  '/api/report/truths/list',
  '/api/verify-seed',
  '/api/status-data/metrics',
  '/api/status-data/sync',
  '/api/status-data/assets',
  '/api/status-data/nodes',
  '/api/instructions/<node_id>',
  '/api/proof/inclusion small tree',
  '/api/proof/inclusion whole ledger',
  '/api/proof/consistency small trees',
  '/api/proof/consistency whole ledger',
  // 200 entries: no full tile yet, only the partial ones at the edge.
  'GET /tlog/checkpoint',
  'tlog hash tile level 0, partial at the edge',
  'tlog entry bundle, partial at the edge',
  'memory GET /truth/<key> (latest)',
  'memory GET /truth/<key>/history',
  'memory history limit 200',
  '/a2a/nodes',
  '/a2a/nodes limit 200',
  '/a2a/nodes online, limit 200',
  '/a2a/nodes page in the middle',
  '/a2a/nodes one brand, pending review',
  '/a2a/nodes/<node_id>',
  '/a2a/dashboard',
  '/a2a/review/queue',
  '/a2a/directory-tree/latest',
  '/a2a/directory-tree/review',
  '/api/nodes',
  '/api/nodes limit 500',
  'A2A GetTask GET /a2a/tasks/<id>',
  'A2A ListTasks GET /a2a/tasks',
  'A2A ListTasks page in the middle, size 100',
  'hub GET /a2a/task/<id>',
  '/a2a/queue/stats',
  '/v1/gpu/nodes',
  '/v1/usage'
];

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const bench = (env: Record<string, string>) => runBench('bench:reads', env);

it('bench:reads, CI-sized: every read answers 2xx with its expected count, and the output has every line', async () => {
  const run = await bench({
    BENCH_READ_SIZES: '200',
    BENCH_READ_OPS: '2',
    BENCH_READ_WARMUP: '1',
    BENCH_READ_MAX_S: '10',
    BENCH_NODES: '40',
    BENCH_TASKS: '60',
    BENCH_CHAT_KEYS: '10',
    BENCH_READ_WRITERS: '1',
    // Slow enough that a loaded machine's slower reads do not let the writes double the 200-entry ledger (the
    // bench's `!!` warning): 10/s did, in a run of about 30 s beside a million-entry fill.
    BENCH_READ_WRITE_RATE: '3'
  });
  const named = /the stack's log: (\S+)/.exec(run.output) ?? /the stack's whole log is kept at (\S+)/.exec(run.output);
  if (run.code !== 0) console.log(run.output);
  expect(run.code).toBe(0);
  expect(run.output).toContain(`bench:reads — every read endpoint over HTTP on the whole stack (FerretDB/postgresql)`);
  expect(run.output).toMatch(/smaller than the issue's sizes .*nodes 40, tasks 60, chatKeys 10/);
  for (const fixture of [
    'credentials',
    'nodes',
    'heartbeats',
    'GPU records',
    'work orders',
    'tasks',
    'chat keys',
    'directory-tree proposals'
  ])
    expect(run.output).toMatch(new RegExp(`\\n  ${fixture}: .* in \\d+\\.\\d s`));
  expect(run.output).toMatch(/== ledger 200 entries: \d+ entries appended by appendBulk in \d+\.\d s/);
  // Besides these, a page of /api/ledger where the route pages back (`before`).
  const paging = !run.output.includes('GET /api/ledger takes no cursor on this hub');
  const reads = READS.length + (paging ? 1 : 0);
  expect(run.output).toContain(`${reads} reads, their expected counts read in`);
  if (paging) READS.push('/api/ledger page back from the middle, limit 200');
  // One table row per read: its count (no mismatch), answers all 2xx, p50 and p99, its floor (on the nodes for the
  // node reads) and the ratios.
  for (const read of READS)
    expect(run.output).toMatch(
      new RegExp(
        `\\n\\| ${escape(read)} \\| \\d+( \\([^!|]*\\))? \\| 2×200 \\| [\\d.]+ \\| [\\d.]+ \\| \\d+ × \\d+( nodes)? \\| [\\d.]+ \\| [\\d.]+ \\| [\\d.]+x \\| [\\d.]+x \\|`
      )
    );
  expect(run.output).not.toContain('!!');
  expect(run.output).toMatch(/GET \/api\/verify: [\d.]+ s for \d+ entries, [\d.]+ µs per entry, consistent=true/);
  expect(run.output).toMatch(/writes beside the reads: \d+ in [\d.]+ s .*\[\d+×200\]/);
  expect(run.output).toMatch(/phases: stack start .*; fixtures .*; fill to 200 .*; measure at 200 .*; verify at 200 /);
  expect(run.output).toContain(`every read answered 2xx with the expected count: ${reads} of ${reads}`);
  expect(named).not.toBeNull();
  fs.rmSync(named![1]!, { force: true });
}, 240_000);
