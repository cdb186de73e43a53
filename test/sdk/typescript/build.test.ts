/**
 * The SDK is a package of its own: it builds with its own tsconfig (no import of the hub's code can pass, since
 * its rootDir is its src/), the build is the CommonJS module its package.json names, and it runs under plain Node.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const SDK = path.join(ROOT, 'sdk', 'typescript');

it('builds with tsc into the files its package.json names, and loads in plain Node', () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'node-sdk-build-'));
  try {
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', SDK, '--outDir', out], {
      cwd: SDK,
      stdio: 'pipe'
    });
    const pkg = JSON.parse(fs.readFileSync(path.join(SDK, 'package.json'), 'utf8'));
    expect(pkg.dependencies ?? {}).toEqual({});
    for (const file of [pkg.main, pkg.types, pkg.bin['zhongshu-node']])
      expect(fs.existsSync(path.join(out, path.relative('dist', file)))).toBe(true);
    // Plain Node (no jest transform) loads the build and finds the public API.
    const names = execFileSync(
      process.execPath,
      ['-e', `console.log(Object.keys(require(${JSON.stringify(path.join(out, 'index.js'))})).sort().join(','))`],
      { encoding: 'utf8' }
    ).trim();
    for (const name of ['HubNode', 'Outbox', 'verifyCheckpoint', 'verifyInclusion', 'verifyConsistency'])
      expect(names.split(',')).toContain(name);
    // The CLI's build runs under plain Node too.
    const help = execFileSync(process.execPath, [path.join(out, 'cli.js'), '--help'], { encoding: 'utf8' });
    expect(help).toMatch(/^usage: zhongshu-node <command>/);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
}, 60_000);
