/**
 * The node directory's index (store/federation/node-index.ts) against the embedded FerretDB: on a random fleet,
 * after random registrations, state changes, liveness transitions and removals written by another store (another
 * process), every page, filter, total and count the index serves, once its process has read the change log, is the
 * one the straightforward query over the node documents gives (the query the directory ran before: count, sort by
 * seq, skip, limit). Nodes the log never announced (stored around the store, a registration whose record was lost)
 * are known from the preload or read from their documents when a record names them.
 */
import { BRAND_CODES, formatNodeId, type BrandCode, type NodeState } from '../../../core/federation/vocabulary';
import { NodeCache } from '../../../store/federation/node-cache';
import type { NodeDocument } from '../../../store/federation/node-document';
import { NodeStore, PUBLIC_NODE_PROJECTION, publicNode } from '../../../store/federation/nodes';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('node_index');

const STATES: NodeState[] = ['pending_review', 'online', 'offline', 'rejected'];
const BRANDS: BrandCode[] = ['openai', 'mistral', 'qwen', 'custom'];

/** A small deterministic generator, so a failure can be replayed from its seed. */
function random(seed: number) {
  let s = seed;
  const next = () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
  return {
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!
  };
}

/** The directory as it was read before the index: from the node documents alone. */
async function straightforward(
  store: NodeStore,
  filter: { state?: NodeState; brand?: BrandCode },
  offset: number,
  limit: number
) {
  const query: Record<string, unknown> = {};
  if (filter.state) query.state = filter.state;
  if (filter.brand) query['brand.code'] = filter.brand;
  const [total, docs] = await Promise.all([
    store.nodes.countDocuments(query),
    store.nodes.find(query, { projection: PUBLIC_NODE_PROJECTION }).sort({ seq: 1 }).skip(offset).limit(limit).toArray()
  ]);
  return { total, nodes: docs.map(publicNode) };
}

async function straightforwardAggregates(store: NodeStore) {
  const docs = await store.nodes.find({}).toArray();
  const byState: Record<string, number> = {};
  const byBrand: Record<string, number> = {};
  let memoryGb = 0;
  for (const d of docs) {
    byState[d.state] = (byState[d.state] ?? 0) + 1;
    byBrand[d.brand.code] = (byBrand[d.brand.code] ?? 0) + 1;
    if (d.state !== 'rejected') memoryGb += d.instance?.memory_gb ?? 0;
  }
  return { byState, byBrand, memoryGb, total: docs.length };
}

function document(seq: number, brand: BrandCode, state: NodeState, memory: number | null, at: string): NodeDocument {
  return {
    _id: formatNodeId(brand, seq),
    seq,
    name: `node ${seq}`,
    brand: { code: brand, model_base: null },
    instance: { os: null, cpu: null, memory_gb: memory, gpu: null },
    capabilities: ['chat'],
    api_key_hash: `digest-${seq}`,
    state,
    created_at: at,
    state_changed_at: at,
    review: null
  };
}

it('serves the same pages, totals and counts as the query over the node documents, through changes and removals', async () => {
  const rnd = random(20261129);
  const writer = new NodeStore(testDb.db); // another process: the API that registers, the worker that changes states
  let clock = Date.now() - 3_600_000;
  const tick = () => new Date((clock += 1000)).toISOString();

  // Nodes stored before this process starts, some around the store (no change record): the preload finds them.
  await writer.nodes.insertMany(
    Array.from({ length: 40 }, (_, i) =>
      document(i + 1, rnd.pick(BRANDS), rnd.pick(STATES), rnd.int(4) === 0 ? null : 8 * rnd.int(9), tick())
    )
  );
  const register = (brand: BrandCode, memory: number | null, state: NodeState = 'pending_review') =>
    writer.insertWithNextSequence((seq) => document(seq, brand, state, memory, tick()));
  // The counter starts above the nodes stored by hand.
  await writer.nextSequence(40);
  for (let i = 0; i < 120; i++) await register(rnd.pick(BRANDS), 8 * rnd.int(9), rnd.pick(STATES));

  const reader = new NodeStore(testDb.db);
  const cache = new NodeCache(reader, 3_600_000);
  await cache.poll();
  await cache.preload();
  await cache.poll();

  const ids = async () => (await writer.nodes.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
  const compare = async (round: number) => {
    await cache.poll();
    await reader.index.settled();
    const where = `round ${round}`;
    expect([where, await reader.aggregates()]).toEqual([where, await straightforwardAggregates(writer)]);
    const total = (await ids()).length;
    const filters: { state?: NodeState; brand?: BrandCode }[] = [
      {},
      ...STATES.map((state) => ({ state })),
      ...BRANDS.map((brand) => ({ brand })),
      { state: rnd.pick(STATES), brand: rnd.pick(BRANDS) },
      { brand: 'deepseek' }
    ];
    for (const filter of filters) {
      const offset = rnd.pick([0, 0, rnd.int(total + 5), Math.max(0, total - 3)]);
      const limit = rnd.pick([1, 5, 20, 50, 200]);
      const got = await reader.list(filter, { offset, limit });
      const want = await straightforward(writer, filter, offset, limit);
      expect([where, filter, offset, limit, got]).toEqual([where, filter, offset, limit, want]);
    }
  };
  await compare(0);

  for (let round = 1; round <= 12; round++) {
    const known = await ids();
    const ops = 5 + rnd.int(20);
    for (let i = 0; i < ops; i++) {
      const op = rnd.int(10);
      const id = rnd.pick(known);
      if (op < 4) {
        // A state change or review decision (the node workflow), with its change record.
        await writer.setState(id, rnd.pick(STATES), tick(), undefined);
      } else if (op < 6) {
        // The presence sweeper's liveness transition (conditional on the state it expects).
        const doc = await writer.nodes.findOne({ _id: id });
        if (doc && (doc.state === 'online' || doc.state === 'offline')) {
          const to = doc.state === 'online' ? 'offline' : 'online';
          await writer.applyLiveness([
            { node_id: id, from: doc.state, to, at: tick(), reason: 'test', seq: (doc.liveness_seq ?? 0) + 1 }
          ]);
        }
      } else if (op < 7) {
        await writer.delete(id);
      } else if (op < 9) {
        await register(rnd.pick(BRANDS), rnd.int(3) === 0 ? null : 8 * rnd.int(9));
      } else {
        // A registration whose change record was lost (it is best effort): known once a record names it.
        const seq = await writer.nextSequence();
        const doc = document(seq, rnd.pick(BRANDS), 'pending_review', 16, tick());
        await writer.nodes.insertOne(doc);
        await writer.setState(doc._id, 'online', tick(), undefined);
      }
    }
    // Half the rounds read the log between the writes too (changes arriving over several reads).
    if (round % 2 === 0) await cache.poll();
    await compare(round);
  }

  // A second process starting now loads the same directory from its preload and the log.
  const late = new NodeStore(testDb.db);
  const lateCache = new NodeCache(late, 3_600_000);
  await lateCache.poll();
  await lateCache.preload();
  await lateCache.poll();
  expect(await late.aggregates()).toEqual(await straightforwardAggregates(writer));
  expect(await late.list({}, { offset: 0, limit: 500 })).toEqual(await straightforward(writer, {}, 0, 500));
});

it('lists a registration this process answered before its next read of the log', async () => {
  const store = new NodeStore(testDb.db);
  const cache = new NodeCache(store, 3_600_000);
  await cache.preload();
  const before = (await store.aggregates()).total;
  const doc = await store.insertWithNextSequence((seq) =>
    document(seq, 'zhipu', 'pending_review', 32, new Date().toISOString())
  );
  const page = await store.list({ brand: 'zhipu', state: 'pending_review' }, { offset: 0, limit: 200 });
  expect(page.nodes.map((n) => n.node_id)).toContain(doc._id);
  expect((await store.aggregates()).total).toBe(before + 1);
});

it('a removal read in the log keeps a node read before it out', async () => {
  const writer = new NodeStore(testDb.db);
  const doc = await writer.insertWithNextSequence((seq) =>
    document(seq, 'baidu', 'online', 8, new Date().toISOString())
  );
  const reader = new NodeStore(testDb.db);
  const cache = new NodeCache(reader, 3_600_000);
  // The preload reads the node; its removal is written before the preload's replay of the log.
  await cache.preload();
  await writer.delete(doc._id);
  await cache.poll();
  expect((await reader.list({ brand: 'baidu' }, { offset: 0, limit: 50 })).nodes.map((n) => n.node_id)).not.toContain(
    doc._id
  );
  expect(BRAND_CODES).toContain('baidu');
});
