/**
 * The embedded FerretDB stores in PostgreSQL only, and the launcher refuses, before anything starts, what it cannot
 * run on: a data dir holding only SQLite data (FerretDB's former backend, from an older version: not read, not
 * migrated), PostgreSQL not installed, and, as root, a data dir the `postgres` user cannot reach. (The missing
 * package through the launcher: start-packages.test.ts; `npm start` itself: start.test.ts; the `_id` indexes:
 * postgres-lookup.test.ts.)
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EX_CONFIG } from '../../core/config-check.node';
import { EX_UNAVAILABLE } from '../../scripts/stack/packages';
import {
  checkPostgresCanRun,
  checkSqliteData,
  EmbeddedStoreRefused,
  findPostgres,
  postgresCannotReach,
  startPostgres
} from '../../scripts/stack/postgres';
import { runToExit } from './launcher';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const reachable = () => null;
function dataDir(contents: { sqlite?: boolean; postgres?: boolean } = {}, under = os.tmpdir()): string {
  const dir = fs.mkdtempSync(path.join(under, 'zh-backend-'));
  dirs.push(dir);
  if (contents.sqlite) {
    fs.mkdirSync(path.join(dir, 'ferretdb'));
    fs.writeFileSync(path.join(dir, 'ferretdb', 'zhongshu_hub.sqlite'), '');
  }
  if (contents.postgres) fs.mkdirSync(path.join(dir, 'postgres'));
  return dir;
}

/** What `f` threw, as an EmbeddedStoreRefused. */
function refusal(f: () => unknown): EmbeddedStoreRefused {
  try {
    f();
  } catch (err) {
    if (err instanceof EmbeddedStoreRefused) return err;
    throw err;
  }
  throw new Error('not refused');
}

it('refuses a data dir holding only SQLite data, saying it is from an older version and how to move it aside', () => {
  const old = dataDir({ sqlite: true });
  const refused = refusal(() => checkSqliteData(old));
  expect(refused.exitCode).toBe(EX_CONFIG);
  expect(refused.message).toContain(`${path.join(old, 'ferretdb')} holds SQLite data (zhongshu_hub.sqlite)`);
  expect(refused.message).toMatch(/from an older version, which ran FerretDB on SQLite/);
  expect(refused.message).toMatch(/does not read or migrate that data/);
  expect(refused.message).toContain(`mv ${path.join(old, 'ferretdb')} ${path.join(old, 'ferretdb')}-sqlite`);
  // Moved aside as it says: nothing in the way.
  fs.renameSync(path.join(old, 'ferretdb'), path.join(old, 'ferretdb-sqlite'));
  expect(checkSqliteData(old)).toBeNull();
});

it('starts on a data dir with no SQLite data, and only names SQLite files left beside a PostgreSQL cluster', () => {
  expect(checkSqliteData(dataDir())).toBeNull();
  expect(checkSqliteData(path.join(dataDir(), 'not-made-yet'))).toBeNull();
  // FerretDB's state file alone (every start writes it) is no SQLite data.
  const started = dataDir();
  fs.mkdirSync(path.join(started, 'ferretdb'));
  fs.writeFileSync(path.join(started, 'ferretdb', 'state.json'), '{}');
  expect(checkSqliteData(started)).toBeNull();
  // Both: the data dir was on PostgreSQL already; the SQLite files are not read.
  expect(checkSqliteData(dataDir({ sqlite: true, postgres: true }))).toMatch(
    /holds SQLite data \(zhongshu_hub\.sqlite\) from an older version, which is not read: this data dir's data is in PostgreSQL/
  );
});

it('refuses to start without PostgreSQL (exit 69), or where it cannot reach the data dir (exit 78)', () => {
  const missing = refusal(() => checkPostgresCanRun(dataDir(), false, reachable));
  expect(missing.exitCode).toBe(EX_UNAVAILABLE);
  expect(missing.message).toMatch(
    /^the embedded FerretDB stores in PostgreSQL, which is not installed: apt-get install -y postgresql .*MONGODB_URI/
  );
  const dir = dataDir();
  const blocked = refusal(() => checkPostgresCanRun(dir, true, (d) => `cannot reach ${d}`));
  expect(blocked.exitCode).toBe(EX_CONFIG);
  expect(blocked.message).toBe(`PostgreSQL cannot run on ${dir}: cannot reach ${dir}`);
  expect(() => checkPostgresCanRun(dataDir(), true, reachable)).not.toThrow();
});

it('the launcher stops on a SQLite-only data dir with exit code 78, having started and installed nothing', async () => {
  const old = dataDir({ sqlite: true });
  const { code, output } = await runToExit({
    DATA_DIR: old,
    MONGODB_URI: '',
    DEPLOY_WEB: 'off',
    CHAT_PROVIDERS_FILE: '',
    CHAT_PROVIDERS: '',
    // The data dir is refused before the package step: nothing would be installed anyway.
    ZHONGSHU_INSTALL_PACKAGES: '0'
  });
  expect(code).toBe(EX_CONFIG);
  expect(output).toMatch(
    /\[stack\] nothing was started: .*ferretdb holds SQLite data \(zhongshu_hub\.sqlite\): this data dir is from an older version.* \(exit code 78\)/
  );
  expect(output).not.toMatch(/packages:|starting|building/);
  expect(fs.existsSync(path.join(old, 'run'))).toBe(false);
  expect(fs.existsSync(path.join(old, 'postgres'))).toBe(false);
}, 90_000);

// Run as root, the server runs as the `postgres` user, which must search every directory above DATA_DIR.
const asRootWithPostgresUser = process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres']).status === 0;
(asRootWithPostgresUser ? it : it.skip)(
  "finds, as root, a data dir below a private directory out of the postgres user's reach",
  () => {
    const open = dataDir();
    fs.chmodSync(open, 0o755);
    const secret = dataDir();
    fs.chmodSync(secret, 0o700);
    expect(postgresCannotReach(path.join(open, 'data'))).toBeNull();
    expect(postgresCannotReach(open)).toBeNull();
    // DATA_DIR itself may be private (initCluster gives it the search bit); a directory above it may not.
    expect(postgresCannotReach(secret)).toBeNull();
    expect(postgresCannotReach(path.join(secret, 'data'))).toMatch(
      new RegExp(`cannot reach into ${secret}: every directory above DATA_DIR must be searchable by others`)
    );
    expect(postgresCannotReach(path.join(secret, 'a', 'b'))).toMatch(/cannot reach into /);
    const inner = path.join(secret, 'data');
    fs.mkdirSync(inner);
    expect(postgresCannotReach(inner)).toMatch(new RegExp(`cannot reach ${inner}: every`));
    expect(refusal(() => checkPostgresCanRun(inner, true)).exitCode).toBe(EX_CONFIG);
  }
);

(asRootWithPostgresUser && findPostgres() ? it : it.skip)(
  'refuses, as root, to start PostgreSQL on a data dir the postgres user cannot reach, and says which directory is in the way',
  async () => {
    const secret = dataDir();
    fs.chmodSync(secret, 0o700);
    const inner = path.join(secret, 'data');
    fs.mkdirSync(path.join(inner, 'postgres'), { recursive: true });
    const reason = new RegExp(
      `PostgreSQL cannot run on ${inner}: .*cannot reach ${inner}: every directory above DATA_DIR must be searchable by others`
    );
    await expect(startPostgres({ dataDir: inner, echo: false })).rejects.toThrow(reason);
    // The launcher, before anything starts.
    const { code, output } = await runToExit({
      DATA_DIR: inner,
      MONGODB_URI: '',
      DEPLOY_WEB: 'off',
      CHAT_PROVIDERS_FILE: '',
      CHAT_PROVIDERS: '',
      ZHONGSHU_INSTALL_PACKAGES: '0'
    });
    expect(code).toBe(EX_CONFIG);
    expect(output).toMatch(reason);
    expect(output).toMatch(/nothing was started: .*\(exit code 78\)/);
    expect(output).not.toMatch(/starting|building/);
    expect(fs.existsSync(path.join(inner, 'run'))).toBe(false);
  },
  90_000
);
