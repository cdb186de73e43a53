/**
 * store/federation/node-registrations.ts (NodeStore.insertWithNextSequence), against the embedded FerretDB: two stores on one database
 * stand for two API processes. Registrations arriving together in one process are numbered in rounds, each round
 * one insert command for all of its documents; numbers taken by the other process fail only their own documents,
 * which are numbered again; every registration gets a number of its own.
 */
import { randomBytes } from 'node:crypto';
import { Db, MongoClient } from 'mongodb';
import { formatNodeId } from '../../../core/federation/vocabulary';
import type { NodeDocument } from '../../../store/federation/node-document';
import { NodeStore } from '../../../store/federation/nodes';
import { ensureIndexes } from '../../../store/mongo';
import { nodeDocument } from '../../support/node-document';

let client: MongoClient;
let db: Db;
const nodeInserts: number[] = [];
beforeAll(async () => {
  client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  client.on('commandStarted', (e) => {
    if (e.commandName === 'insert' && e.command.insert === 'nodes')
      nodeInserts.push((e.command.documents as unknown[]).length);
  });
  db = client.db(`test_node_seq_${randomBytes(4).toString('hex')}`);
  await ensureIndexes(db);
});
afterAll(async () => {
  await db.dropDatabase().catch(() => undefined);
  await client.close();
});

it('numbers concurrent registrations of two processes uniquely, one insert command per round', async () => {
  const stores = [new NodeStore(db), new NodeStore(db)];
  const build = (sequence: number): NodeDocument => nodeDocument(formatNodeId('custom', sequence), sequence, 'offline');
  const docs = await Promise.all(Array.from({ length: 300 }, (_, i) => stores[i % 2]!.insertWithNextSequence(build)));

  const seqs = docs.map((d) => d.seq);
  expect(new Set(seqs).size).toBe(300);
  expect(new Set(docs.map((d) => d._id)).size).toBe(300);
  const stored = await db
    .collection('nodes')
    .find({}, { projection: { _id: 1, seq: 1 } })
    .toArray();
  expect(stored.map((d) => d.seq as number).sort((a, b) => a - b)).toEqual([...seqs].sort((a, b) => a - b));
  // Far fewer commands than registrations: each round is one insert, whatever its size.
  expect(nodeInserts.length).toBeLessThan(300 / 4);
  expect(Math.max(...nodeInserts)).toBeGreaterThan(1);
});
