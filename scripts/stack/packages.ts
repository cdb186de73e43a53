/**
 * The Debian packages the service runs, brought by `npm start` when they are missing: PostgreSQL's server binaries
 * (the embedded FerretDB stores in a PostgreSQL child server) and nginx (deploy targets). One code path with
 * `bash scripts/install-tools.sh packages …`, which probes, says what it installs and why (one line each), and runs
 * `apt-get update` once and `apt-get install -y` once. ZHONGSHU_INSTALL_PACKAGES=0 leaves packages to the operator
 * (without PostgreSQL the launcher then stops with 69, EX_UNAVAILABLE: postgres.ts checkPostgresCanRun).
 * Run before anything starts: a user who may not install packages is stopped at once with the one command to run
 * and exit code 77 (EX_NOPERM); a system without apt-get with 69 (EX_UNAVAILABLE).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { log } from './process';

export type DebianPackage = 'postgresql' | 'nginx';

/** sysexits.h: the user may not install what is missing. */
export const EX_NOPERM = 77;
/** sysexits.h: what is missing cannot be installed here (no apt-get). */
export const EX_UNAVAILABLE = 69;

const SCRIPT = path.join(__dirname, '..', 'install-tools.sh');

export class PackagesMissing extends Error {
  constructor(
    message: string,
    /** The launcher's exit code: EX_NOPERM, EX_UNAVAILABLE or 1 (apt-get failed). */
    readonly exitCode: number
  ) {
    super(message);
    this.name = 'PackagesMissing';
  }
}

/**
 * The packages a start with this configuration runs: PostgreSQL for the embedded FerretDB unless MONGODB_URI names
 * a MongoDB; nginx unless DEPLOY_WEB=off.
 */
export function packagesFor(config: { MONGODB_URI?: string; DEPLOY_WEB: string }): DebianPackage[] {
  return [
    ...(config.MONGODB_URI ? [] : ['postgresql' as const]),
    ...(config.DEPLOY_WEB === 'on' ? ['nginx' as const] : [])
  ];
}

/** Installs whichever of `packages` is missing (the script's lines relayed as the launcher's); throws PackagesMissing. */
export function ensurePackages(packages: DebianPackage[]): Promise<void> {
  if (packages.length === 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const child = spawn('bash', [SCRIPT, 'packages', ...packages], { stdio: ['ignore', 'ignore', 'pipe'] });
    const said: string[] = [];
    readline.createInterface({ input: child.stderr! }).on('line', (raw) => {
      const line = raw.replace(/^\[install-tools\] ?/, '');
      // "nginx: installed" for each present package is noise at every start.
      if (/^\S+: installed$/.test(line)) return;
      said.push(line);
      log(`packages: ${line}`);
    });
    child.on('error', (err) => reject(new PackagesMissing(`could not run ${SCRIPT}: ${err.message}`, 1)));
    child.on('close', (code) => {
      if (code === 0) return resolve();
      const why =
        code === EX_NOPERM
          ? 'this user may not install the packages the service needs (the command to run is above)'
          : code === EX_UNAVAILABLE
            ? 'the packages the service needs are missing and this system has no apt-get'
            : `installing ${packages.join(' ')} failed (${said.at(-1) ?? `exit code ${code}`})`;
      reject(new PackagesMissing(why, code === EX_NOPERM || code === EX_UNAVAILABLE ? code : 1));
    });
  });
}
