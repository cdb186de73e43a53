/**
 * The upgrade to the kept task reads (store/federation/task-reads-build.ts) against the embedded FerretDB: tasks
 * stored the way the version before stored them (no `tracked` field, no lists, no counters). A store started on them
 * answers ListTasks and the queue's figures exactly as that version did from the first read, before and after the
 * build; two stores racing build once; submits, claims, finishes, cancels and sweeps made during the build are
 * counted once. Also from a database the version with counters but no `tracked` field wrote to.
 */
import type { TaskState } from '../../../core/federation/vocabulary';
import { tallyOf } from '../../../store/federation/task-counters';
import { MIGRATIONS_COLLECTION } from '../../../store/federation/task-reads-build';
import { TaskStore, type TaskDocument } from '../../../store/federation/tasks';
import { useStoreDb, type StoreDb } from '../../support/store-db';

const first = useStoreDb('task_upgrade_a');
const racing = useStoreDb('task_upgrade_b');
const takeover = useStoreDb('task_upgrade_c');
const counted = useStoreDb('task_upgrade_d');
const repaired = useStoreDb('task_upgrade_e');

const SUBMITTERS = ['did:example:alice', 'did:example:bob', 'node_custom_00000007'];
const TYPES = ['a2a.message', 'summarize', 'video.render.4k'];
const STATES: TaskState[] = ['queued', 'claimed', 'done', 'failed', 'canceled'];
const FAST = { settleMs: 300, retryMs: 100, recheckMs: 0 };

/** Tasks as the version before the task reads wrote them: whole documents, nothing beside them. */
async function insertOldLayout(s: StoreDb, count: number, prefix = 'old'): Promise<void> {
  const base = Date.now() - 3_600_000;
  const docs = Array.from({ length: count }, (_, i): TaskDocument => {
    const state = STATES[i % STATES.length]!;
    // Every fourth task shares its creation time with the one before (the earlier sort broke ties by id).
    const created = new Date(base + Math.floor(i / 2) * 1000 + (i % 4 === 1 ? 0 : i % 2) * 1).toISOString();
    const claimedAt = state === 'queued' ? null : new Date(Date.parse(created) + 5_000 + i * 10).toISOString();
    const finished = state === 'done' || state === 'failed' || state === 'canceled';
    return {
      _id: `task_${prefix}_${String(i).padStart(6, '0')}`,
      type: TYPES[i % TYPES.length]!,
      payload_json: '{}',
      required_capabilities: [],
      priority: i % 10,
      state,
      submitted_by: SUBMITTERS[i % SUBMITTERS.length]!,
      context_id: i % 3 ? 'ctx-1' : null,
      created_at: created,
      updated_at: created,
      claimed_by: claimedAt ? 'node-old' : null,
      // Half the claimed tasks hold a lease that has lapsed: the first read sweeps them.
      lease_expires_at: state === 'claimed' ? new Date(Date.now() + (i % 2 ? 600_000 : -600_000)).toISOString() : null,
      attempts: claimedAt ? 1 : 0,
      result_json: state === 'done' ? '{}' : null,
      error: state === 'failed' ? 'no' : null,
      claim_id: claimedAt ? `claim-${i}` : null,
      claimed_at: claimedAt,
      finished_at: finished ? new Date(Date.parse(claimedAt!) + 2_000 + i).toISOString() : null
    };
  });
  await s.db.collection<TaskDocument>('tasks').insertMany(docs);
}

const allTasks = (s: StoreDb) => s.db.collection<TaskDocument>('tasks').find({}).toArray();

/** The queue's figures as the version before computed them: from every task. */
async function expectStatsExact(s: StoreDb, stores: TaskStore[]) {
  // stats() sweeps lapsed leases first, as it did before: the full reading is of the tasks after that sweep.
  await stores[0]!.expireLapsed();
  const want = tallyOf(await allTasks(s));
  for (const store of stores) {
    const got = await store.stats();
    expect({ ...got }).toEqual({
      ...want.states,
      total: Object.values(want.states).reduce((a, b) => a + b, 0),
      by_type: Object.fromEntries(Object.entries(want.open_by_type).sort(([a], [b]) => (a < b ? -1 : 1))),
      mean_wait_s: want.waits ? want.wait_ms / want.waits / 1000 : null,
      mean_run_s: want.runs ? want.run_ms / want.runs / 1000 : null
    });
  }
}

/** Unfiltered ListTasks in pages of 7: every task once, in the earlier order (created_at desc, _id asc). */
async function expectListsExact(s: StoreDb, store: TaskStore) {
  const all = await allTasks(s);
  for (const submitter of SUBMITTERS) {
    const want = all
      .filter((t) => t.submitted_by === submitter)
      .sort((a, b) => (a.created_at === b.created_at ? (a._id < b._id ? -1 : 1) : a.created_at < b.created_at ? 1 : -1))
      .map((t) => t._id);
    const seen: string[] = [];
    for (let offset = 0; ; offset += 7) {
      const page = await store.listBySubmitter(submitter, {}, { limit: 7, offset });
      expect(page.total).toBe(want.length);
      seen.push(...page.tasks.map((t) => t._id));
      if (page.tasks.length < 7) break;
    }
    expect(seen).toEqual(want);
  }
}

const newTask = (id: string, i: number) => ({
  _id: id,
  type: TYPES[i % TYPES.length]!,
  payload_json: '{}',
  required_capabilities: [],
  priority: 0,
  submitted_by: SUBMITTERS[i % SUBMITTERS.length]!,
  context_id: null
});

it('answers ListTasks and the stats exactly from the first read after an upgrade, and after the build', async () => {
  await insertOldLayout(first, 90);
  const s = new TaskStore(first.db, { maxAttempts: 2, build: FAST });
  expect(await s.readsBuild.ready()).toBe(false);
  await expectStatsExact(first, [s]);
  await expectListsExact(first, s);
  // Submitted before the build (one at a time, so their order is exact): listed and counted by the new code.
  for (let i = 0; i < 9; i++) await s.submit(newTask(`task_new_${i}`, i));
  await s.claim('node-a', [], 5, 60_000);
  await expectStatsExact(first, [s]);
  await expectListsExact(first, s);

  expect(await s.readsBuild.run()).toBe('built');
  expect(await first.db.collection<{ _id: string }>(MIGRATIONS_COLLECTION).countDocuments({ _id: 'task-reads' })).toBe(
    1
  );
  const other = new TaskStore(first.db, { maxAttempts: 2, build: FAST });
  expect(await other.readsBuild.ready()).toBe(true);
  await expectStatsExact(first, [s, other]);
  await expectListsExact(first, s);
  await expectListsExact(first, other);
  // The figures now come from the counters: a task changed around the store is not seen (the repair's case).
  const tasks = first.db.collection<TaskDocument>('tasks');
  const done = await tasks.findOne({ state: 'done' });
  await tasks.updateOne({ _id: done!._id }, { $set: { state: 'failed' } });
  expect((await other.stats()).done).toBe(tallyOf(await allTasks(first)).states.done + 1);
  await tasks.updateOne({ _id: done!._id }, { $set: { state: 'done' } });
  // Later changes of old and new tasks are counted once.
  for (const t of await s.claim('node-b', [], 20, 60_000)) await other.finish(t._id, 'node-b', { result_json: '{}' });
  await other.submit(newTask('task_new_after', 1));
  await expectStatsExact(first, [s, other]);
  await expectListsExact(first, other);
  // The repair finds nothing to list and leaves the figures as they are.
  expect((await other.recount()).listed).toBe(0);
  await expectStatsExact(first, [s, other]);
}, 60_000);

it('builds once with two stores racing, counting the changes made during the build once', async () => {
  await insertOldLayout(racing, 150);
  const a = new TaskStore(racing.db, { maxAttempts: 2, build: FAST });
  const b = new TaskStore(racing.db, { maxAttempts: 2, build: FAST });
  let stop = false;
  let n = 0;
  // Traffic through both stores while they build: submits, claims of old and new tasks (some under a lease that
  // lapses at once, swept by the next claim), finishes and cancels.
  // At least a few rounds however slow the machine is (the count below asks for more than 5 in all).
  const traffic = async (store: TaskStore, k: number) => {
    for (let rounds = 0; !stop || rounds < 4; rounds++) {
      const i = n++;
      await store.submit(newTask(`task_during_${String(i).padStart(5, '0')}`, i));
      const claimed = await store.claim(`node-${k}`, [], 2, i % 3 ? 60_000 : -1000);
      for (const t of claimed)
        if (i % 2) await store.finish(t._id, `node-${k}`, { result_json: '{}' });
        else await store.cancel(t._id);
    }
  };
  const runs = Promise.all([a.readsBuild.run(), b.readsBuild.run()]);
  const busy = Promise.all([traffic(a, 0), traffic(b, 1)]);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  stop = true;
  await busy;
  const outcomes = await runs;
  expect(outcomes.sort()).toEqual(['built', 'elsewhere']);
  const marks = await racing.db.collection(MIGRATIONS_COLLECTION).find({}).toArray();
  expect(marks.map((m) => m._id).sort()).toEqual(['task-reads', 'task-reads#lease#1']);
  expect(n).toBeGreaterThan(5);
  const fresh = new TaskStore(racing.db, { build: FAST });
  for (const s of [a, b, fresh]) expect(await s.readsBuild.ready()).toBe(true);
  await expectStatsExact(racing, [a, b, fresh]);
  // The old tasks in their earlier order; those submitted during the build after them (each submitter's concurrent
  // submits within a few ms of each other may be listed either way: task-lists.ts, Order).
  const all = await allTasks(racing);
  for (const submitter of SUBMITTERS) {
    const mine = all.filter((t) => t.submitted_by === submitter);
    const listed = (await fresh.listBySubmitter(submitter, {}, { limit: 1000, offset: 0 })).tasks.map((t) => t._id);
    expect(listed.length).toBe(mine.length);
    expect([...listed].sort()).toEqual(mine.map((t) => t._id).sort());
    const old = mine
      .filter((t) => !t.tracked)
      .sort((x, y) =>
        x.created_at === y.created_at ? (x._id < y._id ? -1 : 1) : x.created_at < y.created_at ? 1 : -1
      );
    expect(listed.slice(listed.length - old.length)).toEqual(old.map((t) => t._id));
  }
}, 60_000);

it('takes over a build whose holder stopped renewing its lease', async () => {
  await insertOldLayout(takeover, 20);
  const marks = takeover.db.collection<{ _id: string; holder: string; renewed_at: string }>(MIGRATIONS_COLLECTION);
  await marks.insertOne({ _id: 'task-reads#lease#1', holder: 'gone:1:0', renewed_at: new Date().toISOString() });
  const s = new TaskStore(takeover.db, { build: { ...FAST, leaseMs: 60_000, quietMs: 1_500 } });
  expect(await s.readsBuild.run()).toBe('elsewhere');
  await expectStatsExact(takeover, [s]);
  await marks.updateOne(
    { _id: 'task-reads#lease#1' },
    { $set: { renewed_at: new Date(Date.now() - 61_000).toISOString() } }
  );
  // A task just written the earlier way: a replica of the earlier version may still be submitting, so the build
  // waits until the newest such task is quietMs old.
  await insertOldLayout(takeover, 1, 'late');
  await takeover.db
    .collection<TaskDocument>('tasks')
    .updateOne({ _id: 'task_late_000000' }, { $set: { created_at: new Date().toISOString() } });
  const started = Date.now();
  expect(await s.readsBuild.run()).toBe('built');
  expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
  expect(await marks.findOne({ _id: 'task-reads#lease#2' })).toMatchObject({ holder: expect.any(String) });
  await expectStatsExact(takeover, [s]);
  await expectListsExact(takeover, s);
});

it('builds exactly on a database written by the version with counters and lists but no tracked field', async () => {
  // That version listed and counted its submits and counted every change, but marked no task and kept no old part:
  // a store of this version, then its marks taken away.
  await insertOldLayout(counted, 60);
  const before = new TaskStore(counted.db, { maxAttempts: 2, build: FAST });
  for (let i = 0; i < 12; i++) await before.submit(newTask(`task_v2_${String(i).padStart(3, '0')}`, i));
  for (const t of await before.claim('node-a', [], 10, 60_000))
    await before.finish(t._id, 'node-a', { result_json: '{}' });
  await before.cancel('task_v2_011');
  await before.stats();
  await counted.db.collection('tasks').updateMany({}, { $unset: { tracked: '' } });
  await counted.db.collection('task_counters').updateMany({}, { $unset: { old: '', old_changes: '' } });
  expect(await counted.db.collection('migrations').countDocuments({})).toBe(0);

  // Its tasks carry no `tracked` either, and were just submitted: quietMs 0 stands for the 2 minutes after its last.
  const s = new TaskStore(counted.db, { maxAttempts: 2, build: { ...FAST, quietMs: 0 } });
  await expectStatsExact(counted, [s]);
  await expectListsExact(counted, s);
  await s.submit(newTask('task_v3_000', 0));
  expect(await s.readsBuild.run()).toBe('built');
  await expectStatsExact(counted, [s, new TaskStore(counted.db, { build: FAST })]);
  await expectListsExact(counted, s);
  for (const t of await s.claim('node-b', [], 10, 60_000)) await s.finish(t._id, 'node-b', { error: 'no' });
  await expectStatsExact(counted, [s]);
  await expectListsExact(counted, s);
});

it('tasks:recount on a database not yet built builds first, so the older tasks keep their place', async () => {
  await insertOldLayout(repaired, 30);
  const s = new TaskStore(repaired.db, { maxAttempts: 2, build: FAST });
  for (let i = 0; i < 4; i++) await s.submit(newTask(`task_new_${i}`, i));
  const out = await s.recount();
  expect(out.listed).toBe(0);
  expect(
    await repaired.db.collection<{ _id: string }>(MIGRATIONS_COLLECTION).findOne({ _id: 'task-reads' })
  ).toMatchObject({
    by: 'tasks:recount'
  });
  await expectStatsExact(repaired, [s, new TaskStore(repaired.db, { build: FAST })]);
  await expectListsExact(repaired, s);
});
