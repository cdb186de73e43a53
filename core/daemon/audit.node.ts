/**
 * The daemon's audit chain, DATA_DIR/daemon_audit.jsonl: one canonical JSON line per event (admission, rejection,
 * execution, failure, breaker change, isolation, release), each carrying `seq`, `prev_hash` and
 * `hash = SHA-256(prev_hash ‖ canonical JSON of the line without hash)`. Appends are serialised across processes (the
 * API and the worker both append) by a lock file created with O_EXCL beside the chain, written with O_APPEND and
 * fsynced before the caller answers. A torn last line (a crash mid-write) is detected: the next append refuses to
 * chain onto it, and verify names it. Prompts and outputs are never written in clear, only their SHA-256.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { canonicalJson } from '../ledger/canonical-json';

export const AUDIT_FILE = 'daemon_audit.jsonl';
export const GENESIS_HASH = '0'.repeat(64);
const LOCK_STALE_MS = 10_000;
const TAIL_BYTES = 64 * 1024;

export type AuditEvent =
  | 'admitted'
  | 'rejected'
  | 'isolated'
  | 'released'
  | 'revoked'
  | 'started'
  | 'executed'
  | 'failed'
  | 'skipped'
  | 'breaker'
  | 'cleartext';

/** What a caller records; seq, at, prev_hash and hash are added by the chain. Values are flat scalars. */
export interface AuditRecord {
  event: AuditEvent;
  asset_id?: string | null;
  dag_id?: string | null;
  task_id?: string | null;
  [field: string]: string | number | boolean | null | undefined;
}

export interface AuditHead {
  seq: number;
  hash: string;
}

export const sha256Hex = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** The hash of one line: SHA-256 over prev_hash followed by the canonical JSON of the line without `hash`. */
export function lineHash(prevHash: string, withoutHash: Record<string, unknown>): string {
  return sha256Hex(prevHash + canonicalJson(withoutHash));
}

export class AuditChainError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AuditChainError';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class AuditChain {
  readonly file: string;
  private readonly lockFile: string;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, AUDIT_FILE);
    this.lockFile = `${this.file}.lock`;
    fs.mkdirSync(dataDir, { recursive: true });
  }

  /** Appends one line under the cross-process lock, fsyncs it, and returns the new head. */
  async append(record: AuditRecord): Promise<AuditHead> {
    return this.locked(() => {
      const head = this.readHead();
      const line: Record<string, unknown> = { at: new Date().toISOString(), seq: head.seq + 1, prev_hash: head.hash };
      for (const [k, v] of Object.entries(record)) if (v !== undefined) line[k] = v;
      const hash = lineHash(head.hash, line);
      const text = `${canonicalJson({ ...line, hash })}\n`;
      const fd = fs.openSync(this.file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o600);
      try {
        fs.writeSync(fd, text);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      return { seq: head.seq + 1, hash };
    });
  }

  /** The last complete line's seq and hash (GENESIS for an empty chain). A torn last line is an error. */
  readHead(): AuditHead {
    let fd: number;
    try {
      fd = fs.openSync(this.file, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { seq: 0, hash: GENESIS_HASH };
      throw err;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size === 0) return { seq: 0, hash: GENESIS_HASH };
      const len = Math.min(size, TAIL_BYTES);
      const buf = Buffer.alloc(len);
      fs.readSync(fd, buf, 0, len, size - len);
      const tail = buf.toString('utf8');
      if (!tail.endsWith('\n'))
        throw new AuditChainError(`${this.file}: the last line is torn (no newline); run npm run daemon:verify`);
      const last = tail.slice(0, -1).split('\n').pop()!;
      let parsed: { seq?: unknown; hash?: unknown };
      try {
        parsed = JSON.parse(last) as { seq?: unknown; hash?: unknown };
      } catch {
        throw new AuditChainError(`${this.file}: the last line is not JSON; run npm run daemon:verify`);
      }
      if (typeof parsed.seq !== 'number' || typeof parsed.hash !== 'string')
        throw new AuditChainError(`${this.file}: the last line has no seq or hash`);
      return { seq: parsed.seq, hash: parsed.hash };
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * A holder that died (its pid is gone) leaves its lock behind: once older than any append takes, it is moved
   * aside under a private name and removed. If what was moved is not the lock judged dead (another process took
   * over meanwhile), it is linked back in place.
   */
  private takeOverDeadLock(): void {
    const read = (p: string) => {
      try {
        return { pid: Number(fs.readFileSync(p, 'utf8')), mtime: fs.statSync(p).mtimeMs };
      } catch {
        return null;
      }
    };
    const alive = (pid: number) => {
      if (!Number.isInteger(pid) || pid <= 0) return false;
      try {
        process.kill(pid, 0);
        return true;
      } catch (err) {
        return (err as NodeJS.ErrnoException).code === 'EPERM';
      }
    };
    const holder = read(this.lockFile);
    if (!holder || Date.now() - holder.mtime <= LOCK_STALE_MS || alive(holder.pid)) return;
    const grave = `${this.lockFile}.dead-${process.pid}-${Date.now()}`;
    try {
      fs.renameSync(this.lockFile, grave);
    } catch {
      return;
    }
    const moved = read(grave);
    if (!moved || moved.pid !== holder.pid || moved.mtime !== holder.mtime) {
      try {
        fs.linkSync(grave, this.lockFile);
      } catch {
        /* a newer lock exists already */
      }
    }
    fs.rmSync(grave, { force: true });
  }

  private async locked<T>(fn: () => T): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      let fd: number;
      try {
        fd = fs.openSync(this.lockFile, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        this.takeOverDeadLock();
        if (attempt > 3000) throw new AuditChainError(`${this.lockFile}: could not take the lock`);
        await sleep(2 + Math.floor(Math.random() * 5));
        continue;
      }
      try {
        fs.writeSync(fd, String(process.pid));
        return fn();
      } finally {
        fs.closeSync(fd);
        fs.rmSync(this.lockFile, { force: true });
      }
    }
  }
}

export interface VerifyResult {
  ok: boolean;
  /** Complete, valid lines. */
  length: number;
  /** Hash of the last valid line (GENESIS for none). */
  root: string;
  /** 1-based line number of the first bad line, and why. */
  first_bad_line: number | null;
  reason: string | null;
}

/** Recomputes the whole chain from the file's text. */
export function verifyAuditText(text: string): VerifyResult {
  let prev = GENESIS_HASH;
  let length = 0;
  const bad = (line: number, reason: string): VerifyResult => ({
    ok: false,
    length,
    root: prev,
    first_bad_line: line,
    reason
  });
  if (text.length === 0) return { ok: true, length: 0, root: prev, first_bad_line: null, reason: null };
  const lines = text.split('\n');
  const torn = !text.endsWith('\n');
  if (!torn) lines.pop();
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    const raw = lines[i]!;
    if (torn && i === lines.length - 1) return bad(n, 'torn last line (no newline: a write was cut off)');
    let obj: Record<string, unknown>;
    try {
      obj = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return bad(n, 'not JSON');
    }
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return bad(n, 'not a JSON object');
    const { hash, ...rest } = obj;
    if (rest.seq !== length + 1)
      return bad(n, `seq is ${String(rest.seq)}, expected ${length + 1} (a line was deleted or moved)`);
    if (rest.prev_hash !== prev) return bad(n, 'prev_hash does not match the previous line');
    if (typeof hash !== 'string' || hash !== lineHash(prev, rest))
      return bad(n, 'hash does not match the line (edited)');
    if (canonicalJson(obj) !== raw) return bad(n, 'not in canonical form (edited)');
    prev = hash;
    length++;
  }
  return { ok: true, length, root: prev, first_bad_line: null, reason: null };
}

export function verifyAuditFile(dataDir: string): VerifyResult & { file: string } {
  const file = path.join(dataDir, AUDIT_FILE);
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  return { file, ...verifyAuditText(text) };
}

const chains = new Map<string, AuditChain>();
/** One chain object per data directory in this process. */
export function auditChainFor(dataDir: string): AuditChain {
  let c = chains.get(dataDir);
  if (!c) chains.set(dataDir, (c = new AuditChain(dataDir)));
  return c;
}
