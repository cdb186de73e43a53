/**
 * Locates the embedded stack's two servers, building them on first use with scripts/install-tools.sh.
 * The first build is the slow part of a first `npm start` (Go compiles each server from the module proxy: FerretDB
 * about 2 minutes, the Temporal CLI about 5 on 2 cores), so it is announced with its expected duration and
 * followed live: one status line per tool with the elapsed time, the package being compiled and the expected total
 * (progress.ts shows it: redrawn in place on a terminal, every 10 s in a log). Both tools build in parallel when
 * both are missing. Later starts find the cached binaries at once.
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
 * What a first build takes on the 2-core development machine: time, and how many packages `go install -v` reports
 * compiling with an empty Go build cache (measured: Temporal 1297 packages in 5:13, FerretDB 564 in 1:07 once
 * Temporal had compiled the standard library, 4:26 alone while other builds shared the cores). Shown as the
 * expected total; the package count is the better measure of progress. A warm Go build cache compiles fewer.
 */
export const FIRST_BUILD: Record<ToolName, { label: string; seconds: number; packages: number }> = {
  ferretdb: { label: 'FerretDB', seconds: 120, packages: 560 },
  temporal: { label: 'the Temporal CLI', seconds: 300, packages: 1300 }
};

const SCRIPT = path.join(__dirname, '..', 'install-tools.sh');
const builds = new Map<ToolName, Promise<string>>();

/** The path of the tool's binary; builds it first if it is not cached (once per process, however often asked). */
export function ensureTool(name: ToolName): Promise<string> {
  let build = builds.get(name);
  if (!build) {
    build = runInstall(name);
    builds.set(name, build);
    // A failed build may be retried by a later call.
    build.catch(() => builds.delete(name));
  }
  return build;
}

/** Several tools, built in parallel. */
export function ensureTools(names: ToolName[]): Promise<string[]> {
  return Promise.all(names.map(ensureTool));
}

function runInstall(name: ToolName): Promise<string> {
  const expected = FIRST_BUILD[name];
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
        `[stack] building ${name} ${version}: ${minutes(elapsed)} of about ${minutes(expected.seconds)}, ` +
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
            `${Math.round(expected.seconds / 60)} min on 2 cores, more while they are busy; later starts reuse it).`
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
