/**
 * Two ledgers (as two API processes) appending at once against the embedded FerretDB: batches are inserted with one
 * ordered insertMany each, so a refused batch must settle exactly the entries that landed before the refusal and
 * append the rest after the other writer's entries. Every write resolves once, seqs are contiguous, a key used by
 * both processes gives one entry, and verify recomputes the stored root.
 */
import { MongoClient } from 'mongodb';
import { Ledger } from '../../../store/ledger/ledger';
import { verifyLedger } from '../../../store/ledger/ledger-verify';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('ledger_race');

it('keeps seqs contiguous and every write exactly once when two writers race with batches', async () => {
  const [a, b] = [new Ledger(testDb.db), new Ledger(testDb.db)];
  const writes = Array.from({ length: 600 }, (_, i) => {
    const ledger = i % 2 ? a : b;
    // Every tenth write carries a key that the other process also uses for its neighbour.
    const idempotencyKey = i % 10 < 2 ? `shared-${Math.floor(i / 10)}` : null;
    // Entries of several categories, so the tally each carries is checked under the race too.
    const [kind, truth_type] = (
      [
        ['truth', 'data'],
        ['truth', null],
        ['event', 'config'],
        ['truth', 'risk']
      ] as const
    )[i % 4]!;
    return ledger.append({
      kind,
      key: `race.${i}`,
      value: { i },
      truth_type,
      did: 'did:example:racer',
      idempotencyKey
    });
  });
  const results = await Promise.all(writes);
  const fresh = results.filter((r) => !r.duplicate);
  const duplicates = results.filter((r) => r.duplicate);
  // 60 shared keys, each written twice: one entry and one duplicate answer pointing at it.
  expect(duplicates).toHaveLength(60);
  expect(new Set(fresh.map((r) => r.entry.seq)).size).toBe(540);
  for (const d of duplicates) expect(fresh.some((f) => f.entry.seq === d.entry.seq)).toBe(true);
  const all = await testDb.db
    .collection('ledger')
    .find({}, { projection: { _id: 1 } })
    .sort({ _id: 1 })
    .toArray();
  expect(all.map((d) => d._id)).toEqual(Array.from({ length: 540 }, (_, i) => i + 1));
  expect(await verifyLedger(a)).toMatchObject({ consistent: true, ledger_lines: 540, first_bad_seq: null });
  // Head records follow the answers (store/ledger/commit-engine.ts, publish): once both are in, either process reads the head.
  await Promise.all([a.headPublished(), b.headPublished()]);
  expect((await a.head()).size).toBe(540);
  // The tally at the head (verify checked every entry's) counts the entries by category.
  const stored = await testDb.db
    .collection('ledger')
    .find({}, { projection: { kind: 1, truth_type: 1 } })
    .toArray();
  const count = (kind: string, type: string | null) =>
    stored.filter((d) => d.kind === kind && d.truth_type === type).length;
  expect((await b.headWithTally()).tally).toEqual({
    data: count('truth', 'data'),
    untyped: count('truth', null),
    event: count('event', 'config'),
    risk: count('truth', 'risk')
  });
});

it('appends a write with a key without looking the key up first, and answers a retry of it (another process) with its entry', async () => {
  // A connection of its own whose commands are counted: a keyed append inserts, nothing is read before (the insert
  // finds a retry by its refusal: a look before every keyed write would be a round trip for nothing).
  const client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  try {
    const commands: string[] = [];
    client.on('commandStarted', (e) =>
      commands.push(`${e.commandName} ${String((e.command as Record<string, unknown>)[e.commandName])}`)
    );
    const a = new Ledger(client.db(testDb.db.databaseName));
    const b = new Ledger(testDb.db);
    await a.append({ kind: 'event', key: 'keyed.warmup', value: {}, did: null }); // reads the tail once
    await a.headPublished();
    commands.length = 0;
    const first = await a.append({
      kind: 'truth',
      key: 'keyed.1',
      value: { n: 1 },
      truth_type: 'data',
      did: 'did:example:k',
      idempotencyKey: 'once-1'
    });
    expect(first.duplicate).toBe(false);
    const reads = commands.filter((c) => /^(find|aggregate|count)/.test(c));
    expect(reads).toEqual([]);
    expect(commands).toContain('insert ledger');
    // The retry through another process: refused by the unique key, then answered with the first entry.
    const retry = await b.append({
      kind: 'truth',
      key: 'keyed.1',
      value: { n: 1 },
      truth_type: 'data',
      did: 'did:example:k',
      idempotencyKey: 'once-1'
    });
    expect(retry).toMatchObject({ duplicate: true, entry: { seq: first.entry.seq, event_id: first.entry.event_id } });
    // And the next write of that process lands right after it.
    const next = await b.append({
      kind: 'truth',
      key: 'keyed.2',
      value: {},
      truth_type: 'data',
      did: 'did:example:k',
      idempotencyKey: 'once-2'
    });
    expect(next.entry.seq).toBe(first.entry.seq + 1);
    expect(await verifyLedger(b)).toMatchObject({ consistent: true, ledger_lines: next.entry.seq });
  } finally {
    await client.close();
  }
});

it('answers a batch of retries (an activity appending again what it may have written) with one refusal, not one each, finding their entries by _id', async () => {
  const a = new Ledger(testDb.db);
  const keys = Array.from({ length: 50 }, (_, i) => `batch-retry-${i}`);
  const write = (ledger: Ledger, key: string) =>
    ledger.append({ kind: 'event', key: `hub.batch.${key}`, value: {}, did: 'did:example:hub', idempotencyKey: key });
  const first = await Promise.all(keys.map((k) => write(a, k)));
  const client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  try {
    const inserts = countLedgerInserts(client);
    const finds: { collection: string; filter: string }[] = [];
    client.on('commandStarted', (e) => {
      const command = e.command as { find?: string; filter?: unknown };
      if (e.commandName === 'find' && command.find !== 'ledger_head')
        finds.push({ collection: command.find!, filter: JSON.stringify(command.filter) });
    });
    const b = new Ledger(client.db(testDb.db.databaseName));
    const again = await Promise.all(keys.map((k) => write(b, k)));
    expect(again.map((r) => r.duplicate)).toEqual(keys.map(() => true));
    expect(again.map((r) => r.entry.seq)).toEqual(first.map((r) => r.entry.seq));
    expect(inserts.count).toBeLessThanOrEqual(2);
    // The batch's other keys: `_id` equalities only (FerretDB answers an `_id: { $in }` by reading everything).
    expect(finds.filter((f) => f.filter.startsWith('{"_id":{"$in"'))).toEqual([]);
    expect(finds.filter((f) => !f.filter.startsWith('{"_id":'))).toEqual([]);
  } finally {
    await client.close();
  }
});

it("lets two writers taking turns start from each other's head record: no insert refused, no wait for a record", async () => {
  // Two processes whose writes alternate (a load balancer's round robin): once each has seen the other's entries it
  // writes as a contended writer, inserting its head record before answering, so the other's next write starts from
  // that record instead of being refused on the taken seq and then waiting for the record (store/ledger/commit-engine.ts).
  const client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  try {
    const inserts = countLedgerInserts(client);
    const a = new Ledger(client.db(testDb.db.databaseName));
    const b = new Ledger(testDb.db);
    const write = (ledger: Ledger, i: number) =>
      ledger.append({ kind: 'truth', key: `turns.${i}`, value: { i }, truth_type: 'data', did: 'did:example:turns' });
    // Each has an insert refused once on a seq the other took, and writes as a contended writer from then on.
    for (let i = 0; i < 4; i++) await write(i % 2 ? b : a, i);
    const heads = testDb.db.collection('ledger_head');
    inserts.count = 0;
    let last = 0;
    for (let i = 4; i < 44; i++) {
      const { entry } = await write(i % 2 ? b : a, i);
      expect(entry.seq).toBe(last === 0 ? entry.seq : last + 1);
      last = entry.seq;
      // Answered only once its head record is in: the newest record is this write's.
      const newest = await heads.find({}).sort({ size: -1 }).limit(1).next();
      expect(newest?.size).toBe(entry.seq);
    }
    // a's 20 writes: one insert each, none refused.
    expect(inserts.count).toBe(20);
    // 40 head records were inserted, and each writer deletes those older than its own every 4: a handful is left,
    // so reading the newest (a read of the whole collection on FerretDB) stays cheap.
    expect(await heads.countDocuments({})).toBeLessThanOrEqual(8);
    expect(await verifyLedger(a)).toMatchObject({ consistent: true, ledger_lines: last });
  } finally {
    await client.close();
  }
});

/** Counts the `insert` commands into `ledger` sent through `client` (a client made with monitorCommands). */
function countLedgerInserts(client: MongoClient): { count: number } {
  const inserts = { count: 0 };
  client.on('commandStarted', (e) => {
    if (e.commandName === 'insert' && (e.command as { insert?: string }).insert === 'ledger') inserts.count++;
  });
  return inserts;
}
