/**
 * The deploy/<target> workflow's activities (workflows/deploy/deploy.ts), on the `commands` task queue
 * (contracts/task-queues.ts): releases written, `current` switched, nginx reloaded and what it serves checked. Each
 * is safe to retry: a release is written under a temporary name and renamed into place, `current` is switched by
 * renaming a temporary symlink over it, marks and prunes are idempotent.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ApplicationFailure } from '@temporalio/common';
import { deployLayout, nginxFlags, RELEASE_PATTERN } from '../../core/deploy/web';
import { fsyncPath } from './durable-fs';

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

function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...listFiles(path.join(dir, entry.name), rel));
    else if (entry.isFile()) out.push(rel);
  }
  return out.sort();
}

function releasesOf(dataDir: string, target: string): string[] {
  const dir = deployLayout(dataDir).releases(target);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((n) => RELEASE_PATTERN.test(n))
    .sort();
}

export function createReleaseActivities(deps: DeployActivityDeps) {
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

  return {
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
