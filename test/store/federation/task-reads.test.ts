/**
 * store/federation/task-lists.ts and task-counters.ts, through TaskStore, against the embedded FerretDB: two stores
 * on one database stand for two API processes. On a random workload (submits, racing claims, leases that lapse and
 * are swept by both at once, finishes, cancels, reads that settle lapsed tasks), every reading of the kept
 * structures equals the brute-force reading of every task: the queue's figures, each submitter's list (all its
 * tasks, once each, newest first) and the filtered lists. The repair makes both right again after writes around the
 * store.
 */
import type { TaskState } from '../../../core/federation/vocabulary';
import { tallyOf } from '../../../store/federation/task-counters';
import { TaskStore, type TaskDocument } from '../../../store/federation/tasks';
import { LOCK_TAKEOVER_MS, TASK_LOCKS_COLLECTION, type TaskLock } from '../../../store/federation/task-transitions';
import { useStoreDb } from '../../support/store-db';

const store = useStoreDb('task_reads');

/** A seeded generator, so a failure can be replayed. */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SUBMITTERS = ['did:example:alice', 'did:example:bob', 'node_custom_00000007'];
const TYPES = ['a2a.message', 'summarize', 'video.render.4k'];
const CONTEXTS = ['ctx-1', 'ctx-2', null];
const STATES: TaskState[] = ['queued', 'claimed', 'done', 'failed', 'canceled'];

const allTasks = () => store.db.collection<TaskDocument>('tasks').find({}).toArray();
const newestFirst = (a: TaskDocument, b: TaskDocument) =>
  a.created_at === b.created_at ? (a._id < b._id ? -1 : 1) : a.created_at < b.created_at ? 1 : -1;
/** Filtered lists: the latest updated first (A2A ListTasks' status timestamp order), ties by id. */
const latestFirst = (a: TaskDocument, b: TaskDocument) =>
  a.updated_at === b.updated_at ? (a._id < b._id ? -1 : 1) : a.updated_at < b.updated_at ? 1 : -1;

async function expectStatsMatch(stores: TaskStore[]) {
  const want = tallyOf(await allTasks());
  const total = Object.values(want.states).reduce((a, b) => a + b, 0);
  for (const s of stores) {
    const got = await s.stats();
    expect({ ...got }).toEqual({
      ...want.states,
      total,
      by_type: Object.fromEntries(Object.entries(want.open_by_type).sort(([a], [b]) => (a < b ? -1 : 1))),
      mean_wait_s: want.waits ? want.wait_ms / want.waits / 1000 : null,
      mean_run_s: want.runs ? want.run_ms / want.runs / 1000 : null
    });
  }
}

async function expectListsMatch(s: TaskStore) {
  const all = await allTasks();
  for (const submitter of SUBMITTERS) {
    const mine = all.filter((t) => t.submitted_by === submitter).sort(newestFirst);
    // Unfiltered, in pages of 7: every task once, newest first (tasks of one millisecond in either order).
    const seen: TaskDocument[] = [];
    for (let offset = 0; ; offset += 7) {
      const page = await s.listBySubmitter(submitter, {}, { limit: 7, offset });
      expect(page.total).toBe(mine.length);
      seen.push(...page.tasks);
      if (page.tasks.length < 7) break;
    }
    expect(seen.map((t) => t._id).sort()).toEqual(mine.map((t) => t._id).sort());
    // Tasks submitted together can be listed a few ms out of creation order (task-lists.ts: Order); never more.
    for (let i = 1; i < seen.length; i++)
      expect(Date.parse(seen[i]!.created_at) - Date.parse(seen[i - 1]!.created_at)).toBeLessThan(1000);
    const stored = new Map(all.map((t) => [t._id, t]));
    for (const t of seen) expect(t).toEqual(stored.get(t._id));
    // Filtered: exactly the brute-force page, latest updated first.
    const latest = [...mine].sort(latestFirst);
    for (const state of STATES)
      for (const contextId of [undefined, 'ctx-1']) {
        const want = latest.filter((t) => t.state === state && (!contextId || t.context_id === contextId));
        const got = await s.listBySubmitter(submitter, { state, contextId }, { limit: 5, offset: 2 });
        expect({ total: got.total, ids: got.tasks.map((t) => t._id) }).toEqual({
          total: want.length,
          ids: want.slice(2, 7).map((t) => t._id)
        });
      }
    const byContext = latest.filter((t) => t.context_id === 'ctx-2');
    const got = await s.listBySubmitter(submitter, { contextId: 'ctx-2' }, { limit: 100, offset: 0 });
    expect(got.tasks.map((t) => t._id)).toEqual(byContext.map((t) => t._id));
    // Updated at or after a time: the tasks updated since, latest first.
    const since = latest[Math.floor(latest.length / 2)]?.updated_at ?? new Date().toISOString();
    const recent = await s.listBySubmitter(submitter, { updatedSince: since }, { limit: 100, offset: 0 });
    expect(recent.tasks.map((t) => t._id)).toEqual(latest.filter((t) => t.updated_at >= since).map((t) => t._id));
  }
}

it('keeps the queue figures and the submitters’ lists equal to a full reading, under concurrent changes', async () => {
  const random = rng(45);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  const stores = [new TaskStore(store.db, { maxAttempts: 2 }), new TaskStore(store.db, { maxAttempts: 2 })];
  // A database created by this version: the build writes its marker at once, and the reads use the kept structures.
  const started = Date.now();
  expect(await stores[0]!.readsBuild.run()).toBe('built');
  expect(Date.now() - started).toBeLessThan(2_000);
  expect(await stores[1]!.readsBuild.run()).toBe('ready');
  let n = 0;
  const submit = (count: number) =>
    Promise.all(
      Array.from({ length: count }, () => {
        const i = n++;
        return pick(stores).submit({
          _id: `task_${String(i).padStart(24, '0')}`,
          type: pick(TYPES),
          payload_json: '{}',
          required_capabilities: random() < 0.3 ? ['gpu'] : [],
          priority: Math.floor(random() * 10),
          submitted_by: pick(SUBMITTERS),
          context_id: pick(CONTEXTS)
        });
      })
    );
  await submit(150);
  // An idempotent retry is neither listed nor counted again.
  const again = await stores[1]!.submit({
    _id: 'task_000000000000000000000000',
    type: 'summarize',
    payload_json: '{}',
    required_capabilities: [],
    priority: 1,
    submitted_by: SUBMITTERS[0]!,
    context_id: null
  });
  expect(again.duplicate).toBe(true);
  await expectStatsMatch(stores);

  for (let round = 0; round < 4; round++) {
    // Claims racing through both stores (some under a lease that has already lapsed), beside new submits.
    const claimed = (
      await Promise.all([
        ...Array.from({ length: 8 }, (_, k) =>
          stores[k % 2]!.claim(`node-${k % 4}`, k % 3 ? ['gpu'] : [], 4, k % 4 === 0 ? -1000 : 60_000)
        ),
        submit(20).then(() => [])
      ])
    ).flat();
    expect(new Set(claimed.map((t) => t._id)).size).toBe(claimed.length);
    // Each claimed task gets at most one of: done, failed, progress, cancel; some queued tasks are canceled.
    const queued = (await allTasks()).filter((t) => t.state === 'queued');
    await Promise.all([
      ...claimed.map((t) => {
        const s = pick(stores);
        const r = random();
        if (r < 0.3) return s.finish(t._id, t.claimed_by!, { result_json: '{"ok":true}' });
        if (r < 0.45) return s.finish(t._id, t.claimed_by!, { error: 'no' });
        if (r < 0.55) return s.cancel(t._id);
        if (r < 0.7) return s.progress(t._id, t.claimed_by!, 'half', 60_000);
        return null;
      }),
      ...queued.filter(() => random() < 0.1).map((t) => pick(stores).cancel(t._id))
    ]);
    // Both stores sweep at once (only one may count each lapse), while reads settle the same tasks.
    const lapsed = (await allTasks()).filter(
      (t) => t.state === 'claimed' && t.lease_expires_at! < new Date().toISOString()
    );
    await Promise.all([
      stores[0]!.sweepLapsed(),
      stores[1]!.sweepLapsed(),
      ...lapsed.map((t) => pick(stores).find(t._id))
    ]);
    await expectStatsMatch(stores);
  }
  const states = new Set((await allTasks()).map((t) => t.state));
  expect([...states].sort()).toEqual([...STATES].sort());
  await expectListsMatch(stores[0]!);
  await expectListsMatch(stores[1]!);
}, 120_000);

it('repairs the figures and the lists after writes around the store', async () => {
  const s = new TaskStore(store.db, { maxAttempts: 2 });
  const tasks = store.db.collection<TaskDocument>('tasks');
  const done = await tasks.findOne({ state: 'done' });
  await tasks.updateOne({ _id: done!._id }, { $set: { state: 'queued' } });
  // A task stored by a version that kept no lists (or by a process that died before listing it).
  const now = new Date().toISOString();
  await tasks.insertOne({
    _id: 'task_legacy0000000000000000',
    type: 'summarize',
    payload_json: '{}',
    required_capabilities: [],
    priority: 5,
    state: 'queued',
    submitted_by: SUBMITTERS[1]!,
    context_id: null,
    created_at: now,
    updated_at: now,
    claimed_by: null,
    lease_expires_at: null,
    attempts: 0,
    result_json: null,
    error: null
  });
  expect((await s.stats()).queued).not.toBe(tallyOf(await allTasks()).states.queued);

  const out = await s.recount();
  expect(out.listed).toBe(1);
  await expectStatsMatch([s, new TaskStore(store.db)]);
  await expectListsMatch(s);
  const newest = await s.listBySubmitter(SUBMITTERS[1]!, {}, { limit: 1, offset: 0 });
  expect(newest.tasks[0]!._id).toBe('task_legacy0000000000000000');
  // Again: nothing to repair.
  expect((await s.recount()).listed).toBe(0);
  await expectStatsMatch([s]);
  // Folded into one document (no other process running here): the same figures.
  await s.recount({ fold: true });
  expect(await store.db.collection('task_counters').countDocuments({})).toBe(1);
  await expectStatsMatch([s]);
}, 60_000);

it('sweeps a lapse whose first sweeper died before its update, once its lock is a minute old', async () => {
  const s = new TaskStore(store.db, { maxAttempts: 3 });
  const { task } = await s.submit({
    _id: 'task_lapse000000000000000000',
    type: 'summarize',
    payload_json: '{}',
    required_capabilities: ['lapse-test'],
    // Above the API's 0-9, so this claim takes it before the tasks the workload left queued.
    priority: 99,
    submitted_by: SUBMITTERS[2]!,
    context_id: null
  });
  const [held] = await s.claim('node-x', ['lapse-test'], 1, -1000);
  expect(held).toMatchObject({ _id: task._id, rev: 1 });
  // The lock of the task's next revision, left by a writer that stopped between its insert and its update.
  const locks = store.db.collection<TaskLock>(TASK_LOCKS_COLLECTION);
  await locks.insertOne({ _id: `${task._id}@2`, task_id: task._id, at: new Date().toISOString() });
  // Sweeps pass it by; the claiming node's call is told to retry (503), not refused.
  expect(await s.sweepLapsed()).toMatchObject({ requeued: 0, failed: 0 });
  expect((await allTasks()).find((t) => t._id === task._id)?.state).toBe('claimed');
  await expect(s.finish(task._id, 'node-x', { error: 'late' })).rejects.toMatchObject({ status: 503 });
  await locks.updateOne(
    { _id: `${task._id}@2` },
    { $set: { at: new Date(Date.now() - LOCK_TAKEOVER_MS - 1_000).toISOString() } }
  );
  expect(await s.sweepLapsed()).toMatchObject({ requeued: 1 });
  expect(await s.find(task._id)).toMatchObject({ state: 'queued', rev: 2 });
  await expectStatsMatch([s]);
});

it('makes racing changes of one task one after the other: one state, each counted once', async () => {
  const stores = [new TaskStore(store.db, { maxAttempts: 2 }), new TaskStore(store.db, { maxAttempts: 2 })];
  const ids: string[] = [];
  for (let i = 0; i < 40; i++) {
    const { task } = await stores[i % 2]!.submit({
      _id: `task_race${String(i).padStart(20, '0')}`,
      type: TYPES[i % 3]!,
      payload_json: '{}',
      required_capabilities: ['race-test'],
      // Above every other task here, so the claims below take these.
      priority: 1000,
      submitted_by: SUBMITTERS[i % 3]!,
      context_id: null
    });
    ids.push(task._id);
  }
  // Half under a lease that has lapsed already (claimed last: a claim sweeps lapsed leases first).
  const claimed = [
    ...(await stores[1]!.claim('node-r1', ['race-test'], 20, 60_000)),
    ...(await stores[0]!.claim('node-r0', ['race-test'], 20, -1000))
  ];
  expect(claimed.map((t) => t._id).sort()).toEqual(ids);
  // On every task at once: its node finishes it and renews its lease, a client cancels it, both stores sweep,
  // a read settles it, and another node tries to claim it.
  const outcomes = await Promise.all(
    claimed.map(async (t, i) => {
      const [finished, , canceled] = await Promise.all([
        stores[i % 2]!.finish(t._id, t.claimed_by!, i % 3 ? { result_json: '{}' } : { error: 'no' }),
        stores[(i + 1) % 2]!.progress(t._id, t.claimed_by!, 'busy', 60_000),
        stores[(i + 1) % 2]!.cancel(t._id),
        stores[i % 2]!.find(t._id),
        stores[(i + 1) % 2]!.claim('node-r2', ['race-test'], 1, 60_000)
      ]);
      return { finished: finished.ok, canceled: canceled.canceled };
    })
  );
  await Promise.all([stores[0]!.sweepLapsed(), stores[1]!.sweepLapsed()]);
  const after = (await allTasks()).filter((t) => ids.includes(t._id));
  for (const t of after) {
    const o = outcomes[claimed.findIndex((c) => c._id === t._id)]!;
    // A finish and a cancel are never both answered yes, and what was answered is what is stored.
    expect(o.finished && o.canceled).toBe(false);
    if (o.canceled) expect(t.state).toBe('canceled');
    if (o.finished) expect(['done', 'failed']).toContain(t.state);
  }
  await expectStatsMatch(stores);
}, 60_000);
