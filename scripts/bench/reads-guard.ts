/**
 * bench:reads' memory guard: the resident memory of each process of the bench's stack (the pid files of its run
 * dir: FerretDB, PostgreSQL, Temporal, the API, the worker), read from /proc every second. A process past
 * BENCH_MAX_RSS_MB (default 30 % of the machine's memory, at most 8 GiB) stops the stack at once, and the run fails
 * naming the process and what was being measured: a run on the 2-core development machine, shared with other work,
 * saw FerretDB reach 20 GiB, 84 % of its memory (the node sweepers' retried full reads of 10,000 nodes piling up).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stackPids } from './stack';

const PAGE = 4096;

/** Resident memory of a process, in bytes (0 when it is gone). */
function rss(pid: number): number {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * PAGE;
  } catch {
    return 0;
  }
}

export const MAX_RSS_BYTES =
  Number(process.env.BENCH_MAX_RSS_MB ?? Math.min(8192, Math.round((os.totalmem() * 0.3) / 1048576))) * 1048576;

export class MemoryGuard {
  /** What is being done now, named if the guard trips. */
  doing = 'starting';
  /** The largest resident memory seen of each process since the last take(). */
  private peaks: Record<string, number> = {};
  private tripped: string | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(dataDir: string, onTrip: (reason: string) => void) {
    this.timer = setInterval(() => {
      for (const [name, pid] of Object.entries(stackPids(dataDir))) {
        const bytes = rss(pid);
        this.peaks[name] = Math.max(this.peaks[name] ?? 0, bytes);
        if (bytes > MAX_RSS_BYTES && !this.tripped) {
          this.tripped = `${name} (pid ${pid}) held ${(bytes / 1048576).toFixed(0)} MiB, over BENCH_MAX_RSS_MB ${(MAX_RSS_BYTES / 1048576).toFixed(0)}, during ${this.doing}: the stack was stopped`;
          onTrip(this.tripped);
        }
      }
    }, 1000);
    this.timer.unref();
  }

  /** Throws once the guard has tripped. */
  check(): void {
    if (this.tripped) throw new Error(this.tripped);
  }

  /** The peaks since the last call, in MiB, and starts over. */
  take(): Record<string, number> {
    const out = Object.fromEntries(Object.entries(this.peaks).map(([k, v]) => [k, Math.round(v / 1048576)]));
    this.peaks = {};
    return out;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
