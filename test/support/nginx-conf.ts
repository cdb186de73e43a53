/**
 * A docker/ nginx file as a test runs it with Debian's nginx: only what Docker provides is replaced, each
 * replacement must match (a change to the file that a test's replacements no longer fit fails the render, so the
 * test cannot drift from it), and pid, logs and temp files go under a data dir. Used for the API balancer on
 * loopback (nginx-lb.ts) and on test hosts (test/topology/api-lb.ts), and for the Temporal balancer
 * (test/topology/temporal-lb.ts).
 */
import fs from 'node:fs';
import path from 'node:path';

export class NginxConf {
  text: string;

  constructor(private readonly file: string) {
    this.text = fs.readFileSync(file, 'utf8');
  }

  /** Replaces every match of `pattern`, which must match, by `by(...its groups)`. */
  replace(pattern: RegExp, by: (...groups: string[]) => string): void {
    if (!pattern.test(this.text)) throw new Error(`docker/${path.basename(this.file)} no longer matches ${pattern}`);
    this.text = this.text.replace(
      new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`),
      (_m, ...groups: string[]) => by(...groups)
    );
  }

  /**
   * Runs it as a child under `prefix` (whose `logs` and `temp` directories the caller makes): pid, error log and
   * temp files there,
   * one worker process (the test machine's cores are the suite's), `user root;` when run as root, no access log;
   * `httpLines` open the `http` block.
   */
  runUnder(prefix: string, httpLines: string[] = []): void {
    this.replace(/^worker_processes [^;]*;/m, () =>
      [
        ...(process.getuid?.() === 0 ? ['user root;'] : []),
        'worker_processes 1;',
        `pid ${path.join(prefix, 'nginx.pid')};`,
        `error_log ${path.join(prefix, 'logs', 'error.log')} warn;`
      ].join('\n')
    );
    this.replace(/^http \{\n/m, () =>
      [
        'http {',
        '  access_log off;',
        ...httpLines.map((l) => `  ${l}`),
        ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
          (t) => `  ${t}_temp_path ${path.join(prefix, 'temp', t)};`
        ),
        ''
      ].join('\n')
    );
  }

  /** The text without its comments (to check that nothing Docker provides is left). */
  uncommented(): string {
    return this.text.replace(/#.*$/gm, '');
  }
}

/** nginx's arguments to run `confFile` in the foreground under `prefix` (as NginxConf.runUnder placed it). */
export function nginxArgs(prefix: string, confFile: string): string[] {
  return ['-p', `${prefix}/`, '-c', confFile, '-e', path.join(prefix, 'logs', 'error.log'), '-g', 'daemon off;'];
}
