/**
 * The node cache (store/federation/node-cache.ts) against the embedded FerretDB: after a node's first read a
 * heartbeat's authentication costs no database read, and a change written by another process (the node workflow's
 * state change, a review's rejection, a removal) reaches two independent caches, standing for two API processes,
 * within one read of the change log, far inside NODE_CACHE_TTL_MS.
 */
import { MongoClient } from 'mongodb';
import { NodeCache } from '../../../store/federation/node-cache';
import {
  nodeChangesCollection,
  NODE_CHANGES_KEEP_MS,
  NODE_CHANGES_SLOTS,
  NODE_CHANGES_SLOT_MS
} from '../../../store/federation/node-changes-ring';
import { NodeStore } from '../../../store/federation/nodes';
import { nodeDocument } from '../../support/node-document';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('node_cache');

const node = (id: string, seq: number) => nodeDocument(id, seq, 'online');

it('serves repeated reads from memory and follows changes written elsewhere within one log read', async () => {
  const writer = new NodeStore(testDb.db); // the worker's store
  await writer.nodes.insertMany([
    node('ext-custom-000001', 1),
    node('ext-custom-000002', 2),
    node('ext-custom-000003', 3)
  ]);
  // An hour of TTL: only the change log can make these caches see a change in time.
  const a = new NodeCache(new NodeStore(testDb.db), 3_600_000);
  const b = new NodeCache(new NodeStore(testDb.db), 3_600_000);
  await a.poll();
  await b.poll();
  for (const cache of [a, b])
    for (const id of ['ext-custom-000001', 'ext-custom-000002', 'ext-custom-000003'])
      expect((await cache.get(id))!.state).toBe('online');
  await a.poll();
  await b.poll();
  for (let i = 0; i < 50; i++) await a.get('ext-custom-000001');
  expect(a.stats.loads).toBe(3);
  expect(a.stats.hits).toBe(50);

  const later = new Date(Date.now() + 1).toISOString();
  await writer.setState('ext-custom-000001', 'offline', later, undefined);
  await writer.setState('ext-custom-000002', 'rejected', later, {
    decision: 'rejected',
    reviewer: 'admin',
    reason: 'test',
    at: later
  });
  await writer.delete('ext-custom-000003');
  await a.poll();
  await b.poll();
  for (const cache of [a, b]) {
    expect((await cache.get('ext-custom-000001'))!.state).toBe('offline');
    expect((await cache.get('ext-custom-000002'))!.state).toBe('rejected');
    expect(await cache.get('ext-custom-000003')).toBeNull();
  }
  // Only the removed node was read again (and found missing); the others were updated from the log.
  expect(a.stats.loads).toBe(4);
});

it('keeps a state this process caused over an older record, and a newer record over it', async () => {
  const writer = new NodeStore(testDb.db);
  await writer.nodes.insertOne({
    ...node('ext-custom-000010', 10),
    state: 'offline',
    state_changed_at: new Date(Date.now() - 60_000).toISOString()
  });
  const cache = new NodeCache(new NodeStore(testDb.db), 3_600_000);
  await cache.poll();
  expect((await cache.get('ext-custom-000010'))!.state).toBe('offline');
  const before = new Date(Date.now() - 1000).toISOString();
  cache.note('ext-custom-000010', 'online'); // this process woke it
  await writer.setState('ext-custom-000010', 'offline', before, undefined); // an older change, recorded late
  await cache.poll();
  expect((await cache.get('ext-custom-000010'))!.state).toBe('online');
  await writer.setState('ext-custom-000010', 'offline', new Date(Date.now() + 1).toISOString(), undefined);
  await cache.poll();
  expect((await cache.get('ext-custom-000010'))!.state).toBe('offline');
});

it('reads documents again after NODE_CACHE_TTL_MS when the change log is not followed', async () => {
  const writer = new NodeStore(testDb.db);
  await writer.nodes.insertOne(node('ext-custom-000020', 20));
  const cache = new NodeCache(new NodeStore(testDb.db), 50);
  expect((await cache.get('ext-custom-000020'))!.state).toBe('online');
  await writer.nodes.updateOne({ _id: 'ext-custom-000020' }, { $set: { state: 'rejected' } });
  await new Promise((r) => setTimeout(r, 80));
  expect((await cache.get('ext-custom-000020'))!.state).toBe('rejected');
});

it('group-commits concurrent state changes: each lands, in arrival order per node, with its change record', async () => {
  const writer = new NodeStore(testDb.db);
  const ids = Array.from({ length: 120 }, (_, i) => `ext-custom-${String(100 + i).padStart(6, '0')}`);
  await writer.nodes.insertMany(ids.map((id, i) => ({ ...node(id, 100 + i), state: 'offline' as const })));
  const cache = new NodeCache(new NodeStore(testDb.db), 3_600_000);
  await cache.poll();
  await Promise.all(ids.map((id) => cache.get(id)));
  const t = Date.now() + 1;
  await Promise.all([
    ...ids.map((id) => writer.setState(id, 'online', new Date(t).toISOString(), undefined)),
    writer.setState(ids[0]!, 'offline', new Date(t + 1).toISOString(), undefined)
  ]);
  const docs = new Map((await writer.nodes.find({ _id: { $in: ids } }).toArray()).map((d) => [d._id, d.state]));
  expect(docs.get(ids[0]!)).toBe('offline');
  expect(ids.slice(1).filter((id) => docs.get(id) !== 'online')).toEqual([]);
  await cache.poll();
  expect((await cache.get(ids[0]!))!.state).toBe('offline');
  expect((await Promise.all(ids.slice(1).map((id) => cache.get(id)))).filter((n) => n!.state !== 'online')).toEqual([]);
}, 60_000);

it('reads the nodes missed together in shared reads, not one read per node (a restart, a mass first heartbeat)', async () => {
  const writer = new NodeStore(testDb.db);
  const ids = Array.from({ length: 400 }, (_, i) => `ext-custom-${String(1000 + i).padStart(6, '0')}`);
  await writer.nodes.insertMany(ids.map((id, i) => node(id, 1000 + i)));
  const cache = new NodeCache(new NodeStore(testDb.db), 3_600_000);
  await cache.poll();
  // Every node's first heartbeat at once, plus a node that does not exist and a repeated id.
  const found = await Promise.all([...ids, 'ext-custom-999999', ids[7]!].map((id) => cache.get(id)));
  expect(found.slice(0, ids.length).map((n) => n?.node_id)).toEqual(ids);
  expect(found[ids.length]).toBeNull();
  expect(found[ids.length + 1]!.node_id).toBe(ids[7]);
  // The first miss is read alone, at once; the others waited for it and share the next read.
  expect(cache.stats.loads).toBe(ids.length + 2);
  expect(cache.stats.reads).toBeLessThanOrEqual(3);
  // Then from memory.
  await Promise.all(ids.map((id) => cache.get(id)));
  expect(cache.stats.reads).toBeLessThanOrEqual(3);
}, 60_000);

it('knows every node from one scan at start and a node registered elsewhere from its change record, with no read of its own', async () => {
  const writer = new NodeStore(testDb.db);
  const ids = Array.from({ length: 300 }, (_, i) => `ext-custom-${String(3000 + i).padStart(6, '0')}`);
  await writer.nodes.insertMany(ids.map((id, i) => node(id, 3000 + i)));
  // An API process restarting under its fleet: every node's first heartbeat arrives while the preload reads.
  const cache = new NodeCache(new NodeStore(testDb.db), 3_600_000);
  const preload = cache.preload();
  const found = await Promise.all(ids.map((id) => cache.get(id)));
  await preload;
  expect(found.map((n) => n?.node_id)).toEqual(ids);
  expect(cache.stats).toMatchObject({ loads: 0, reads: 1, hits: ids.length });
  expect(cache.stats.preloaded).toBeGreaterThanOrEqual(ids.length);

  // Another process registers a node: this cache learns it (key digest, brand, state) from the change log.
  await cache.poll();
  const registered = await new NodeStore(testDb.db).insertWithNextSequence((seq) => ({
    ...nodeDocument('ext-custom-004000', seq, 'pending_review'),
    api_key_hash: 'digest-4000'
  }));
  await cache.poll();
  expect(await cache.get(registered._id)).toMatchObject({
    node_id: 'ext-custom-004000',
    api_key_hash: 'digest-4000',
    brand: 'custom',
    state: 'pending_review'
  });
  expect(cache.stats).toMatchObject({ loads: 0, reads: 1, registered: 1 });
  // Its later changes apply as to any entry; an unknown node is still read (and not found).
  await writer.setState('ext-custom-004000', 'online', new Date(Date.now() + 1).toISOString(), undefined);
  await cache.poll();
  expect((await cache.get('ext-custom-004000'))!.state).toBe('online');
  expect(await cache.get('ext-custom-004999')).toBeNull();
  expect(cache.stats).toMatchObject({ loads: 1, reads: 2 });
}, 60_000);

it('refuses an id found to have no document without reading it again for NODE_CACHE_TTL_MS, until the log brings its registration', async () => {
  const ttlMs = 3000;
  const cache = new NodeCache(new NodeStore(testDb.db), ttlMs);
  await cache.poll();
  // A flood of requests naming unknown ids: one read each (shared), then answered from memory.
  const unknown = Array.from({ length: 50 }, (_, i) => `ext-custom-${String(7000 + i).padStart(6, '0')}`);
  expect(await Promise.all(unknown.map((id) => cache.get(id)))).toEqual(unknown.map(() => null));
  const { reads, loads } = cache.stats;
  for (let round = 0; round < 20; round++)
    expect(await Promise.all(unknown.map((id) => cache.get(id)))).toEqual(unknown.map(() => null));
  expect(cache.stats).toMatchObject({ reads, loads, absent: 20 * unknown.length });
  // One of them registers in another process: known from its change record at the next log read, no read of its own.
  await new NodeStore(testDb.db).insertWithNextSequence((seq) => ({
    ...nodeDocument(unknown[0]!, seq, 'pending_review'),
    api_key_hash: 'digest-7000'
  }));
  await cache.poll();
  expect(await cache.get(unknown[0]!)).toMatchObject({ node_id: unknown[0], api_key_hash: 'digest-7000' });
  expect(cache.stats).toMatchObject({ reads, loads });
  // After the TTL an unknown id is read again (a registration whose change record was lost is found by then).
  await new Promise((r) => setTimeout(r, ttlMs + 100));
  expect(await cache.get(unknown[1]!)).toBeNull();
  expect(cache.stats.loads).toBe(loads + 1);
}, 60_000);

it("a preload slower than the log's margin still applies the changes written while it read (a removal, a rejection)", async () => {
  const writer = new NodeStore(testDb.db);
  await writer.nodes.insertMany([node('ext-custom-005000', 5000), node('ext-custom-005001', 5001)]);
  // The preload's scan answers at once but its result arrives only when the test opens the gate (a slow preload).
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  class SlowScan extends NodeStore {
    override async allAuth(limit: number) {
      const docs = await super.allAuth(limit);
      await gate;
      return docs;
    }
  }
  const cache = new NodeCache(new SlowScan(testDb.db), 3_600_000);
  const preload = cache.preload();
  await new Promise((r) => setTimeout(r, 100));
  await writer.delete('ext-custom-005000');
  const later = new Date(Date.now() + 1).toISOString();
  await writer.setState('ext-custom-005001', 'rejected', later, {
    decision: 'rejected',
    reviewer: 'admin',
    reason: 'test',
    at: later
  });
  // Polls while the scan is out: the nodes are not held yet, so their records are skipped, and after the third poll
  // the records are older than the 5 s the log is read back.
  await cache.poll();
  await new Promise((r) => setTimeout(r, 6000));
  await cache.poll();
  await new Promise((r) => setTimeout(r, 1000));
  await cache.poll();
  open();
  await preload;
  await cache.poll();
  expect(await cache.get('ext-custom-005000')).toBeNull();
  expect((await cache.get('ext-custom-005001'))!.state).toBe('rejected');
}, 60_000);

it('reads the change log from the ring collections of the asked interval only, including a host writing ahead', async () => {
  const store = new NodeStore(testDb.db);
  const now = Date.now();
  const record = (id: string, writtenAt: number) => ({
    _id: `${id}:${writtenAt}`,
    node_id: id,
    state: 'online' as const,
    state_at: new Date(writtenAt),
    written_at: new Date(writtenAt)
  });
  const at = (ms: number) => testDb.db.collection<ReturnType<typeof record>>(nodeChangesCollection(ms));
  // A record written 30 s ago, one 4 s ahead (another host's clock), and a record older than the log keeps, left
  // in the collection this interval reuses (a quiet hub whose collection nobody emptied).
  await at(now - 30_000).insertOne(record('ext-custom-000020', now - 30_000));
  await at(now + 4_000).insertOne(record('ext-custom-000021', now + 4_000));
  await at(now).insertOne(record('ext-custom-000022', now - NODE_CHANGES_SLOTS * NODE_CHANGES_SLOT_MS));
  const ids = async (since: number) =>
    (await store.changesSince(new Date(since)))
      .map((r) => r.node_id)
      .filter((id) => /^ext-custom-00002[0-4]$/.test(id))
      .sort();
  expect(await ids(now - 1_000)).toEqual(['ext-custom-000021']);
  expect(await ids(now - 40_000)).toEqual(['ext-custom-000020', 'ext-custom-000021']);
  expect(await ids(now - NODE_CHANGES_KEEP_MS)).toEqual(['ext-custom-000020', 'ext-custom-000021']);
  // A reader (as a writer does) empties the next collections of records older than the log keeps, at most once per
  // interval and process: a quiet ring nobody writes to must not keep a lap-old collection where readers arrive.
  // (Two intervals ahead of `now`: still ahead of the reader below if the clock moved into the next interval meanwhile.)
  const ahead = at(now + 2 * NODE_CHANGES_SLOT_MS);
  await ahead.insertMany([
    record('ext-custom-000023', now - NODE_CHANGES_KEEP_MS - 20_000),
    record('ext-custom-000024', now + 1_000)
  ]);
  await new NodeStore(testDb.db).changesSince(new Date());
  const left = () => ahead.find({ node_id: { $in: ['ext-custom-000023', 'ext-custom-000024'] } }).toArray();
  for (let i = 0; i < 100 && (await left()).length > 1; i++) await new Promise((r) => setTimeout(r, 100));
  expect((await left()).map((r) => r.node_id)).toEqual(['ext-custom-000024']);
});

it("inserts change records again with a new stamp when their insert was slower than half the readers' margin", async () => {
  // The database answers the first change-log insert after 3 s (an overloaded database): a reader that read in
  // between may have moved past the record's stamp, so the writer inserts it again, stamped after the slow insert.
  let slow = 1;
  const slowDb = new Proxy(testDb.db, {
    get(target, prop, receiver) {
      if (prop !== 'collection') return Reflect.get(target, prop, receiver);
      return (name: string) => {
        const collection = target.collection(name);
        if (!name.startsWith('node_changes_')) return collection;
        return new Proxy(collection, {
          get(c, p, r) {
            if (p !== 'insertOne' || slow <= 0) return Reflect.get(c, p, r);
            slow--;
            return async (doc: unknown) => {
              await new Promise((res) => setTimeout(res, 3000));
              return c.insertOne(doc as never);
            };
          }
        });
      };
    }
  });
  const writer = new NodeStore(slowDb);
  await writer.nodes.insertOne(node('ext-custom-000030', 30));
  const before = Date.now();
  await writer.setState('ext-custom-000030', 'offline', new Date().toISOString(), undefined);
  const records = (await writer.changesSince(new Date(before - 1000))).filter((r) => r.node_id === 'ext-custom-000030');
  expect(records).toHaveLength(2);
  const stamps = records.map((r) => r.written_at.getTime()).sort((a, b) => a - b);
  expect(stamps[1]! - stamps[0]!).toBeGreaterThanOrEqual(3000);
}, 30_000);
