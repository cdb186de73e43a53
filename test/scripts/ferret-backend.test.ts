/**
 * FERRETDB_BACKEND=auto (the default): the embedded FerretDB stores in PostgreSQL where it is installed, in SQLite
 * where it is not; a data dir that holds SQLite data and no PostgreSQL cluster stays on SQLite (PostgreSQL would
 * start empty beside it). An explicit setting is taken as it is. (`npm start` on either backend: start.test.ts,
 * postgres-lookup.test.ts and the bench's CI run.)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chooseFerretBackend } from '../../scripts/stack/postgres';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
function dataDir(contents: { sqlite?: boolean; postgres?: boolean } = {}): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-backend-'));
  dirs.push(dir);
  if (contents.sqlite) {
    fs.mkdirSync(path.join(dir, 'ferretdb'));
    fs.writeFileSync(path.join(dir, 'ferretdb', 'zhongshu_hub.sqlite'), '');
  }
  if (contents.postgres) fs.mkdirSync(path.join(dir, 'postgres'));
  return dir;
}

it('chooses PostgreSQL where it is installed, unless the data dir holds SQLite data only', () => {
  expect(chooseFerretBackend('auto', dataDir(), true)).toMatchObject({ backend: 'postgresql', why: expect.stringContaining('PostgreSQL is installed') });
  expect(chooseFerretBackend('auto', dataDir(), false)).toMatchObject({ backend: 'sqlite', why: expect.stringContaining('apt-get install -y postgresql') });
  expect(chooseFerretBackend('auto', dataDir({ sqlite: true }), true)).toMatchObject({ backend: 'sqlite', why: expect.stringContaining('holds SQLite data') });
  expect(chooseFerretBackend('auto', dataDir({ sqlite: true, postgres: true }), true).backend).toBe('postgresql');
  // FerretDB's state file alone (a start that stopped before any data) is no SQLite data.
  const started = dataDir();
  fs.mkdirSync(path.join(started, 'ferretdb'));
  fs.writeFileSync(path.join(started, 'ferretdb', 'state.json'), '{}');
  expect(chooseFerretBackend('auto', started, true).backend).toBe('postgresql');
});

it('takes an explicit FERRETDB_BACKEND as it is', () => {
  expect(chooseFerretBackend('sqlite', dataDir(), true)).toEqual({ backend: 'sqlite', why: 'FERRETDB_BACKEND=sqlite' });
  expect(chooseFerretBackend('postgresql', dataDir({ sqlite: true }), false)).toEqual({ backend: 'postgresql', why: 'FERRETDB_BACKEND=postgresql' });
});
