/**
 * The deploy capability's file and nginx operations, run on the `commands` task queue (workflows/task-queues.ts) by
 * the deploy/<target> workflow. Each is safe to retry: a release is written under a temporary name and renamed into
 * place, `current` is switched by renaming a temporary symlink over it, marks and prunes are idempotent.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from 'mongodb';
import { WorkOrderStore } from '../store/deploy/work-orders';
import {
  CONFIG_GENERATION_PATH,
  deployLayout,
  nginxFlags,
  RELEASE_PATTERN,
  renderGenerationLocation
} from '../core/deploy/web';
import nodeHttp from 'node:http';
import { FragmentError, parseFragment, renderFragment } from '../core/deploy/fragment';

const run = promisify(execFile);

export interface DeployActivityDeps {
  dataDir: string;
  nginxBin: string;
  /** Where the hub's nginx answers, e.g. http://127.0.0.1:8090. */
  webUrl: string;
}

export interface ReleaseFile {
  path: string;
  content: string;
}
export interface FileDigest {
  path: string;
  sha256: string;
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

function fsyncPath(p: string): void {
  const fd = fs.openSync(p, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...listFiles(path.join(dir, entry.name), rel));
    else if (entry.isFile()) out.push(rel);
  }
  return out.sort();
}

/** Writes a file atomically (temporary name, fsync, rename), or removes it for null. */
function replaceFile(file: string, content: string | null): void {
  if (content === null) {
    fs.rmSync(file, { force: true });
    return;
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${randomBytes(4).toString('hex')}`;
  fs.writeFileSync(tmp, content, { mode: 0o644 });
  fsyncPath(tmp);
  fs.renameSync(tmp, file);
}

const readOrNull = (file: string): string | null => {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
};

export interface ConfigInput {
  target: string;
  operation_id: string;
  /** The fragment as submitted; empty (or blank): the target's fragment is removed. */
  fragment: string;
  pool: { first: number; last: number };
}

export type ConfigTest = { ok: true; output: string } | { ok: false; nginx_error: string };

function releasesOf(dataDir: string, target: string): string[] {
  const dir = deployLayout(dataDir).releases(target);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((n) => RELEASE_PATTERN.test(n))
    .sort();
}

export function createDeployActivities(deps: DeployActivityDeps) {
  const layout = deployLayout(deps.dataDir);

  const readCurrentSync = (target: string): string | null => {
    try {
      const id = path.basename(fs.readlinkSync(layout.current(target)));
      return RELEASE_PATTERN.test(id) ? id : null;
    } catch {
      return null;
    }
  };

  const digestsOf = (target: string, releaseId: string): FileDigest[] => {
    const dir = layout.release(target, releaseId);
    return listFiles(dir).map((p) => ({ path: p, sha256: sha256(fs.readFileSync(path.join(dir, p))) }));
  };

  const configFiles = (target: string) => ({
    source: layout.fragmentSource(target),
    locations: layout.fragmentLocations(target),
    servers: layout.fragmentServers(target),
    generation: layout.configGeneration
  });
  /** GET on a fresh connection (no keep-alive: an old worker must not answer for the new config). */
  const getFresh = (url: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = nodeHttp.get(url, { agent: false, headers: { connection: 'close' }, timeout: 2000 }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', reject);
    });
  /** nginx's messages name files under DATA_DIR; the answer shows them relative to it. */
  const scrub = (text: string) => text.split(deps.dataDir).join('$DATA_DIR').trim().slice(-2000);
  const restoreFrom = (target: string, operationId: string): boolean => {
    const backup = layout.configBackup(operationId);
    if (!fs.existsSync(backup)) return false;
    const saved = JSON.parse(fs.readFileSync(path.join(backup, 'files.json'), 'utf8')) as Record<string, string | null>;
    for (const [name, file] of Object.entries(configFiles(target))) replaceFile(file, saved[name] ?? null);
    fs.rmSync(backup, { recursive: true, force: true });
    return true;
  };

  return {
    /**
     * The `config` action's write and test: saves the target's current fragment files (once per operation, so a
     * retry keeps the first copy), writes the new ones, runs `nginx -t` on the whole merged config; when the test
     * fails the previous files are put back (nginx, which has not been reloaded, keeps serving the old config) and
     * nginx's error text is returned. On success the backup stays until restoreConfig or dropConfigBackup.
     */
    async applyConfig(input: ConfigInput): Promise<ConfigTest> {
      const files = configFiles(input.target);
      const backup = layout.configBackup(input.operation_id);
      if (!fs.existsSync(backup)) {
        const tmp = `${backup}.tmp-${randomBytes(4).toString('hex')}`;
        fs.mkdirSync(tmp, { recursive: true });
        const saved = Object.fromEntries(Object.entries(files).map(([name, file]) => [name, readOrNull(file)]));
        fs.writeFileSync(path.join(tmp, 'files.json'), JSON.stringify(saved));
        fsyncPath(path.join(tmp, 'files.json'));
        fs.renameSync(tmp, backup);
      }
      const text = input.fragment.trim() === '' ? null : input.fragment;
      if (text === null) {
        for (const file of [files.source, files.locations, files.servers]) replaceFile(file, null);
      } else {
        // Checked by the API already; parsed again here so the worker renders with its own DATA_DIR.
        let tree;
        try {
          tree = parseFragment(text, { target: input.target, poolFirst: input.pool.first, poolLast: input.pool.last });
        } catch (err) {
          restoreFrom(input.target, input.operation_id);
          if (err instanceof FragmentError) throw ApplicationFailure.nonRetryable(err.message, 'InvalidFragment');
          throw err;
        }
        const rendered = renderFragment(tree, {
          target: input.target,
          currentDir: layout.current(input.target),
          listenInclude: layout.listenConf
        });
        replaceFile(files.source, text);
        replaceFile(files.locations, rendered.locations);
        replaceFile(files.servers, rendered.servers);
      }
      replaceFile(files.generation, renderGenerationLocation(input.operation_id));
      try {
        const { stderr } = await run(deps.nginxBin, [...nginxFlags(deps.dataDir), '-t', '-q'], { timeout: 15_000 });
        return { ok: true, output: scrub(stderr) };
      } catch (err) {
        const e = err as { stderr?: string; message: string; code?: unknown };
        if (typeof e.code !== 'number') throw new Error(`nginx -t could not run: ${e.message}`);
        restoreFrom(input.target, input.operation_id);
        return { ok: false, nginx_error: scrub(e.stderr || e.message) };
      }
    },

    /**
     * `nginx -s reload`, then waits until nginx answers this change's generation on a fresh connection: the signal
     * returning says nothing about whether the master loaded the new config, this does (at most `wait_ms`).
     */
    async reloadConfirmed(input: { operation_id: string; wait_ms: number }): Promise<void> {
      // The workers serving before the reload: one may still accept a new connection with the old config until it
      // takes the master's order to quit (then it closes its listening sockets and says "shutting down").
      const oldWorkers = nginxWorkers(layout.nginxPid);
      try {
        await run(deps.nginxBin, [...nginxFlags(deps.dataDir), '-s', 'reload'], { timeout: 15_000 });
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(`nginx -s reload failed: ${scrub(e.stderr || e.message)}`);
      }
      const url = `${deps.webUrl}${CONFIG_GENERATION_PATH}`;
      const deadline = Date.now() + input.wait_ms;
      let last = '';
      for (;;) {
        try {
          const res = await getFresh(url);
          if (res.status === 200 && res.text === input.operation_id) {
            if (oldWorkers.every((pid) => !acceptingWorker(pid))) return;
            last = 'a worker of the previous config still accepts connections';
          } else last = `HTTP ${res.status} ${res.text.slice(0, 100)}`;
        } catch (err) {
          last = (err as Error).message;
        }
        if (Date.now() > deadline)
          throw new Error(
            `nginx did not load the new config within ${input.wait_ms} ms (${url}: ${last}); see ${scrub(layout.nginxErrorLog)}`
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    },

    /** Puts back the files applyConfig replaced (after a failed reload); true when there was a backup. */
    async restoreConfig(input: { target: string; operation_id: string }): Promise<boolean> {
      return restoreFrom(input.target, input.operation_id);
    },

    /** The change is live: its backup is no longer needed. */
    async dropConfigBackup(input: { operation_id: string }): Promise<void> {
      fs.rmSync(layout.configBackup(input.operation_id), { recursive: true, force: true });
    },

    /** The release `current` points to, or null (no deploy yet). */
    async readCurrentRelease(input: { target: string }): Promise<string | null> {
      return readCurrentSync(input.target);
    },

    /**
     * Writes releases/<id>/ (each file and directory fsynced) under a temporary name, then renames it into place.
     * A retry after the rename finds the release there and only recomputes the digests.
     */
    async writeRelease(input: { target: string; release_id: string; files: ReleaseFile[] }): Promise<FileDigest[]> {
      const finalDir = layout.release(input.target, input.release_id);
      if (!fs.existsSync(finalDir)) {
        fs.mkdirSync(layout.releases(input.target), { recursive: true });
        const tmp = `${layout.releases(input.target)}/.tmp-${input.release_id}-${randomBytes(4).toString('hex')}`;
        fs.mkdirSync(tmp, { mode: 0o755 });
        const dirs = new Set<string>([tmp]);
        for (const file of input.files) {
          const dest = path.join(tmp, file.path);
          // The path rules (core/deploy/web.ts) already confine it; this checks the resolved path once more.
          if (!dest.startsWith(`${tmp}/`))
            throw ApplicationFailure.nonRetryable(`file path escapes the release: ${file.path}`, 'InvalidRelease');
          fs.mkdirSync(path.dirname(dest), { recursive: true, mode: 0o755 });
          fs.writeFileSync(dest, file.content, { mode: 0o644 });
          fsyncPath(dest);
          for (let d = path.dirname(dest); d.startsWith(tmp); d = path.dirname(d)) dirs.add(d);
        }
        for (const d of dirs) fsyncPath(d);
        fs.renameSync(tmp, finalDir);
        fsyncPath(layout.releases(input.target));
      }
      return digestsOf(input.target, input.release_id);
    },

    /** Points `current` at a release (or removes it, for null) by renaming a temporary symlink over it. */
    async switchCurrent(input: { target: string; release_id: string | null }): Promise<void> {
      const current = layout.current(input.target);
      if (input.release_id === null) {
        fs.rmSync(current, { force: true });
        return;
      }
      if (!fs.existsSync(layout.release(input.target, input.release_id))) {
        throw ApplicationFailure.nonRetryable(`release ${input.release_id} does not exist`, 'InvalidRelease');
      }
      const tmp = `${layout.target(input.target)}/.current-${randomBytes(4).toString('hex')}`;
      fs.symlinkSync(`releases/${input.release_id}`, tmp);
      fs.renameSync(tmp, current);
      fsyncPath(layout.target(input.target));
    },

    /** `nginx -s reload` with the hub's own -p/-c/-e: graceful; fails when the hub's nginx is not running. */
    async reloadWeb(): Promise<void> {
      try {
        await run(deps.nginxBin, [...nginxFlags(deps.dataDir), '-s', 'reload'], { timeout: 15_000 });
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(`nginx -s reload failed: ${(e.stderr || e.message).trim().slice(-500)}`);
      }
    },

    /** Fetches every file of the release through nginx and compares the SHA-256 of what it serves. */
    async checkServed(input: { target: string; files: FileDigest[] }): Promise<void> {
      for (const file of input.files) {
        const url = `${deps.webUrl}/${input.target}/${file.path}`;
        let res: Response;
        try {
          res = await fetch(url, { signal: AbortSignal.timeout(5000) });
        } catch (err) {
          throw new Error(`GET ${url} failed: ${(err as Error).message}`);
        }
        const body = Buffer.from(await res.arrayBuffer());
        if (res.status !== 200) throw new Error(`GET ${url} answered HTTP ${res.status}`);
        if (sha256(body) !== file.sha256)
          throw new Error(`GET ${url} served other content (sha256 ${sha256(body)}, expected ${file.sha256})`);
      }
    },

    async markReleaseBad(input: { target: string; release_id: string; reason: string }): Promise<void> {
      fs.mkdirSync(layout.bad(input.target), { recursive: true });
      fs.writeFileSync(path.join(layout.bad(input.target), input.release_id), `${input.reason}\n`);
    },

    /** The newest release older than `current` and not marked bad, with its digests; null when there is none. */
    async findRollbackRelease(input: { target: string }): Promise<{ release_id: string; files: FileDigest[] } | null> {
      const current = readCurrentSync(input.target);
      const bad = new Set(fs.existsSync(layout.bad(input.target)) ? fs.readdirSync(layout.bad(input.target)) : []);
      const candidates = releasesOf(deps.dataDir, input.target).filter(
        (r) => !bad.has(r) && (current === null || r < current)
      );
      const pick = candidates.at(-1);
      return pick ? { release_id: pick, files: digestsOf(input.target, pick) } : null;
    },

    /** Keeps the newest `keep` releases (and always the current one); removes the rest and their bad marks. */
    async pruneReleases(input: { target: string; keep: number }): Promise<string[]> {
      const current = readCurrentSync(input.target);
      const all = releasesOf(deps.dataDir, input.target);
      const keep = new Set(all.slice(-input.keep));
      if (current) keep.add(current);
      const removed = all.filter((r) => !keep.has(r));
      for (const r of removed) {
        fs.rmSync(layout.release(input.target, r), { recursive: true, force: true });
        fs.rmSync(path.join(layout.bad(input.target), r), { force: true });
      }
      return removed;
    }
  };
}

export type DeployActivities = ReturnType<typeof createDeployActivities>;

/** The work-order activity (core queue, MongoDB only): an approved order into its node's instruction queue. */
export function createWorkOrderActivities(deps: { db: Db }) {
  const orders = new WorkOrderStore(deps.db);
  return {
    async queueWorkOrder(input: {
      instruction_id: string;
      node_id: string;
      key: string;
      value_json: string;
      approval_id: string;
      pushed_by: string;
    }): Promise<{ created_at: string }> {
      const { instruction_id, ...rest } = input;
      const order = await orders.insert({ _id: instruction_id, ...rest });
      return { created_at: order.created_at };
    }
  };
}

/** Whether `pid` is an nginx worker that accepts connections (not gone, not "worker process is shutting down"). */
function acceptingWorker(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() === 'nginx: worker process';
  } catch {
    return false;
  }
}

/** The accepting worker processes of the nginx master whose pid file is `pidFile` (Linux /proc; none elsewhere). */
function nginxWorkers(pidFile: string): number[] {
  let master: number;
  try {
    master = Number(fs.readFileSync(pidFile, 'utf8').trim());
    if (!master) return [];
    const out: number[] = [];
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (ppid === master && acceptingWorker(Number(entry))) out.push(Number(entry));
      } catch {
        /* gone */
      }
    }
    return out;
  } catch {
    return [];
  }
}
