/**
 * Where a bench keeps the output of the stack it starts (the launcher, FerretDB, Temporal, the API, the worker):
 * a file outside the bench's scratch data dir, so it outlives the run. A bench names it when it fails, with the
 * log lines that carry the failing request's trace id (the API logs the cause of a 500 under that id) and the last
 * lines; and at the end of a run that went well. A bench that threw the stack's output away once lost the cause of a
 * 500 during registration.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export class StackLog {
  readonly path: string;

  constructor(bench: string) {
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    this.path = path.join(os.tmpdir(), `zhongshu-bench-${bench}-${stamp}.log`);
    fs.writeFileSync(this.path, '');
  }

  /** A file descriptor to give a child process as its stdout and stderr (appends). */
  fd(): number {
    return fs.openSync(this.path, 'a');
  }

  /** For the end of a run that went well. */
  reportSuccess(): void {
    console.log(`the stack's log: ${this.path}`);
  }

  /** For a failed run: the error, the log lines about the failing request, the last lines, and the file's name. */
  reportFailure(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    const text = fs.existsSync(this.path) ? fs.readFileSync(this.path, 'utf8') : '';
    const lines = text.split('\n').filter((l) => l.trim());
    const traceIds = [...message.matchAll(/"trace_id":"([^"]+)"/g)].map((m) => m[1]!);
    const related = lines.filter((l) => traceIds.some((id) => l.includes(id)));
    console.error(`bench failed: ${message}`);
    if (related.length) console.error(`the stack's log about trace ${traceIds.join(', ')}:\n${related.join('\n')}`);
    console.error(`the stack's last log lines:\n${lines.slice(-30).join('\n')}`);
    console.error(`the stack's whole log is kept at ${this.path}`);
  }
}
