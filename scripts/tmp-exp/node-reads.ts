import fs from 'node:fs';
import { MongoClient } from 'mongodb';
import { startFerretDb } from '../stack/ferretdb';
import { startPostgres } from '../stack/postgres';
import { nodeDocument } from '../../test/support/node-document';

async function run(backend: string) {
  const dataDir = `/tmp/zh/s20/exp-${backend}`;
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.mkdirSync(dataDir, { recursive: true });
  const pg = backend === 'postgresql' ? await startPostgres({ dataDir, echo: false }) : null;
  const fd = await startFerretDb({ dataDir, echo: false, postgresqlUrl: pg?.url });
  const client = await MongoClient.connect(fd.uri, { maxPoolSize: 32 });
  const col = client.db('exp').collection<any>('nodes');
  const N = 10000;
  for (let i = 0; i < N; i += 1000) await col.insertMany(Array.from({ length: 1000 }, (_, j) => nodeDocument(`node-${i + j}`, i + j, 'online')));
  const ids = Array.from({ length: 1000 }, (_, i) => `node-${(i * 7919) % N}`);
  const t = async (label: string, f: () => Promise<unknown>) => { const s = performance.now(); await f(); console.log(backend, label, (performance.now() - s).toFixed(0), 'ms'); };
  const par = async (c: number) => { let next = 0; await Promise.all(Array.from({ length: c }, async () => { while (next < ids.length) { const id = ids[next++]; await col.findOne({ _id: id }); } })); };
  await t('warm scan', () => col.find({}).toArray());
  await t('findOne x1000 c1', () => par(1));
  await t('findOne x1000 c8', () => par(8));
  await t('findOne x1000 c16', () => par(16));
  await t('$in 10', () => col.find({ _id: { $in: ids.slice(0, 10) } }).toArray());
  await t('$in 1000', () => col.find({ _id: { $in: ids } }).toArray());
  await t('projected scan', () => col.find({}, { projection: { api_key_hash: 1, state: 1, 'brand.code': 1, state_changed_at: 1 } }).toArray());
  await t('full scan', () => col.find({}).toArray());
  await client.close();
  await fd.stop(); await fd.closed;
  if (pg) { await pg.stop(); await pg.closed; }
}
(async () => { for (const b of process.argv.slice(2)) await run(b); })().catch((e) => { console.error(e); process.exit(1); });
