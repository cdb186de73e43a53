/**
 * FERRETDB_BACKEND=auto (the default): the embedded FerretDB stores in PostgreSQL where it is installed and can run on
 * the data dir, in SQLite where not; a data dir that holds SQLite data and no PostgreSQL cluster stays on SQLite
 * (PostgreSQL would start empty beside it). An explicit setting is taken as it is. (`npm start` on the default:
 * start.test.ts; on PostgreSQL: postgres-lookup.test.ts and the bench's CI run.)
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chooseFerretBackend, findPostgres, postgresCannotReach, startPostgres } from '../../scripts/stack/postgres';

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

it('chooses PostgreSQL where it is installed, unless the data dir holds SQLite data only', () => {
  expect(chooseFerretBackend('auto', dataDir(), true, reachable)).toMatchObject({
    backend: 'postgresql',
    why: expect.stringContaining('PostgreSQL is installed')
  });
  expect(chooseFerretBackend('auto', dataDir(), false)).toMatchObject({
    backend: 'sqlite',
    why: expect.stringContaining('apt-get install -y postgresql')
  });
  expect(chooseFerretBackend('auto', dataDir({ sqlite: true }), true, reachable)).toMatchObject({
    backend: 'sqlite',
    why: expect.stringContaining('holds SQLite data')
  });
  expect(chooseFerretBackend('auto', dataDir({ sqlite: true, postgres: true }), true, reachable).backend).toBe(
    'postgresql'
  );
  // FerretDB's state file alone (a start that stopped before any data) is no SQLite data.
  const started = dataDir();
  fs.mkdirSync(path.join(started, 'ferretdb'));
  fs.writeFileSync(path.join(started, 'ferretdb', 'state.json'), '{}');
  expect(chooseFerretBackend('auto', started, true, reachable).backend).toBe('postgresql');
});

it('takes an explicit FERRETDB_BACKEND as it is', () => {
  expect(chooseFerretBackend('sqlite', dataDir(), true)).toEqual({ backend: 'sqlite', why: 'FERRETDB_BACKEND=sqlite' });
  expect(chooseFerretBackend('postgresql', dataDir({ sqlite: true }), false)).toEqual({
    backend: 'postgresql',
    why: 'FERRETDB_BACKEND=postgresql'
  });
});

it('keeps a new data dir the PostgreSQL server cannot reach on SQLite, and says which directory is in the way', () => {
  const blocked = (dir: string) => `cannot reach ${dir}`;
  expect(chooseFerretBackend('auto', dataDir(), true, blocked)).toMatchObject({
    backend: 'sqlite',
    why: expect.stringMatching(
      /^FERRETDB_BACKEND=auto: PostgreSQL is installed but cannot run on this data dir \(cannot reach /
    )
  });
  // A cluster already there was reached before: PostgreSQL as before (startPostgres refuses, naming the directory in
  // the way, when it cannot reach it now).
  expect(chooseFerretBackend('auto', dataDir({ postgres: true }), true, blocked).backend).toBe('postgresql');
});

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
    expect(chooseFerretBackend('auto', inner, true).backend).toBe('sqlite');
  }
);

(asRootWithPostgresUser && findPostgres() ? it : it.skip)(
  'refuses, as root, to start PostgreSQL on a cluster the postgres user cannot reach, and says which directory is in the way',
  async () => {
    const secret = dataDir();
    fs.chmodSync(secret, 0o700);
    const inner = path.join(secret, 'data');
    fs.mkdirSync(path.join(inner, 'postgres'), { recursive: true });
    // Chosen all the same (its data is there), then refused before anything starts.
    expect(chooseFerretBackend('auto', inner, true).backend).toBe('postgresql');
    await expect(startPostgres({ dataDir: inner, echo: false })).rejects.toThrow(
      new RegExp(
        `PostgreSQL cannot run on ${inner}: .*cannot reach ${inner}: every directory above DATA_DIR must be searchable by others`
      )
    );
  }
);
