/**
 * Locates the embedded stack's two servers, building them on first use with scripts/install-tools.sh.
 * The first build is the slow part of a first `npm start` (Go compiles each server from the module proxy; on 2 cores
 * with both building at once, about 5 minutes for FerretDB and 8 for the Temporal CLI: FIRST_BUILD), so it is
 * announced with its expected duration and followed live: one status line per tool with the elapsed time, the
 * package being compiled and the expected total (progress.ts shows it: redrawn in place on a terminal, every 10 s in
 * a log). Both tools build in parallel when both are missing. Later starts find the cached binaries at once.
 *
 * Also a command: `node --import tsx scripts/stack/tools.ts [ferretdb|temporal|all]` builds with the same progress.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { log } from './process';
import { minutes, statusLine } from './progress';

export type ToolName = 'temporal' | 'ferretdb';

/**
 * What a first build takes on a 2-core machine with an empty Go build cache and module cache, as the expected total:
 * `alone` when it is the only build, `together` when both build at once (a first `npm start`). Measured: both at
 * once on a fresh machine 5:02 (FerretDB) and 7:55 (Temporal); both at once here with a scratch GOCACHE and
 * GOMODCACHE while other work loaded the cores (load average 6-10) 7:03 and 10:30; the Temporal CLI alone 5:13,
 * FerretDB 1:07 after Temporal had compiled the standard library. With a warm Go build cache (a second data dir or
 * tools dir) both take under 20 s. `packages`: how many `go install -v` reports compiling (557 and 1073 measured),
 * the better measure of progress.
 */
export const FIRST_BUILD: Record<ToolName, { label: string; alone: number; together: number; packages: number }> = {
  ferretdb: { label: 'FerretDB', alone: 180, together: 300, packages: 560 },
  temporal: { label: 'the Temporal CLI', alone: 315, together: 480, packages: 1080 }
};

const SCRIPT = path.join(__dirname, '..', 'install-tools.sh');
const builds = new Map<ToolName, Promise<string>>();

/**
 * The path of the tool's binary; builds it first if it is not cached (once per process, however often asked).
 * `together`: the other tool may be building at the same time (the estimate shown is then the longer one).
 */
export function ensureTool(name: ToolName, together = false): Promise<string> {
  let build = builds.get(name);
  if (!build) {
    build = runInstall(name, together);
    builds.set(name, build);
    // A failed build may be retried by a later call.
    build.catch(() => builds.delete(name));
  }
  return build;
}

/** Several tools, built in parallel. */
export function ensureTools(names: ToolName[]): Promise<string[]> {
  return Promise.all(names.map((name) => ensureTool(name, names.length > 1)));
}

function runInstall(name: ToolName, together: boolean): Promise<string> {
  const expected = FIRST_BUILD[name];
  const seconds = together ? expected.together : expected.alone;
  return new Promise<string>((resolve, reject) => {
    const child = spawn('bash', [SCRIPT, name], { stdio: ['ignore', 'inherit', 'pipe'] });
    // The build's own lines are many (one per package); they are summarised in the status line and kept here,
    // to be shown if the build fails.
    const recent: string[] = [];
    let binary: string | undefined;
    let started = 0;
    let compiled = 0;
    let current = 'resolving modules';
    let version = '';
    let status: ReturnType<typeof statusLine> | null = null;
    const describe = () => {
      const elapsed = (Date.now() - started) / 1000;
      return (
        `[stack] building ${name} ${version}: ${minutes(elapsed)} of about ${minutes(seconds)}, ` +
        `${compiled} of ~${expected.packages} packages, ${current}`
      );
    };
    const ticker = setInterval(() => status?.update(describe()), 1000);
    ticker.unref();

    readline.createInterface({ input: child.stderr! }).on('line', (raw) => {
      const line = raw.replace(/^\[install-tools\] ?/, '');
      recent.push(line);
      if (recent.length > 40) recent.shift();
      let m: RegExpExecArray | null;
      if ((m = /: cached at (\S+)$/.exec(line))) {
        binary = m[1];
      } else if ((m = /^\S+ (\S+): building with/.exec(line))) {
        version = m[1]!;
        started = Date.now();
        log(
          `${name} ${version} is not built yet: building ${expected.label} with Go now, once (about ` +
            `${Math.round(seconds / 60)} min on 2 cores${together ? ' while both servers build' : ''}, more while ` +
            `the cores are busy with other work; later starts reuse it).`
        );
        status = statusLine(describe());
      } else if ((m = new RegExp(`^  ${name}: (.*)$`).exec(line))) {
        const detail = m[1]!;
        const download = /^go: downloading (\S+)/.exec(detail);
        if (download) current = `downloading ${download[1]}`;
        else if (/^[\w.-]+(\/[\w.~+-]+)*$/.test(detail)) {
          compiled++;
          current = `compiling ${detail}`;
        } else if (!/^(go: |server response:|\s)/.test(detail)) current = detail;
        status?.update(describe());
      } else if ((m = /: built in \d+s -> (\S+)$/.exec(line))) {
        binary = m[1];
        status?.done(
          `[stack] built ${name} ${version} in ${minutes((Date.now() - started) / 1000)} (${compiled} packages) -> ${binary}`
        );
        status = null;
      } else if (/building from the downloaded module/.test(line)) {
        current = 'building from the downloaded module';
        log(line);
      } else if (line.trim()) {
        // Anything else the script says (a fallback, a failure, a missing Go) is for the user as it is.
        log(line);
      }
    });
    child.on('error', (err) => {
      clearInterval(ticker);
      status?.done();
      reject(err);
    });
    child.on('close', (code) => {
      clearInterval(ticker);
      status?.done();
      if (code === 0 && binary) return resolve(binary);
      if (code === 0) return reject(new Error(`install-tools.sh did not say where ${name} is`));
      log(`the ${name} build failed; its last lines:\n${recent.join('\n')}`);
      reject(new Error(`could not install ${name}: see the messages above`));
    });
  });
}

if (require.main === module) {
  const what = process.argv[2] ?? 'all';
  const names: ToolName[] = what === 'all' ? ['ferretdb', 'temporal'] : [what as ToolName];
  if (!names.every((n) => n in FIRST_BUILD)) {
    process.stderr.write(`unknown tool '${what}' (temporal, ferretdb or all)\n`);
    process.exit(2);
  }
  ensureTools(names).then(
    (paths) => paths.forEach((p) => process.stdout.write(`${p}\n`)),
    (err) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    }
  );
}
