/**
 * The embedded PostgreSQL backend serves lookups by `_id` from an index (scripts/stack/postgres.ts). FerretDB v1.24
 * pushes `{ _id: x }` down as `_jsonb->'_id' @> x`, which its own btree index cannot serve: before, every findOne,
 * updateOne or deleteOne by `_id` read the whole table (10,000 node documents for each sweeper write at 10,000
 * nodes). Asserted from the plans PostgreSQL executed (auto_explain logs every statement's plan): no table scan for
 * lookups by `_id`, on a table FerretDB creates while the server runs and on one that predates the index (a data
 * dir from before it, fixed at the next start), and without GIN's pending list (fastupdate off, also on an index made
 * before it).
 * Also: a sweep's worth of liveness transitions (NodeStore.applyLiveness, single-statement updates) completes with
 * every transition applied and no table scan; the bulkWrite it replaced hung FerretDB at 100 updates.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { findPostgres, POSTGRES_ROLE, startPostgres } from '../../scripts/stack/postgres';
import { startFerretDb } from '../../scripts/stack/ferretdb';
import type { LivenessTransition } from '../../store/federation/node-liveness';
import { NodeStore } from '../../store/federation/nodes';
import { eventually } from '../support/service';
import { nodeDocument } from '../support/node-document';

const pg = findPostgres();
const maybe = pg ? describe : describe.skip;

maybe('embedded PostgreSQL: lookups by _id use an index', () => {
  let dataDir: string;
  let servers: { stop: () => Promise<void>; closed: Promise<unknown> }[] = [];
  let port = 0;
  let client: MongoClient;
  let logFile: string;

  const psql = (sql: string): string =>
    execFileSync(
      path.join(pg!, 'psql'),
      ['-h', '127.0.0.1', '-p', String(port), '-U', POSTGRES_ROLE, '-d', 'postgres', '-X', '-At', '-c', sql],
      { encoding: 'utf8' }
    ).trim();

  const start = async () => {
    const postgres = await startPostgres({
      dataDir,
      echo: false,
      logFile,
      settings: { session_preload_libraries: 'auto_explain', 'auto_explain.log_min_duration': '0' }
    });
    port = postgres.port;
    const ferret = await startFerretDb({ dataDir, echo: false, postgresqlUrl: postgres.url });
    servers = [ferret, postgres];
    client = await MongoClient.connect(ferret.uri);
  };
  const stop = async () => {
    await client?.close();
    for (const s of servers) {
      await s.stop();
      await s.closed;
    }
    servers = [];
  };

  /** The storage options of the table's GIN index on `_id` (e.g. "fastupdate=off"). */
  const ginOptions = (table: string) =>
    psql(
      `select coalesce(array_to_string(i.reloptions, ','), '') from pg_indexes x join pg_class i on i.relname = x.indexname where x.tablename = '${table}' and x.indexdef like '%USING gin%'`
    );
  const tableOf = (collection: string) =>
    psql(`select tablename from pg_tables where schemaname = 'lookup' and tablename like '${collection}\\_%'`);
  /**
   * The plans PostgreSQL logs for the statements `run` makes on `table`: how many read it by a table scan, and how
   * many statements touched it. The log is written as statements finish; a marker statement after `run` ends it.
   */
  const plans = async (table: string, run: () => Promise<void>) => {
    const from = fs.statSync(logFile).size;
    await run();
    const marker = `marker_${Date.now()}`;
    psql(`select 1 as ${marker}`);
    const text = await eventually(
      async () => {
        const t = fs.readFileSync(logFile, 'utf8').slice(from);
        return t.includes(marker) ? t : undefined;
      },
      10_000,
      'the marker statement in the PostgreSQL log'
    );
    const count = (re: RegExp) => (text.match(re) ?? []).length;
    return {
      seqScans: count(new RegExp(`Seq Scan on ${table}\\b`, 'g')),
      statements: count(new RegExp(`Query Text: [^\\n]*"${table}"`, 'g'))
    };
  };

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'zh-pg-lookup-'));
    logFile = path.join(dataDir, 'postgres.log');
    await start();
  }, 120_000);
  afterAll(async () => {
    await stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  it('findOne, updateOne and deleteOne by _id scan no table, on a collection created while the server runs', async () => {
    const things = client.db('lookup').collection<{ _id: string; n: number; state: string }>('things');
    for (let i = 0; i < 3000; i += 1000)
      await things.insertMany(Array.from({ length: 1000 }, (_, k) => ({ _id: `t-${i + k}`, n: i + k, state: 'a' })));
    const table = tableOf('things');
    expect(
      psql(`select count(*) from pg_indexes where tablename = '${table}' and indexdef like '%USING gin%_id%'`)
    ).toBe('1');
    // Without GIN's pending list (every lookup would read it whole until a vacuum merges it).
    expect(ginOptions(table)).toBe('fastupdate=off');
    const seen = await plans(table, async () => {
      for (let i = 0; i < 10; i++) expect((await things.findOne({ _id: `t-${i * 97}` }))?.n).toBe(i * 97);
      for (let i = 0; i < 10; i++)
        expect(
          (await things.updateOne({ _id: `t-${i * 89}`, state: 'a' }, { $set: { state: 'b' } })).modifiedCount
        ).toBe(1);
      expect((await things.deleteOne({ _id: 't-5' })).deletedCount).toBe(1);
    });
    // A find, or a find and a write, per operation: every one by an index.
    expect(seen.statements).toBeGreaterThanOrEqual(21);
    expect(seen.seqScans).toBe(0);
  }, 60_000);

  it('a table that predates the index gets it at the next start, and an index with a pending list loses it', async () => {
    const table = tableOf('things');
    psql(
      `drop index lookup.${psql(`select indexname from pg_indexes where tablename = '${table}' and indexdef like '%USING gin%'`)}`
    );
    expect(psql(`select count(*) from pg_indexes where tablename = '${table}' and indexdef like '%USING gin%'`)).toBe(
      '0'
    );
    // A data dir from before fastupdate was turned off: its index has GIN's default, and entries in the pending list.
    const other = client.db('lookup').collection<{ _id: string; n: number }>('others');
    await other.insertOne({ _id: 'o-0', n: 0 });
    const otherTable = tableOf('others');
    const otherIndex = psql(
      `select indexname from pg_indexes where tablename = '${otherTable}' and indexdef like '%USING gin%'`
    );
    psql(`alter index lookup.${otherIndex} set (fastupdate = on)`);
    await other.insertMany(Array.from({ length: 500 }, (_, k) => ({ _id: `o-${k + 1}`, n: k + 1 })));
    expect(ginOptions(otherTable)).toBe('fastupdate=on');
    // Entries waiting in the pending list (pgstattuple, a contrib module of the same package, reads it).
    psql('create extension if not exists pgstattuple');
    const pending = () => Number(psql(`select pending_tuples from pgstatginindex('lookup.${otherIndex}'::regclass)`));
    expect(pending()).toBeGreaterThan(0);
    await stop();
    await start();
    expect(
      psql(`select count(*) from pg_indexes where tablename = '${table}' and indexdef like '%USING gin%_id%'`)
    ).toBe('1');
    expect(ginOptions(otherTable)).toBe('fastupdate=off');
    expect(pending()).toBe(0);
    expect(ginOptions(table)).toBe('fastupdate=off');
    expect(
      (await client.db('lookup').collection<{ _id: string; n: number }>('others').findOne({ _id: 'o-500' }))?.n
    ).toBe(500);
    const things = client.db('lookup').collection<{ _id: string; n: number }>('things');
    const seen = await plans(table, async () => {
      for (let i = 0; i < 10; i++) expect((await things.findOne({ _id: `t-${1000 + i}` }))?.n).toBe(1000 + i);
    });
    expect(seen.statements).toBe(10);
    expect(seen.seqScans).toBe(0);
  }, 120_000);

  it('applies 600 liveness transitions of a sweep, each by _id, with no table scan', async () => {
    const db = client.db('lookup');
    const nodes = new NodeStore(db);
    const docs = Array.from({ length: 3000 }, (_, i) => nodeDocument(`node-${i}`, i + 1, 'offline'));
    for (let i = 0; i < docs.length; i += 1000)
      await db.collection('nodes').insertMany(docs.slice(i, i + 1000) as never[]);
    const table = tableOf('nodes');
    const at = new Date().toISOString();
    const transitions: LivenessTransition[] = Array.from({ length: 600 }, (_, i) => ({
      node_id: `node-${i * 5}`,
      from: 'offline',
      to: 'online',
      at,
      reason: 'heartbeat received',
      seq: 1
    }));
    // A node that is not offline any more is refused, with its current view.
    await db.collection('nodes').updateOne({ _id: 'node-0' as never }, { $set: { state: 'rejected' } });
    let result!: Awaited<ReturnType<NodeStore['applyLiveness']>>;
    const seen = await plans(table, async () => {
      result = await nodes.applyLiveness(transitions);
    });
    expect(result.failed).toEqual([]);
    expect(result.applied).toHaveLength(599);
    expect([...result.refused.entries()]).toEqual([['node-0', expect.objectContaining({ state: 'rejected' })]]);
    expect(await db.collection('nodes').countDocuments({ state: 'online', liveness_seq: 1 })).toBe(599);
    // One table scan: the read of the refused node's view (by `$in`, which FerretDB does not push down).
    expect(seen.statements).toBeGreaterThanOrEqual(600);
    expect(seen.seqScans).toBe(1);
  }, 120_000);
});
