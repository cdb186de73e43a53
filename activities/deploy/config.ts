/**
 * The deploy-config workflow's activities (workflows/deploy/config.ts), on the `commands` task queue: a target's
 * nginx fragment written and tested with `nginx -t`, the reload confirmed on a fresh connection, and the previous
 * files put back when either fails. Each is safe to retry: the previous files are saved once per operation.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import nodeHttp from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { ApplicationFailure } from '@temporalio/common';
import { CONFIG_GENERATION_PATH, deployLayout, nginxFlags, renderGenerationLocation } from '../../core/deploy/web';
import { FragmentError, parseFragment, renderFragment } from '../../core/deploy/fragment';
import type { DeployActivityDeps } from './deploy';
import { fsyncPath, replaceFile } from './durable-fs';

const run = promisify(execFile);

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

export function createConfigActivities(deps: DeployActivityDeps) {
  const layout = deployLayout(deps.dataDir);

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
