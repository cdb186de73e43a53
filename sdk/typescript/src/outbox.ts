/**
 * The durable outbox of truth writes: an append-only journal of JSON lines, one per enqueue and one per change of a
 * write's state (acknowledged, held, decided, failed, verified). Opening it replays the journal (a line torn by a
 * crash is dropped: its write() never returned), then compacts it to the writes still open.
 *
 * Each line is handed to the kernel (write(2)) before the call that made it returns, so a write() that returned
 * survives a crash of the node's process (SIGKILL, an out-of-memory kill, an uncaught exception) and is sent again
 * after it, with the same Idempotency-Key, so it lands once. Getting it onto the disk as well (fdatasync, so that it
 * also survives a crash of the machine) depends on `sync`:
 *   'group' (default): group commit off the caller's path: the lines appended while one fdatasync runs in libuv's
 *          thread pool are synced by the next; the caller never waits for the disk. A crash of the machine loses at
 *          most the lines of the fdatasync under way (about a millisecond of writes; more on a saturated disk).
 *          flush() waits until everything appended so far is on the disk; close() syncs what is left.
 *   'each':  fdatasync inside each call (what 'group' trades away: the call waits for the disk, 0.3-70 ms here).
 *   'none':  no fdatasync (a crash of the machine may lose any recent line).
 * A failed fdatasync (the disk failing) makes the next enqueue throw it.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { syncDirectory } from './credentials';

/** When the journal's lines reach the disk (see the module comment). */
export type OutboxSync = 'group' | 'each' | 'none';

export type WriteState = 'pending' | 'held' | 'acknowledged' | 'rejected' | 'expired' | 'failed';

export interface TruthInput {
  key: string;
  value: Record<string, unknown>;
  truth_type?: string;
}

export interface OutboxRecord {
  /** Also the write's Idempotency-Key. */
  id: string;
  key: string;
  value: Record<string, unknown>;
  truth_type: string | null;
  enqueued_at: string;
  state: WriteState;
  attempts: number;
  seq?: number;
  event_id?: string;
  approval_id?: string;
  /** The ledger size before which the held write's decision cannot be (where following it starts). */
  held_after?: number;
  /** Why a write failed for good (the hub's answer). */
  error?: { status: number; code?: string; message: string };
  /** The checkpoint size its inclusion was proven against. */
  verified_size?: number;
}

type JournalLine =
  | { t: 'enq'; id: string; key: string; value: Record<string, unknown>; truth_type: string | null; at: string }
  | { t: 'ack'; id: string; seq: number; event_id: string }
  | { t: 'held'; id: string; approval_id: string; after?: number }
  | { t: 'dec'; id: string; state: 'acknowledged' | 'rejected' | 'expired'; seq?: number; event_id?: string }
  | { t: 'fail'; id: string; status: number; code?: string; message: string }
  | { t: 'ver'; id: string; size: number };

/** Compact once the journal holds this many lines more than twice the open writes. */
const COMPACT_SLACK = 2000;

export class Outbox {
  private readonly records = new Map<string, OutboxRecord>();
  /** The ids in each state, and the acknowledged ones not yet proven, in enqueue order (no scan per send). */
  private readonly index = new Map<WriteState | 'unverified', Set<string>>(
    (['pending', 'held', 'acknowledged', 'rejected', 'expired', 'failed', 'unverified'] as const).map((s) => [
      s,
      new Set<string>()
    ])
  );
  private fd: number;
  private lines = 0;
  /** Group commit: lines appended since the last fdatasync started, the one under way, and who waits for it. */
  private dirty = false;
  private syncing: number | null = null;
  private waitingForCurrent: Array<(err: Error | null) => void> = [];
  private waitingForNext: Array<(err: Error | null) => void> = [];
  /** Journal descriptors replaced (compaction, close) while an fdatasync on them ran: closed when it ends. */
  private retired = new Set<number>();
  private syncError: Error | null = null;
  private readonly lockFile: string;
  private locked = false;

  /**
   * `keepUntilVerified`: acknowledged writes stay in the journal until their inclusion is proven (so a restart
   * proves them still); without verification they leave it at the next compaction.
   */
  constructor(
    readonly file: string,
    private readonly options: { sync?: OutboxSync; keepUntilVerified?: boolean } = {}
  ) {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    this.lockFile = `${file}.lock`;
    lockJournal(this.lockFile);
    this.locked = true;
    if (fs.existsSync(file)) this.replay(fs.readFileSync(file, 'utf8'));
    this.fd = -1;
    this.compact();
  }

  /** Appends the write to the journal (see `sync` above) and returns its record; no network I/O. */
  enqueue(input: TruthInput): OutboxRecord {
    if (this.syncError) throw this.syncError;
    const id = `w_${Date.now().toString(36)}_${randomBytes(9).toString('hex')}`;
    const line: JournalLine = {
      t: 'enq',
      id,
      key: input.key,
      value: input.value,
      truth_type: input.truth_type ?? null,
      at: new Date().toISOString()
    };
    this.append(line);
    this.apply(line);
    return this.records.get(id)!;
  }

  acknowledge(id: string, seq: number, event_id: string): void {
    this.record({ t: 'ack', id, seq, event_id });
  }

  hold(id: string, approval_id: string, after?: number): void {
    this.record({ t: 'held', id, approval_id, after });
  }

  decide(id: string, state: 'acknowledged' | 'rejected' | 'expired', seq?: number, event_id?: string): void {
    this.record({ t: 'dec', id, state, seq, event_id });
  }

  fail(id: string, error: { status: number; code?: string; message: string }): void {
    this.record({ t: 'fail', id, ...error });
  }

  markVerified(id: string, size: number): void {
    this.record({ t: 'ver', id, size });
  }

  /** Counts one more attempt (kept in memory only: not worth an fsync). */
  attempted(id: string): void {
    const r = this.records.get(id);
    if (r) r.attempts++;
  }

  get(id: string): OutboxRecord | undefined {
    const r = this.records.get(id);
    return r && { ...r };
  }

  /** Every write the outbox still tracks, oldest first. */
  list(filter?: (r: OutboxRecord) => boolean): OutboxRecord[] {
    const out: OutboxRecord[] = [];
    for (const r of this.records.values()) if (!filter || filter(r)) out.push({ ...r });
    return out;
  }

  /** Up to `limit` writes in `state` ('unverified': acknowledged, not yet proven), oldest first, skipping some. */
  take(state: WriteState | 'unverified', limit: number, skip?: (id: string) => boolean): OutboxRecord[] {
    const out: OutboxRecord[] = [];
    for (const id of this.index.get(state)!) {
      if (out.length >= limit) break;
      if (!skip?.(id)) out.push({ ...this.records.get(id)! });
    }
    return out;
  }

  /** The writes in each state. */
  counts(): Record<WriteState, number> & { unverified: number } {
    const size = (s: WriteState | 'unverified') => this.index.get(s)!.size;
    return {
      pending: size('pending'),
      held: size('held'),
      acknowledged: size('acknowledged'),
      rejected: size('rejected'),
      expired: size('expired'),
      failed: size('failed'),
      unverified: size('unverified')
    };
  }

  /** Resolves once every line appended so far is on the disk (at once with sync 'each' or 'none'). */
  flush(): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (err: Error | null) => (err ? reject(err) : resolve());
      if (this.dirty) this.waitingForNext.push(done);
      else if (this.syncing !== null) this.waitingForCurrent.push(done);
      else resolve();
    });
  }

  /** Closes the journal (synced) and lets another outbox open it. */
  close(): void {
    if (this.fd >= 0 && this.dirty) fs.fdatasyncSync(this.fd);
    this.dirty = false;
    for (const done of this.waitingForNext.splice(0)) done(null);
    this.closeJournal();
    if (this.locked) fs.rmSync(this.lockFile, { force: true });
    this.locked = false;
  }

  private closeJournal(): void {
    if (this.fd >= 0) {
      if (this.fd === this.syncing) this.retired.add(this.fd);
      else fs.closeSync(this.fd);
    }
    this.fd = -1;
  }

  /** Starts the next group fdatasync, unless one is under way (its end starts the next). */
  private groupSync(): void {
    if (this.syncing !== null || !this.dirty || this.fd < 0) return;
    const fd = this.fd;
    this.dirty = false;
    this.syncing = fd;
    this.waitingForCurrent.push(...this.waitingForNext.splice(0));
    fs.fdatasync(fd, (err) => {
      this.syncing = null;
      // A descriptor replaced meanwhile (compaction, close) was synced by whoever replaced it.
      const failed = err && fd === this.fd ? err : null;
      if (this.retired.delete(fd)) fs.closeSync(fd);
      if (failed) this.syncError ??= failed;
      for (const done of this.waitingForCurrent.splice(0)) done(failed);
      this.groupSync();
    });
  }

  private record(line: JournalLine): void {
    if (!this.records.has(line.id)) return;
    this.append(line);
    this.apply(line);
    if (this.lines > COMPACT_SLACK + 2 * this.records.size) this.compact();
  }

  private append(line: JournalLine): void {
    if (this.fd < 0) throw new Error('the outbox is closed');
    fs.writeSync(this.fd, `${JSON.stringify(line)}\n`);
    this.lines++;
    const sync = this.options.sync ?? 'group';
    if (sync === 'each') fs.fdatasyncSync(this.fd);
    else if (sync === 'group') {
      this.dirty = true;
      this.groupSync();
    }
  }

  private reindex(r: OutboxRecord, previous?: WriteState): void {
    if (previous) this.index.get(previous)!.delete(r.id);
    this.index.get(r.state)!.add(r.id);
    const unverified = this.index.get('unverified')!;
    if (r.state === 'acknowledged' && r.verified_size === undefined) unverified.add(r.id);
    else unverified.delete(r.id);
  }

  private apply(line: JournalLine): void {
    if (line.t === 'enq') {
      const r: OutboxRecord = {
        id: line.id,
        key: line.key,
        value: line.value,
        truth_type: line.truth_type,
        enqueued_at: line.at,
        state: 'pending',
        attempts: 0
      };
      this.records.set(line.id, r);
      this.reindex(r);
      return;
    }
    const r = this.records.get(line.id);
    if (!r) return;
    const previous = r.state;
    switch (line.t) {
      case 'ack':
        Object.assign(r, { state: 'acknowledged', seq: line.seq, event_id: line.event_id });
        break;
      case 'held':
        Object.assign(r, { state: 'held', approval_id: line.approval_id, held_after: line.after });
        break;
      case 'dec':
        Object.assign(r, { state: line.state, seq: line.seq, event_id: line.event_id });
        break;
      case 'fail':
        r.state = 'failed';
        r.error = { status: line.status, code: line.code, message: line.message };
        break;
      case 'ver':
        r.verified_size = line.size;
        break;
    }
    this.reindex(r, previous);
  }

  private replay(text: string): void {
    for (const raw of text.split('\n')) {
      if (!raw) continue;
      let line: JournalLine;
      try {
        line = JSON.parse(raw);
      } catch {
        continue; // torn by a crash mid-write: that write() never returned
      }
      this.apply(line);
    }
  }

  /** Rewrites the journal with the open writes only (pending, held, acknowledged but not yet verified). */
  private compact(): void {
    for (const [id, r] of this.records) {
      const done = r.state === 'failed' || r.state === 'rejected' || r.state === 'expired';
      const proven = r.verified_size !== undefined || (r.state === 'acknowledged' && !this.options.keepUntilVerified);
      if (done || proven) {
        this.records.delete(id);
        this.index.get(r.state)!.delete(id);
        this.index.get('unverified')!.delete(id);
      }
    }
    const lines: JournalLine[] = [];
    for (const r of this.records.values()) {
      lines.push({ t: 'enq', id: r.id, key: r.key, value: r.value, truth_type: r.truth_type, at: r.enqueued_at });
      if (r.state === 'held') lines.push({ t: 'held', id: r.id, approval_id: r.approval_id!, after: r.held_after });
      if (r.state === 'acknowledged') lines.push({ t: 'ack', id: r.id, seq: r.seq!, event_id: r.event_id! });
    }
    const tmp = `${this.file}.compact`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      fs.writeSync(fd, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    this.closeJournal();
    fs.renameSync(tmp, this.file);
    syncDirectory(path.dirname(this.file));
    this.fd = fs.openSync(this.file, 'a', 0o600);
    // The new journal is on the disk whole: whoever waited for the old one's lines can stop waiting.
    this.dirty = false;
    for (const done of this.waitingForNext.splice(0)) done(null);
    this.lines = lines.length;
    for (const r of this.records.values()) r.attempts = 0;
  }
}

/**
 * One outbox per journal: two processes appending and compacting one file would drop each other's lines. The lock
 * file holds the owner's pid; one whose process is gone (killed) is taken over.
 */
function lockJournal(lockFile: string): void {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = fs.openSync(lockFile, 'wx', 0o600);
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = Number(fs.readFileSync(lockFile, 'utf8'));
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner))
      throw new Error(`the outbox ${lockFile.slice(0, -5)} is in use by process ${owner}`);
    fs.rmSync(lockFile, { force: true }); // its owner is gone
  }
  throw new Error(`could not lock ${lockFile}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
