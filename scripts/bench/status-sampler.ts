/**
 * The reads a user makes of a hub under write load, timed from a process of their own: GET /api/status every
 * 100 ms, each followed by one of the status-data reads in turn and by the agent card (no database read: what of a
 * read's latency is the API process's own). bench:ledger starts it beside its writers; in the bench's own process
 * the timings would also carry the event-loop lag of the hundreds of writers that process drives (the overload
 * phase's 512 clients), which no user polling status from elsewhere sees.
 *
 * Run by sampleStatus() as a child process (IPC): it samples until the parent sends 'stop', then sends its
 * latencies back and exits.
 */
import { forkBenchChild } from './child';

/** The status reads sampled while writes run, in turn after each GET /api/status. */
const STATUS_DATA_READS = ['/api/status-data/assets', '/api/status-data/metrics', '/api/status-data/sync'];

export interface Latency {
  p50: number;
  p99: number;
  max: number;
  /** When the slowest read began, in seconds after sampling started (0: the load's onset, when it began with it). */
  maxAt: number;
}
export interface ReadLatencies extends Latency {
  /** The status-data reads. */
  reads: Latency;
  /** The agent card: no database read, so its latency is the API process's own (the peer the others are read against). */
  card: Latency;
}
/** [latency ms, when the read began: ms after sampling started] */
type Sample = [number, number];
interface Samples {
  status: Sample[];
  reads: Sample[];
  card: Sample[];
}

function latency(samples: Sample[]): Latency {
  const sorted = [...samples].sort((a, b) => a[0] - b[0]);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]?.[0] ?? 0;
  const worst = sorted[sorted.length - 1];
  return { p50: at(0.5), p99: at(0.99), max: worst?.[0] ?? 0, maxAt: (worst?.[1] ?? 0) / 1000 };
}

/** Starts the sampler process against `base`; resolves once it has taken its first samples. */
export async function sampleStatus(base: string): Promise<{ stop(): Promise<ReadLatencies> }> {
  const { child, next } = forkBenchChild(__filename, [base], 'the status sampler');
  await next(); // 'started'
  return {
    stop: async () => {
      child.send('stop');
      const samples = (await next()) as Samples;
      return { ...latency(samples.status), reads: latency(samples.reads), card: latency(samples.card) };
    }
  };
}

async function run(base: string): Promise<void> {
  const samples: Samples = { status: [], reads: [], card: [] };
  let running = true;
  process.on('message', (m) => {
    if (m === 'stop') running = false;
  });
  let startedAt = performance.now();
  const timed = async (url: string, into: Sample[]) => {
    const t0 = performance.now();
    await fetch(url)
      .then((r) => r.arrayBuffer())
      .catch(() => undefined);
    into.push([performance.now() - t0, t0 - startedAt]);
  };
  for (let n = 0; running; n++) {
    await timed(`${base}/api/status`, samples.status);
    await timed(`${base}${STATUS_DATA_READS[n % STATUS_DATA_READS.length]}`, samples.reads);
    await timed(`${base}/.well-known/agent-card.json`, samples.card);
    if (n === 0) {
      // The first round opened the connection: not counted.
      Object.values(samples).forEach((l: Sample[]) => (l.length = 0));
      startedAt = performance.now();
      process.send!('started');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  process.send!(samples, () => process.exit(0));
}

if (require.main === module) {
  run(process.argv[2]!).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
