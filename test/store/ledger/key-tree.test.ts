/**
 * The key tree's writer (store/ledger/key-tree.ts, key-tree-indexer.ts) beyond what the reads equivalence test
 * checks: a batch written again after a crash (its size never recorded) ends in the same documents as one
 * written once, and of several processes running the indexer one writes at a time, another taking over when the
 * holder stops renewing its lease; a tree of the earlier layout is rebuilt; a prefix with thousands of children keeps
 * its documents small. (Answers against a full read: ledger-reads-equivalence.test.ts.)
 */
import { Ledger } from '../../../store/ledger/ledger';
import { LEDGER_KEY_TREE_COLLECTION, NODE_SEQS, type KeyTreeDocument } from '../../../store/ledger/key-tree';
import { useStoreDb } from '../../support/store-db';

const once = useStoreDb('key_tree_once');
const twice = useStoreDb('key_tree_twice');
const leased = useStoreDb('key_tree_lease');
const earlier = useStoreDb('key_tree_earlier');
const wide = useStoreDb('key_tree_wide');

/** Keys sharing prefixes at every depth, splitting surrogate pairs' neighbours, and prefixes of one another. */
const keyOf = (i: number) =>
  [
    `node.n${i % 37}.metric.${['cpu', 'cpus', 'mem'][i % 3]}`,
    `app.config${'.v2'.repeat(i % 4)}`,
    `用户.${i % 11}.笔记`,
    `${['😀', '😁', '😀😁'][i % 3]}.${i % 5}`,
    `k${i}`
  ][i % 5]!;

/** Every seventh entry an event: no version of its key. */
const kindOf = (i: number) => (i % 7 === 3 ? ('event' as const) : ('truth' as const));

async function fill(ledger: Ledger, count: number): Promise<void> {
  await ledger.appendBulk(
    Array.from({ length: count }, (_, i) => ({ kind: kindOf(i), key: keyOf(i), value: { i } })),
    250
  );
  await ledger.headPublished();
}

/** The tree's nodes and edges, without the lease and size records. */
async function nodes(ledger: Ledger): Promise<KeyTreeDocument[]> {
  const docs = await ledger.keyTree.nodes.find({}).toArray();
  return docs.filter((d) => !d._id.startsWith('#')).sort((a, b) => (a._id < b._id ? -1 : 1));
}

it('a batch applied again after a crash leaves the same tree', async () => {
  const [a, b] = [new Ledger(once.db), new Ledger(twice.db)];
  await Promise.all([fill(a, 1200), fill(b, 1200)]);
  // The writer published every key beside its position lists: the indexer reads them 256 to a document.
  const published = await a.engine.positions.keys(1, 1200);
  expect([...published.keys()].sort((x, y) => x - y)).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
  for (const [seq, key] of published) expect(key).toEqual({ key: keyOf(seq - 1), truth: kindOf(seq - 1) === 'truth' });
  // A backlog larger than scanBacklog whose keys are published: read from them, batch by batch.
  expect(await a.keyTreeIndexer({ scanBacklog: 100 }).catchUp()).toBe(1200);

  // The other ledger, as if begun before the writer published keys (their documents removed): built to 700 by a
  // pass over the collection (as such a backlog is), then the tree written on to 1200 (each entry read by `_id`) by a
  // process that stopped before recording its size (which stays at 700), then a new process resumes from 700.
  await twice.db.collection('ledger_positions').deleteMany({ _id: { $regex: '^keys:' } } as never);
  expect(await b.engine.positions.keys(1, 1200)).toEqual(new Map());
  expect(await b.keyTreeIndexer({ scanBacklog: 100 }).catchUp({ upTo: 700 })).toBe(700);
  expect(await b.keyTreeIndexer().catchUp()).toBe(1200);
  await b.keyTree.nodes.updateOne({ _id: '#indexed:edges' }, { $set: { size: 700 } });
  expect(await b.keyTreeIndexer().catchUp()).toBe(1200);

  const [treeA, treeB] = await Promise.all([nodes(a), nodes(b)]);
  expect(treeB).toEqual(treeA);
  // A node at every key and branch, each with at most NODE_SEQS seqs, ascending.
  const byPrefix = new Map(treeA.filter((d) => d._id.startsWith('/')).map((n) => [n._id.slice(1), n]));
  for (let i = 0; i < 1200; i++) expect(byPrefix.has(keyOf(i))).toBe(true);
  for (const n of byPrefix.values()) {
    expect(n.s!.length).toBeLessThanOrEqual(NODE_SEQS);
    expect([...n.s!].sort((x, y) => x - y)).toEqual(n.s);
  }
  // Every node but the root has one edge, named by its prefix cut one code point after its parent's.
  const edges = treeA.filter((d) => d._id.startsWith('>'));
  expect(edges.map((e) => e.p).sort()).toEqual([...byPrefix.keys()].filter((p) => p !== '').sort());
  for (const e of edges) expect(e.p!.startsWith(e._id.slice(1))).toBe(true);
  expect(byPrefix.get('')!.s).toEqual(Array.from({ length: NODE_SEQS }, (_, i) => i + 1));
  // Each key's versions: its truths in seq order, counted once though the batch was written twice.
  const versions = await b.truthVersions('app.config.v2', { limit: 200 });
  const want = Array.from({ length: 1200 }, (_, i) => i).filter(
    (i) => keyOf(i) === 'app.config.v2' && kindOf(i) === 'truth'
  );
  expect(versions!.versions).toBe(want.length);
  expect(versions!.page.map((v) => [v.version, v.entry.seq])).toEqual(
    want
      .map((i, n) => [n + 1, i + 1])
      .reverse()
      .slice(0, 200)
  );
  // Surrogate pairs are never split: '😀' and '😁' share their high surrogate, and branch at the root.
  expect([...byPrefix.keys()].every((p) => p === p.replace(/[\uD800-\uDBFF]$/, ''))).toBe(true);
}, 90_000);

it('one process at a time keeps the tree; another takes over when the holder stops', async () => {
  const ledger = new Ledger(leased.db);
  await fill(ledger, 500);
  const options = { pollMs: 50, leaseMs: 8000 };
  const stops = [0, 1, 2].map(() => ledger.keyTreeIndexer(options).start());
  const indexed = async (size: number) => {
    const deadline = Date.now() + 30_000;
    while ((await ledger.keyTree.indexedSize()) !== size) {
      if (Date.now() > deadline) throw new Error(`the tree did not reach ${size}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await indexed(500);
  const leases = async () =>
    (await leased.db.collection<KeyTreeDocument>(LEDGER_KEY_TREE_COLLECTION).find({}).toArray())
      .filter((d) => d._id.startsWith('#lease#'))
      .map((d) => d._id);
  expect(await leases()).toEqual(['#lease#1']);

  // Every process stops; one comes back and takes the lease over once it is not renewed.
  for (const stop of stops) stop();
  await fill(ledger, 300);
  const stopLast = ledger.keyTreeIndexer(options).start();
  try {
    await indexed(800);
    expect((await leases()).sort()).toEqual(['#lease#1', '#lease#2']);
  } finally {
    stopLast();
  }
}, 90_000);

it('a tree of the earlier layout is dropped and built again as edges', async () => {
  const ledger = new Ledger(earlier.db);
  await fill(ledger, 300);
  // The first layout: nodes listing their children in `c`, its size in `#indexed`.
  const tree = earlier.db.collection<KeyTreeDocument & { c?: string[] }>(LEDGER_KEY_TREE_COLLECTION);
  await tree.insertMany([
    { _id: '/', c: ['k', 'node.n'], s: [1, 2, 3] },
    { _id: '/node.n', c: [], s: [1] },
    { _id: '#indexed', size: 300 }
  ]);
  expect(await ledger.keyTree.indexedSize()).toBeNull();
  expect(await ledger.keyTreeIndexer().catchUp()).toBe(300);
  const docs = await tree.find({}).toArray();
  expect(docs.filter((d) => d.c !== undefined || d._id === '#indexed')).toEqual([]);
  expect(await ledger.keyTree.oldest('k1')).toEqual(
    Array.from({ length: 300 }, (_, i) => i + 1).filter((seq) => keyOf(seq - 1).startsWith('k1'))
  );
}, 90_000);

it('a prefix with thousands of children keeps small documents', async () => {
  const ledger = new Ledger(wide.db);
  // 3,000 distinct keys under one prefix, as unique event keys make: every new key inserts a node and an edge.
  await ledger.appendBulk(
    Array.from({ length: 3000 }, (_, i) => ({ kind: 'truth' as const, key: `event.${i * 7919}`, value: { i } })),
    500
  );
  await ledger.headPublished();
  expect(await ledger.keyTreeIndexer().catchUp({ upTo: 1500 })).toBe(1500);
  expect(await ledger.keyTreeIndexer().catchUp()).toBe(3000);
  const docs = await nodes(ledger);
  const largest = Math.max(...docs.map((d) => JSON.stringify(d).length));
  // A node holds at most NODE_SEQS seqs (about 1.4 KiB), an edge one prefix: nothing grows with the children.
  expect(largest).toBeLessThan(2000);
  expect(await ledger.keyTree.oldest('event.1')).toEqual(
    Array.from({ length: 3000 }, (_, i) => i)
      .filter((i) => `${i * 7919}`.startsWith('1'))
      .map((i) => i + 1)
      .slice(0, NODE_SEQS)
  );
  expect(await ledger.keyTree.oldest('event.x')).toEqual([]);
}, 90_000);
