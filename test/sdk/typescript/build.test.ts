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

/**
 * What `npm publish` would upload: `npm pack` of the package (built first, as its prepack script does) holds the
 * build, the README and package.json and nothing else, and installs into a project of a node developer's without a
 * registry (the package has no dependency), where the CLI runs from node_modules/.bin and the API loads by its name.
 */
it('packs into a tarball that installs offline: the CLI runs and the API loads by the package name', () => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'node-sdk-pack-'));
  const npm = (args: string[], cwd: string) =>
    execFileSync('npm', [...args, '--offline', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd,
      encoding: 'utf8',
      env: { ...process.env, npm_config_cache: path.join(work, 'npm-cache') }
    });
  try {
    // The package as `npm pack` sees it in a publisher's checkout once built (dist/ is not in the repository).
    const pkgDir = path.join(work, 'package');
    fs.mkdirSync(pkgDir);
    for (const f of ['package.json', 'README.md']) fs.copyFileSync(path.join(SDK, f), path.join(pkgDir, f));
    execFileSync(
      process.execPath,
      [require.resolve('typescript/bin/tsc'), '-p', SDK, '--outDir', path.join(pkgDir, 'dist')],
      { cwd: SDK, stdio: 'pipe' }
    );
    const pkg = JSON.parse(fs.readFileSync(path.join(SDK, 'package.json'), 'utf8'));
    expect(pkg.scripts.prepack).toBe('npm run build');
    const [packed] = JSON.parse(npm(['pack', '--json', '--ignore-scripts'], pkgDir)) as {
      filename: string;
      files: { path: string }[];
    }[];
    const files = packed!.files.map((f) => f.path);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts']));
    expect(files.filter((f) => !f.startsWith('dist/') && f !== 'package.json' && f !== 'README.md')).toEqual([]);

    const app = path.join(work, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({ name: 'a-node', version: '1.0.0', private: true })
    );
    npm(['install', path.join(pkgDir, packed!.filename)], app);
    const help = execFileSync(path.join(app, 'node_modules', '.bin', 'zhongshu-node'), ['--help'], {
      encoding: 'utf8'
    });
    expect(help).toMatch(/^usage: zhongshu-node <command>/);
    const loaded = execFileSync(process.execPath, ['-e', `console.log(typeof require('${pkg.name}').HubNode)`], {
      cwd: app,
      encoding: 'utf8'
    }).trim();
    expect(loaded).toBe('function');
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}, 120_000);
