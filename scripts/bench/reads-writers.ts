/**
 * The writes bench:reads runs beside its reads: POST /api/report/truth at a fixed concurrency, each write from one
 * of the bench's DIDs (writer i writes as DID i) and with an Idempotency-Key of its own, as bench:ledger's keyed
 * writes are. A process of its own (as status-sampler.ts is for bench:ledger): in the bench's process the writers'
 * answers would add their event-loop work to every read it times, which no reader elsewhere sees.
 *
 * Run by startWriters() as a child process (IPC): it writes until the parent sends 'stop', then sends its figures
 * back and exits.
 */
import { Agent } from 'undici';
import { forkBenchChild } from './child';

export interface WriterFigures {
  writes: number;
  seconds: number;
  p50: number;
  p99: number;
  /** Answers by HTTP status (0: no answer). */
  statuses: Record<string, number>;
}

interface WriterArgs {
  base: string;
  dids: string[];
  concurrency: number;
  /** Keys are `<keyPrefix>.<writer>.<n>` (a prefix none of the measured reads look for). */
  keyPrefix: string;
  /** Writes per second of all writers together (0: each writes as soon as its last write was answered). */
  rate: number;
}

/** Starts `concurrency` writers against `base`; resolves once each has had a write answered. */
export async function startWriters(args: WriterArgs): Promise<{ stop(): Promise<WriterFigures> }> {
  const { child, next } = forkBenchChild(__filename, [JSON.stringify(args)], 'the writers');
  const first = await next();
  if (first !== 'started') throw new Error(`the writers could not start: ${JSON.stringify(first)}`);
  return {
    stop: async () => {
      child.send('stop');
      return (await next()) as WriterFigures;
    }
  };
}

async function run(args: WriterArgs): Promise<void> {
  const pool = new Agent({ connections: args.concurrency * 2 });
  const origin = new URL(args.base).origin;
  let running = true;
  process.on('message', (m) => {
    if (m === 'stop') running = false;
  });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let counting = false;
  let started = performance.now();
  const write = async (writer: number, n: number): Promise<number> => {
    const key = `${args.keyPrefix}.w${writer}.${n}`;
    const t0 = performance.now();
    const status = await pool
      .request({
        origin,
        path: '/api/report/truth',
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-did': args.dids[writer % args.dids.length]!,
          'idempotency-key': `bench-${key}`
        },
        body: JSON.stringify({ key, value: { writer, n, payload: 'x'.repeat(64) }, truth_type: 'data' })
      })
      .then(
        async (res) => {
          await res.body.arrayBuffer();
          return res.statusCode;
        },
        () => 0
      );
    if (counting) {
      latencies.push(performance.now() - t0);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
    return status;
  };
  // One write per writer first (connections opened, the DIDs' quota read): not counted.
  const firsts = await Promise.all(Array.from({ length: args.concurrency }, (_, w) => write(w, 0)));
  if (firsts.some((s) => s !== 200)) {
    process.send!(`first writes answered ${firsts.join(', ')}`, () => process.exit(1));
    return;
  }
  counting = true;
  started = performance.now();
  process.send!('started');
  let nextAt = performance.now();
  await Promise.all(
    Array.from({ length: args.concurrency }, async (_, w) => {
      for (let n = 1; running; n++) {
        if (args.rate > 0) {
          // Paced: the writes of all writers together start at most `rate` a second.
          const at = Math.max(nextAt, performance.now());
          nextAt = at + 1000 / args.rate;
          if (at > performance.now()) await new Promise((r) => setTimeout(r, at - performance.now()));
          if (!running) break;
        }
        // A refusal says when to come back (503 overloaded, 429): as a node does, not hammering.
        const status = await write(w, n);
        if (status === 503 || status === 429 || status === 0) await new Promise((r) => setTimeout(r, 1000));
      }
    })
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  const figures: WriterFigures = { writes: latencies.length, seconds, p50: pct(0.5), p99: pct(0.99), statuses };
  await pool.close();
  process.send!(figures, () => process.exit(0));
}

if (require.main === module) {
  run(JSON.parse(process.argv[2]!) as WriterArgs).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
