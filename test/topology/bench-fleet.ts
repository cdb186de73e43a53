/**
 * bench:hosts' fleet (test/topology/bench-hosts.ts): registered nodes beating through one address, each every
 * `everyMs` from its own loop at its own phase (as bench:heartbeat's realistic mode and a real fleet beat), every
 * beat kept (when it started, how long it took, its answer) for the figures of a window. A node can be silenced (it
 * stops beating, as a node that died) and resumed.
 * The beats share one keep-alive pool (undici's Agent, as bench:heartbeat's): a connection is opened when every open
 * one is busy and reused when idle. One fetch per beat with its own connections (the first version) opened
 * thousands at the mass online of 10,000 nodes, ran the balancer out of worker_connections (8,192, client and
 * upstream sides together) and left the bench's event loop busy reconnecting.
 */
import { Agent } from 'undici';
import { RegisteredNode, nodeHeaders } from '../support/federation';
import { sleep } from '../../scripts/stack/process';
import { HEARTBEAT_BODY, REQUEST_TIMEOUT_MS } from './load';

export interface Beat {
  start: number;
  ms: number;
  status: number;
}

export interface BeatFigures {
  beats: number;
  perSecond: number;
  p50: number;
  p99: number;
  refused: number;
  statuses: string;
}

export class Fleet {
  readonly beats: Beat[] = [];
  private readonly silenced = new Set<string>();
  private readonly loops = new Map<string, Promise<void>>();
  private readonly pool = new Agent({ connections: null, keepAliveTimeout: 60_000 });
  private closed = false;
  /** Beats in flight now, and the most at once so far. */
  inFlight = 0;
  maxInFlight = 0;

  constructor(
    private readonly url: string,
    private readonly nodes: RegisteredNode[],
    private readonly everyMs: number
  ) {}

  /** Every node starts beating, their first beats spread over one interval. */
  start(): void {
    this.nodes.forEach((node, i) => this.run(node, Math.floor((i * this.everyMs) / this.nodes.length)));
  }

  /** These nodes stop beating (after the beat each may have in flight). */
  silence(ids: Iterable<string>): void {
    for (const id of ids) this.silenced.add(id);
  }

  /** These silenced nodes beat again, their beats spread over one interval. */
  resume(ids: string[]): void {
    ids.forEach((id, i) => {
      this.silenced.delete(id);
      const node = this.nodes.find((n) => n.node_id === id);
      if (node && !this.loops.has(id)) this.run(node, Math.floor((i * this.everyMs) / ids.length));
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.loops.values());
    await this.pool.close();
  }

  /** The beats that started in [from, to). */
  figures(from: number, to: number): BeatFigures {
    const inWindow = this.beats.filter((b) => b.start >= from && b.start < to);
    const answered = inWindow.filter((b) => b.status === 200).map((b) => b.ms);
    const statuses = new Map<number, number>();
    for (const b of inWindow) statuses.set(b.status, (statuses.get(b.status) ?? 0) + 1);
    return {
      beats: inWindow.length,
      perSecond: inWindow.length / ((to - from) / 1000),
      p50: percentile(answered, 0.5),
      p99: percentile(answered, 0.99),
      refused: inWindow.length - answered.length,
      statuses: [...statuses.entries()]
        .sort(([a], [b]) => a - b)
        .map(([code, n]) => `${n}×${code}`)
        .join(' ')
    };
  }

  private run(node: RegisteredNode, offsetMs: number): void {
    const loop = async () => {
      // Sleeps in short steps, so a silence or the close takes effect within a second.
      const wait = async (ms: number) => {
        for (const end = Date.now() + ms; Date.now() < end && !this.closed && !this.silenced.has(node.node_id);)
          await sleep(Math.min(1_000, end - Date.now()));
      };
      await wait(offsetMs);
      while (!this.closed && !this.silenced.has(node.node_id)) {
        const start = Date.now();
        const status = await this.beat(node);
        this.beats.push({ start, ms: Date.now() - start, status });
        await wait(this.everyMs - (Date.now() - start));
      }
      this.loops.delete(node.node_id);
    };
    this.loops.set(node.node_id, loop());
  }

  /** One heartbeat; its status, 0 when no answer came within the client timeout. */
  private async beat(node: RegisteredNode): Promise<number> {
    this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
    try {
      const res = await this.pool.request({
        origin: this.url,
        path: '/a2a/heartbeat',
        method: 'POST',
        headers: { 'content-type': 'application/json', ...nodeHeaders(node) },
        body: JSON.stringify(HEARTBEAT_BODY),
        headersTimeout: REQUEST_TIMEOUT_MS,
        bodyTimeout: REQUEST_TIMEOUT_MS
      });
      await res.body.dump();
      return res.statusCode;
    } catch {
      return 0;
    } finally {
      this.inFlight--;
    }
  }
}

export function percentile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
