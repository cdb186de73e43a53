/**
 * How bench:reads times a read and its floor, and prints them.
 *   a read   BENCH_READ_OPS requests one after another (concurrency 1) over a keep-alive connection (undici's request
 *            API), after a few unmeasured ones; each timed from the request to the last byte of the answer (the JSON
 *            is parsed after the clock stops, to count what it returned). A read slower than its time budget stops
 *            early and says how many it measured.
 *   floor    the same number of rounds, each round N `findOne({ _id })` lookups through the mongodb driver, all N in
 *            parallel, where N is the number of entries (or items) the read returned, at least 1: what fetching what
 *            the read returned by its primary key alone costs, measured in the same run beside the same writes
 *            (within the same time budget as the read). On the `ledger` collection, or for the node reads on the
 *            `nodes` collection (ReadSpec.floor), at ids spread over what it holds.
 */
import type { Collection, Document } from 'mongodb';
import { Agent } from 'undici';
import type { ReadSpec } from './reads-catalog';

export interface Timing {
  n: number;
  p50: number;
  p99: number;
}

export interface ReadRow {
  name: string;
  /** The count the last 2xx answer returned (null when none was 2xx or it could not be counted). */
  count: number | null;
  /** Why the count is not what the read expects, or null. */
  mismatch: string | null;
  /** What a summary answered (ReadSpec.detail). */
  detail: string | null;
  statuses: Map<number, number>;
  read: Timing;
  floor: Timing;
  /** The collection the floor's lookups read. */
  floorOn: string;
}

/** Where a floor's lookups go: a collection, and the id of its i-th document (i ≥ 0, any size: taken modulo). */
export interface FloorSource {
  collection: Collection<Document>;
  idAt(i: number): unknown;
}

export function timing(latencies: number[]): Timing {
  const sorted = [...latencies].sort((a, b) => a - b);
  const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
  return { n: sorted.length, p50: pct(0.5), p99: pct(0.99) };
}

export class Reader {
  private readonly pool = new Agent({ connections: 4, keepAliveTimeout: 60_000 });

  /** One GET: its status, body and time in ms (to the last byte). */
  async get(
    url: string,
    headers: Record<string, string> = {}
  ): Promise<{ status: number; body: string; bytes: Buffer; ms: number }> {
    const u = new URL(url);
    const t0 = performance.now();
    const res = await this.pool.request({ origin: u.origin, path: u.pathname + u.search, method: 'GET', headers });
    const bytes = Buffer.from(await res.body.arrayBuffer());
    return { status: res.statusCode, body: bytes.toString('utf8'), bytes, ms: performance.now() - t0 };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

export interface MeasureOptions {
  ops: number;
  warmup: number;
  /** Stop a read (and its floor) after this many seconds of measuring. */
  maxSeconds: number;
}

/** One read: its requests, then its floor. */
export async function measureRead(
  reader: Reader,
  spec: ReadSpec,
  floorOn: FloorSource,
  options: MeasureOptions
): Promise<ReadRow> {
  const statuses = new Map<number, number>();
  let lastOk: { body: string; bytes: Buffer } | null = null;
  let lastFailed: string | null = null;
  // Unmeasured requests first; a read slow enough to spend a third of its budget warming is warm after one.
  const warmUntil = performance.now() + (options.maxSeconds * 1000) / 3;
  for (let i = 0; i < options.warmup && (i === 0 || performance.now() < warmUntil); i++) {
    const res = await reader.get(spec.url, spec.headers);
    if (res.status < 300) lastOk = res;
    else lastFailed = `${res.status} ${res.body.slice(0, 300)}`;
  }
  const latencies: number[] = [];
  const deadline = performance.now() + options.maxSeconds * 1000;
  for (let i = 0; i < options.ops && (i === 0 || performance.now() < deadline); i++) {
    const res = await reader.get(spec.url, spec.headers);
    latencies.push(res.ms);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    if (res.status < 300) lastOk = res;
    else lastFailed = `${res.status} ${res.body.slice(0, 300)}`;
  }
  let count: number | null = null;
  let detail: string | null = null;
  let mismatch: string | null = lastFailed ? `answered ${lastFailed}` : null;
  if (lastOk !== null) {
    try {
      const body: unknown = spec.bytes ? lastOk.bytes : JSON.parse(lastOk.body);
      count = spec.count(body);
      mismatch ??= spec.expect(count);
      detail = spec.detail?.(body) ?? null;
    } catch (err) {
      mismatch ??= `its answer could not be counted: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  const floor = await floorLookups(floorOn, Math.max(1, count ?? 1), latencies.length, options.maxSeconds);
  return {
    name: spec.name,
    count,
    mismatch,
    detail,
    statuses,
    read: timing(latencies),
    floor,
    floorOn: floorOn.collection.collectionName
  };
}

/**
 * `rounds` rounds of `lookups` parallel findOne({ _id }) on the source's collection, at ids spread over what it holds;
 * fewer when they take more than `maxSeconds`.
 */
export async function floorLookups(
  source: FloorSource,
  lookups: number,
  rounds: number,
  maxSeconds: number
): Promise<Timing> {
  const deadline = performance.now() + maxSeconds * 1000;
  const latencies: number[] = [];
  let seed = 12345;
  const nextId = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return source.idAt(seed);
  };
  for (let r = 0; r < rounds && (r === 0 || performance.now() < deadline); r++) {
    const ids = Array.from({ length: lookups }, nextId);
    const t0 = performance.now();
    const found = await Promise.all(ids.map((_id) => source.collection.findOne({ _id } as Document)));
    latencies.push(performance.now() - t0);
    if (found.some((d) => d === null))
      throw new Error(`the floor looked up an id ${source.collection.collectionName} does not have`);
  }
  return timing(latencies);
}

const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(1)}x` : 'n/a');
const fmtStatuses = (s: Map<number, number>) =>
  [...s]
    .sort(([a], [b]) => a - b)
    .map(([code, n]) => `${n}×${code}`)
    .join(' ');

/** The table of one ledger size (Markdown, so it pastes into docs/benchmarks.md as it is). */
export function printTable(rows: ReadRow[]): void {
  console.log(
    '| read | count | answers | p50 ms | p99 ms | floor: lookups × rounds | floor p50 | floor p99 | p50 ÷ floor | p99 ÷ floor |'
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const count = `${r.count ?? '-'}${r.detail ? ` (${r.detail})` : ''}${r.mismatch ? ` (!! ${r.mismatch})` : ''}`;
    const on = r.floorOn === 'ledger' ? '' : ` ${r.floorOn}`;
    console.log(
      `| ${r.name} | ${count} | ${fmtStatuses(r.statuses)} | ${ms(r.read.p50)} | ${ms(r.read.p99)} | ${Math.max(1, r.count ?? 1)} × ${r.floor.n}${on} | ${ms(r.floor.p50)} | ${ms(r.floor.p99)} | ${ratio(r.read.p50, r.floor.p50)} | ${ratio(r.read.p99, r.floor.p99)} |`
    );
  }
}

/** Each read at the largest size against the same read at the smallest (flat is 1.0x). */
export function printGrowth(
  small: number,
  large: number,
  smallRows: ReadRow[],
  largeRows: ReadRow[],
  smallSpan: [number, number],
  largeSpan: [number, number]
): void {
  const span = ([a, b]: [number, number]) => `${a}-${b} entries while measured`;
  console.log(
    `\neach read at ${large} entries (${span(largeSpan)}) against ${small} (${span(smallSpan)}); flat is 1.0x, the floor's own ratio beside it:`
  );
  console.log('| read | p50 | p99 | floor p50 | count at each size |');
  console.log('|---|---|---|---|---|');
  for (const r of largeRows) {
    const s = smallRows.find((x) => x.name === r.name);
    if (!s) continue;
    console.log(
      `| ${r.name} | ${ratio(r.read.p50, s.read.p50)} | ${ratio(r.read.p99, s.read.p99)} | ${ratio(r.floor.p50, s.floor.p50)} | ${s.count ?? '-'} → ${r.count ?? '-'} |`
    );
  }
}
