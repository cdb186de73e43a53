/**
 * The Go verifier of test/tlog/verifier (the standard transparency-log libraries against a running hub), built
 * once per source and cached outside the clone like the stack's tools (scripts/install-tools.sh): under
 * $ZHONGSHU_TOOLS_DIR or ~/.cache/zhongshu-hub/tools/tlog-verifier-<hash of go.mod, go.sum and the .go files>/verifier.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SOURCE = path.resolve(__dirname, '..', 'tlog', 'verifier');

/** Whether `go` can be run here. */
export function goAvailable(): boolean {
  return spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0;
}

/** The verifier binary, built from the module proxy the first time (a minute or so), then from the cache. */
export function tlogVerifierBinary(): string {
  const hash = createHash('sha256');
  const sources = [
    'go.mod',
    'go.sum',
    ...fs
      .readdirSync(SOURCE)
      .filter((f) => f.endsWith('.go'))
      .sort()
  ];
  for (const f of sources) hash.update(f).update(fs.readFileSync(path.join(SOURCE, f)));
  const tools =
    process.env.ZHONGSHU_TOOLS_DIR ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'zhongshu-hub', 'tools');
  const dir = path.join(tools, `tlog-verifier-${hash.digest('hex').slice(0, 16)}`);
  const bin = path.join(dir, 'verifier');
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(dir, { recursive: true });
  // Built beside the cache entry and renamed into place: an interrupted build never leaves half a binary there.
  const tmp = `${bin}.${process.pid}.tmp`;
  const built = spawnSync('go', ['build', '-trimpath', '-o', tmp, '.'], { cwd: SOURCE, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`go build of ${SOURCE} failed:\n${built.stderr}`);
  fs.renameSync(tmp, bin);
  return bin;
}

/** Runs the verifier; resolves with its exit code and output, whatever the code. */
export function runTlogVerifier(
  bin: string,
  args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
