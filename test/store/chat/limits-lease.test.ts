/**
 * store/chat/limits.ts against the embedded FerretDB, two stores on one database standing for two API processes:
 * a counter in steady use leases blocks of slots and hands them out without a database round trip per take, yet
 * the two together never admit more than the limit (and admit all of it when their callers keep asking); leased
 * slots nobody used are given back when the counter goes idle and when the process stops; a counter below the
 * demand threshold inserts one slot per take, exactly as before.
 */
import { randomBytes } from 'node:crypto';
import { Db, MongoClient } from 'mongodb';
import { ChatLimitStore, LEASE_IDLE_MS, LEASE_MIN_RATE } from '../../../store/chat/limits';
import { eventually } from '../../support/service';

let client: MongoClient;
let db: Db;
let inserts = 0;
/** Reads of chat_limit_slots (a search by _id lookups) and of chat_limit_marks. */
const reads = { slots: 0, marks: 0 };
beforeAll(async () => {
  client = await MongoClient.connect(process.env.ZH_TEST_MONGODB_URI!, { monitorCommands: true });
  client.on('commandStarted', (e) => {
    if (e.commandName === 'insert') inserts++;
    if (e.commandName === 'find' && e.command.find === 'chat_limit_slots') reads.slots++;
    if (e.commandName === 'find' && e.command.find === 'chat_limit_marks') reads.marks++;
  });
  db = client.db(`test_lease_${randomBytes(4).toString('hex')}`);
});
afterAll(async () => {
  await db.dropDatabase().catch(() => undefined);
  await client.close();
});

const slotsOf = (scope: string) => db.collection('chat_limit_slots').countDocuments({ scope });
const expiry = () => Date.now() + 120_000;

it('never admits more than the limit across two processes taking at a high rate, and loses no slot for good', async () => {
  const a = new ChatLimitStore(db);
  const b = new ChatLimitStore(db);
  const scope = 'key:lease:rpd';
  const limit = 400;
  let allowed = 0;
  const round = (takesPerCaller: number) =>
    Promise.all(
      [a, b].flatMap((store) =>
        // Eight callers per process, each taking one after the other.
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < takesPerCaller; i++)
            if ((await store.take(scope, 'w1', limit, expiry())).allowed) allowed++;
        })
      )
    );
  await round(40); // 640 takes for 400 slots
  expect(allowed).toBeLessThanOrEqual(limit);
  // A process may stop asking while it holds leased slots (the bounded under-admission); once idle it gives them
  // back, and they are taken again: in the end exactly the limit is admitted, and every slot is a use.
  await eventually(
    async () => ((await slotsOf(scope)) === allowed ? true : undefined),
    10 * LEASE_IDLE_MS,
    'unused leased slots given back'
  );
  await round(10);
  expect(allowed).toBe(limit);
  expect(await slotsOf(scope)).toBe(limit);
  await Promise.all([a.close(), b.close()]);
});

it('hands out leased slots without an insert per take, and gives back what was not used', async () => {
  // The store's clock: 1 ms a take, so the demand it sees is 1,000 takes a second however slowly a loaded machine
  // runs them (leasing depends on the rate; what is tested here is what a lease does).
  let clock = Date.now();
  const store = new ChatLimitStore(db, undefined, () => clock);
  const scope = 'key:steady:rpm';
  const before = inserts;
  const takes = 8 * LEASE_MIN_RATE;
  for (let i = 0; i < takes; i++) {
    clock += 1;
    expect((await store.take(scope, 'w1', 100_000, expiry())).allowed).toBe(true);
  }
  const used = inserts - before;
  expect(used).toBeLessThan(takes / 2);
  clock += 2 * LEASE_IDLE_MS; // then idle
  // Leased ahead, then given back once the counter is idle: the slots are the takes again.
  await eventually(
    async () => ((await slotsOf(scope)) === takes ? true : undefined),
    10 * LEASE_IDLE_MS,
    'unused leased slots given back'
  );
  // The next take reuses a given-back slot number (it may lease again: the demand of the last seconds counts), and
  // once the process stops every slot is a use.
  expect((await store.take(scope, 'w1', 100_000, expiry())).allowed).toBe(true);
  await store.close();
  expect(await slotsOf(scope)).toBe(takes + 1);
});

it('moves a process past the slots another one took by the counter’s mark, without searching the slots', async () => {
  // Two processes taking turns on one counter at a high rate (the clock: 1 ms a take, so both lease): each turn
  // the one coming back finds its next slots taken. It reads the counter's mark (one small read), never searches
  // chat_limit_slots by _id lookups (a round trip per slot probed), and the two together still admit exactly what
  // was asked.
  let clock = Date.now();
  const a = new ChatLimitStore(db, undefined, () => clock);
  const b = new ChatLimitStore(db, undefined, () => clock);
  const scope = 'key:turns:rpd';
  let allowed = 0;
  const turn = async (store: ChatLimitStore) => {
    for (let i = 0; i < 200; i++) {
      clock += 1;
      if ((await store.take(scope, 'w1', 1_000_000, expiry())).allowed) allowed++;
    }
  };
  await turn(a);
  const before = { ...reads };
  for (const store of [b, a, b, a, b]) await turn(store);
  expect(allowed).toBe(1200);
  expect(reads.slots - before.slots).toBe(0);
  expect(reads.marks - before.marks).toBeGreaterThan(0);
  expect(reads.marks - before.marks).toBeLessThan(40);
  await Promise.all([a.close(), b.close()]);
  // Every slot is a use (no lease left behind), and no slot was given twice.
  expect(await slotsOf(scope)).toBe(1200);
});

it('gives every leased slot back when the process stops', async () => {
  const store = new ChatLimitStore(db);
  const scope = 'key:closing:rpm';
  const takes = 3 * LEASE_MIN_RATE;
  for (let i = 0; i < takes; i++) await store.take(scope, 'w1', 100_000, expiry());
  await store.close();
  expect(await slotsOf(scope)).toBe(takes);
});

it('inserts one slot per take below the demand threshold (no lease)', async () => {
  const store = new ChatLimitStore(db);
  const scope = 'key:slow:rpm';
  for (let i = 0; i < 5; i++) {
    expect((await store.take(scope, 'w1', 100_000, expiry())).allowed).toBe(true);
    expect(await slotsOf(scope)).toBe(i + 1);
  }
  await store.close();
});

it('leases nothing near the cap: a small limit is taken slot by slot and refused exactly past it', async () => {
  const store = new ChatLimitStore(db);
  const scope = 'key:small:rpm';
  const results = await Promise.all(
    Array.from({ length: 3 * LEASE_MIN_RATE }, () => store.take(scope, 'w1', 10, expiry()))
  );
  expect(results.filter((r) => r.allowed)).toHaveLength(10);
  expect(await slotsOf(scope)).toBe(10);
  await store.close();
});
