/**
 * The quota store against the embedded FerretDB: slots are taken in order across stores (as across API
 * processes), never more than the limit, a store that falls behind finds the next free slot, a store that starts
 * afresh finds a counter's end by `_id` lookups and claims the slots others gave back before it refuses, refusals take
 * no slot,
 * a steady writer's slots are leased ahead and the unused ones given back once it is idle, and the first use of a
 * day deletes the slots of days before yesterday. (The HTTP behaviour, 429 and exactness under a burst from two
 * API processes, is in test/api/truth-ledger.test.ts.)
 */
import { MongoClient } from 'mongodb';
import { QuotaStore } from '../../../store/ledger/quota';
import { eventually } from '../../support/service';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('quota', { indexes: false });

/** A client of the test database that records the filter of every `find` it sends. */
async function findsCounted(): Promise<{ monitored: MongoClient; reads: string[] }> {
  const monitored = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  const reads: string[] = [];
  monitored.on('commandStarted', (event) => {
    if (event.commandName === 'find') reads.push(JSON.stringify((event.command as { filter?: unknown }).filter));
  });
  return { monitored, reads };
}

it('hands out slots 1..limit once each across two stores, never more, and all of them once the leases are given back', async () => {
  const options = { leaseIdleMs: 200 };
  const [a, b] = [new QuotaStore(testDb.db, undefined, options), new QuotaStore(testDb.db, undefined, options)];
  const counts: number[] = [];
  for (let i = 0; i < 30; i++) counts.push((await a.consume('truth:did:a', '2026-11-21', 50)).count);
  // a leases ahead: its uses are 1..30 in order, and b (which has never seen this counter) finds the first slot
  // past what a holds by lookups.
  expect(counts).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  const first = await b.consume('truth:did:a', '2026-11-21', 50);
  expect(first.count).toBeGreaterThan(30);
  counts.push(first.count);
  counts.push((await a.consume('truth:did:a', '2026-11-21', 50)).count);
  const burst = await Promise.all(
    Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).consume('truth:did:a', '2026-11-21', 50))
  );
  counts.push(...burst.filter((r) => r.allowed).map((r) => r.count));
  // Never a slot twice, never past the limit; a slot one store leased and did not use can make the other refuse
  // (bounded under-admission) until it is given back.
  expect(new Set(counts).size).toBe(counts.length);
  expect(Math.max(...counts)).toBeLessThanOrEqual(50);
  expect(burst.filter((r) => !r.allowed).length).toBeGreaterThanOrEqual(12);
  // Once both have been idle, every unused leased slot is deleted and can be taken: exactly 50 uses in all.
  await new Promise((r) => setTimeout(r, 300));
  await Promise.all([a.releaseIdleLeases(), b.releaseIdleLeases()]);
  for (let i = 0; i < 30; i++) {
    const r = await (i % 2 ? a : b).consume('truth:did:a', '2026-11-21', 50);
    if (r.allowed) counts.push(r.count);
  }
  expect([...counts].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  expect(await testDb.db.collection('quota_uses').countDocuments({ scope: 'truth:did:a' })).toBe(50);
  // Other scopes and days have quotas of their own.
  expect(await b.consume('truth:did:b', '2026-11-21', 50)).toEqual({ allowed: true, count: 1 });
  expect(await b.consume('truth:did:a', '2026-11-22', 50)).toEqual({ allowed: true, count: 1 });
});

it('leases slots ahead for a steady writer and gives the unused ones back once it is idle', async () => {
  const store = new QuotaStore(testDb.db, undefined, { leaseIdleMs: 200 });
  const slots = () => testDb.db.collection('quota_uses').countDocuments({ scope: 'truth:did:steady' });
  for (let i = 1; i <= 20; i++)
    expect(await store.consume('truth:did:steady', '2026-11-21', 2000)).toEqual({ allowed: true, count: i });
  // More slots inserted than used (the lease), at most one block more.
  const held = await slots();
  expect(held).toBeGreaterThan(20);
  expect(held).toBeLessThanOrEqual(20 + 32);
  await eventually(
    async () => ((await slots()) === 20 ? true : undefined),
    10000,
    'the unused leased slots to be given back'
  );
  // The given-back slots are handed out again first, in order.
  expect(await store.consume('truth:did:steady', '2026-11-21', 2000)).toEqual({ allowed: true, count: 21 });
  await store.close();
  expect(await slots()).toBe(21);
});

it('takes exactly its own slot for each use of a writer idle between uses, and gives nothing back', async () => {
  const client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  let inserted = 0;
  let deletes = 0;
  client.on('commandStarted', (e) => {
    if (e.commandName === 'insert') inserted += (e.command as { documents: unknown[] }).documents.length;
    // Give-backs (by _id); not the prune of days before yesterday at the day's first use (by day).
    if (e.commandName === 'delete' && (e.command as { deletes: { q: object }[] }).deletes.some((d) => '_id' in d.q))
      deletes++;
  });
  const store = new QuotaStore(client.db(testDb.db.databaseName), undefined, { leaseIdleMs: 200 });
  try {
    for (let i = 1; i <= 4; i++) {
      expect(await store.consume('truth:did:rare', '2026-11-21', 2000)).toEqual({ allowed: true, count: i });
      await new Promise((r) => setTimeout(r, 300));
      await store.releaseIdleLeases();
    }
    expect({ inserted, deletes }).toEqual({ inserted: 4, deletes: 0 });
  } finally {
    await store.close();
    await client.close();
  }
});

// One `_id` equality each: FerretDB answers those from its index, an `_id: { $in }` by reading the whole collection.
it('gives leased slots back by one `_id` equality each', async () => {
  const client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  const deletes: unknown[] = [];
  client.on('commandStarted', (e) => {
    if (e.commandName === 'delete') deletes.push(...(e.command.deletes as { q: unknown }[]).map((d) => d.q));
  });
  try {
    const store = new QuotaStore(client.db(testDb.db.databaseName), undefined, { leaseIdleMs: 200 });
    const scope = 'truth:did:by-id';
    const slots = () => testDb.db.collection('quota_uses').countDocuments({ scope });
    for (let i = 1; i <= 20; i++) await store.consume(scope, '2026-11-21', 2000);
    expect(await slots()).toBeGreaterThan(20);
    await eventually(
      async () => ((await slots()) === 20 ? true : undefined),
      10000,
      'the unused leased slots to be given back'
    );
    await store.close();
    const giveBacks = deletes.filter((q) => JSON.stringify(q).includes(scope));
    expect(giveBacks.length).toBeGreaterThan(0);
    const slotId = expect.stringMatching(new RegExp(`^${scope}\\|2026-11-21\\|\\d+$`));
    for (const q of giveBacks) expect(q).toEqual({ _id: slotId });
  } finally {
    await client.close();
  }
});

it('deletes the slots of days before yesterday on the first use of a day', async () => {
  const store = new QuotaStore(testDb.db);
  await store.consume('truth:did:c', '2026-11-18', 5);
  await store.consume('truth:did:c', '2026-11-19', 5);
  await store.consume('truth:did:c', '2026-11-20', 5);
  const days = async () => (await testDb.db.collection('quota_uses').distinct('day', { scope: 'truth:did:c' })).sort();
  await eventually(
    async () => ((await days()).join() === '2026-11-19,2026-11-20' ? true : undefined),
    10000,
    'the 2026-11-18 slots to be deleted'
  );
});

it('serialises the callers of one process: a burst on one counter takes one slot per use in a few grouped inserts, none refused', async () => {
  const monitored = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  try {
    const inserts: { refused: boolean; documents?: number }[] = [];
    const documents = new Map<number, number>();
    monitored.on('commandStarted', (event) => {
      if (event.commandName === 'insert')
        documents.set(event.requestId, (event.command as { documents: unknown[] }).documents.length);
    });
    monitored.on('commandSucceeded', (event) => {
      if (event.commandName === 'insert')
        inserts.push({
          refused: ((event.reply as { writeErrors?: unknown[] }).writeErrors?.length ?? 0) > 0,
          documents: documents.get(event.requestId)
        });
    });
    monitored.on('commandFailed', (event) => {
      if (event.commandName === 'insert') inserts.push({ refused: true });
    });
    const store = new QuotaStore(monitored.db(testDb.db.databaseName));
    const burst = await Promise.all(
      Array.from({ length: 64 }, () => store.consume('truth:did:burst', '2026-11-21', 1000))
    );
    expect(burst.map((r) => r.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 64 }, (_, i) => i + 1));
    // The first caller's slot goes alone; then blocks for the callers waiting (at most 32 a claim).
    expect(inserts[0]!.documents).toBe(1);
    expect(inserts.length).toBeLessThanOrEqual(6);
    expect(inserts.filter((i) => i.refused)).toHaveLength(0);
    await store.close();
    expect(await testDb.db.collection('quota_uses').countDocuments({ scope: 'truth:did:burst' })).toBe(64);
  } finally {
    await monitored.close();
  }
});

it('hands a refunded slot out again, in this process and, once given back, to a process that starts afresh', async () => {
  const store = new QuotaStore(testDb.db, undefined, { leaseIdleMs: 200 });
  const slots = () => testDb.db.collection('quota_uses').countDocuments({ scope: 'truth:did:refund' });
  for (let i = 0; i < 3; i++) await store.consume('truth:did:refund', '2026-11-21', 3);
  expect((await store.consume('truth:did:refund', '2026-11-21', 3)).allowed).toBe(false);
  // A refunded slot stays this process's (back in its lease) and is its next use.
  await store.refund('truth:did:refund', '2026-11-21', 2);
  expect(await store.consume('truth:did:refund', '2026-11-21', 3)).toEqual({ allowed: true, count: 2 });
  expect((await store.consume('truth:did:refund', '2026-11-21', 3)).allowed).toBe(false);

  // Refunded and left unused: given back (deleted) once the scope is idle, then another process can take it.
  await store.refund('truth:did:refund', '2026-11-21', 1);
  await eventually(async () => ((await slots()) === 2 ? true : undefined), 10000, 'the refunded slot to be given back');
  const fresh = new QuotaStore(testDb.db);
  expect(await fresh.consume('truth:did:refund', '2026-11-21', 3)).toEqual({ allowed: true, count: 1 });
  expect((await fresh.consume('truth:did:refund', '2026-11-21', 3)).allowed).toBe(false);
  expect(await slots()).toBe(3);
  await Promise.all([store.close(), fresh.close()]);
});

/** Another process took slots 1-10 of `scope` and gave 3, 4 and 8 back. */
async function counterWithHoles(scope: string, day: string): Promise<void> {
  await testDb.db
    .collection('quota_uses')
    .insertMany(
      [1, 2, 5, 6, 7, 9, 10].map((n) => ({ _id: `${scope}|${day}|${n}` as never, scope, day, n, at: new Date() }))
    );
}

it('finds the end of a counter by _id and reads its holes only once nothing is left above, before refusing', async () => {
  const scope = 'truth:did:holes-indexed';
  const day = '2026-11-21';
  await counterWithHoles(scope, day);
  const { monitored, reads } = await findsCounted();
  try {
    const store = new QuotaStore(monitored.db(testDb.db.databaseName));
    const counts: number[] = [];
    for (let i = 0; i < 4; i++) counts.push((await store.consume(scope, day, 12)).count);
    // The search stops at the first hole (3); the slots others hold are refused inserts, skipped.
    expect(counts).toEqual([3, 4, 8, 11]);
    expect(reads.every((r) => /^\{"_id":"[^"]+"\}$/.test(r))).toBe(true);
    expect(reads.length).toBeLessThanOrEqual(6);
    // The last slot, then the holes are read (none left): refused, never past the limit.
    expect((await store.consume(scope, day, 12)).count).toBe(12);
    expect(reads.filter((r) => !r.startsWith('{"_id"'))).toEqual([]);
    expect((await store.consume(scope, day, 12)).allowed).toBe(false);
    expect(reads.filter((r) => !r.startsWith('{"_id"'))).toEqual([JSON.stringify({ scope: { $in: [scope] }, day })]);
    await store.close();
    // A hole left below what a fresh store's search finds is still handed out before a refusal.
    await testDb.db.collection('quota_uses').deleteOne({ _id: `${scope}|${day}|6` as never });
    const fresh = new QuotaStore(testDb.db);
    expect(await fresh.consume(scope, day, 12)).toEqual({ allowed: true, count: 6 });
    expect((await fresh.consume(scope, day, 12)).allowed).toBe(false);
    await fresh.close();
  } finally {
    await monitored.close();
  }
});

it('reads the holes of counters that run out together in grouped reads, each handing out its hole before refusing', async () => {
  const day = '2026-11-21';
  const scopes = Array.from({ length: 16 }, (_, i) => `truth:did:cold-${i}`);
  // Another process took slots 1-4 of each DID's 4 today and gave slot 2 back.
  await testDb.db
    .collection('quota_uses')
    .insertMany(
      scopes.flatMap((scope) =>
        [1, 3, 4].map((n) => ({ _id: `${scope}|${day}|${n}`, scope, day, n, at: new Date() }))
      ) as never[]
    );
  const { monitored, reads } = await findsCounted();
  try {
    const store = new QuotaStore(monitored.db(testDb.db.databaseName));
    // A burst of writes of the 16 DIDs this store has not seen, two each: the hole, then a refusal.
    const burst = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        store.consume(scopes[i % 16]!, day, 4).then((r) => ({ scope: scopes[i % 16]!, ...r }))
      )
    );
    for (const scope of scopes)
      expect(burst.filter((r) => r.scope === scope).map((r) => r.count)).toEqual(expect.arrayContaining([2, 5]));
    // The holes of the counters that ran out while a read was under way are read together in the next.
    const byScope = reads.filter((r) => !r.startsWith('{"_id"'));
    expect(byScope.length).toBeGreaterThan(0);
    expect(byScope.length).toBeLessThan(scopes.length);
    await store.close();
  } finally {
    await monitored.close();
  }
});

it("keeps today's counters when a late use of yesterday arrives (as one forwarded around midnight)", async () => {
  const scope = 'truth:did:late';
  const { monitored, reads } = await findsCounted();
  try {
    const store = new QuotaStore(monitored.db(testDb.db.databaseName));
    const today = [];
    for (let i = 0; i < 3; i++) today.push((await store.consume(scope, '2026-11-22', 100)).count);
    expect((await store.consume(scope, '2026-11-21', 100)).allowed).toBe(true);
    for (let i = 0; i < 3; i++) today.push((await store.consume(scope, '2026-11-22', 100)).count);
    expect(today).toEqual([1, 2, 3, 4, 5, 6]);
    // Today's counter was read once: the late use did not make the store forget it (and read it again).
    expect(reads.filter((r) => r.includes('2026-11-22'))).toHaveLength(1);
    await store.close();
  } finally {
    await monitored.close();
  }
});
