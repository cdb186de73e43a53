/**
 * The presence recorder (store/federation/presence-recorder.ts) against the embedded FerretDB: an acknowledged
 * heartbeat waits for its shard's last-seen write, and in a large shard never for the shard's samples write (some
 * 150 KB at 10,000 nodes, which held every heartbeat of its shard); samples writes go one at a time per process. The
 * store's samples writes are held at a gate the test opens, so what waits for what is observed, not timed.
 */
import pino from 'pino';
import { HeartbeatHistoryStore } from '../../../store/federation/heartbeat-history';
import { PresenceEntry, presenceHorizon, PresenceStore, presenceShardOf } from '../../../store/federation/presence';
import {
  PresenceRecorder,
  PRESENCE_HOLD_MAX_MS,
  SAMPLES_INLINE_MAX_NODES
} from '../../../store/federation/presence-recorder';
import { eventually } from '../../support/service';
import { useStoreDb } from '../../support/store-db';

const testDb = useStoreDb('presence_recorder');

/** The real store, its samples writes held until `open()`; counts how many are under way at once. */
class GatedSamples extends PresenceStore {
  active = 0;
  mostAtOnce = 0;
  started = 0;
  private gate!: Promise<void>;
  open!: () => void;
  constructor(...args: ConstructorParameters<typeof PresenceStore>) {
    super(...args);
    this.close();
  }
  close(): void {
    this.gate = new Promise((r) => (this.open = r));
  }
  override async writeSamples(shard: number, instanceId: string, entries: PresenceEntry[]): Promise<void> {
    this.started++;
    this.active++;
    this.mostAtOnce = Math.max(this.mostAtOnce, this.active);
    try {
      await this.gate;
      await super.writeSamples(shard, instanceId, entries);
    } finally {
      this.active--;
    }
  }
}

/** `count` node ids of one shard. */
function idsOfShard(shard: number, count: number, prefix: string): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < count; i++) if (presenceShardOf(`${prefix}-${i}`) === shard) ids.push(`${prefix}-${i}`);
  return ids;
}

const sample = (at: number) => ({ at: new Date(at).toISOString(), resources: { cpu_percent: 10 }, performance: {} });

it('acknowledges heartbeats of large shards without waiting for their samples, and writes samples one at a time', async () => {
  const store = new GatedSamples(testDb.db);
  const history = new HeartbeatHistoryStore(testDb.db, { intervalMs: 60_000, size: 5 });
  const recorder = new PresenceRecorder(
    store,
    history,
    { retentionMs: 120_000, flushIntervalMs: 10, samplesIntervalMs: 50 },
    pino({ level: 'silent' })
  );

  // Two large shards: every heartbeat is acknowledged while their samples writes are held at the gate.
  const large = [
    ...idsOfShard(3, SAMPLES_INLINE_MAX_NODES + 36, 'large'),
    ...idsOfShard(7, SAMPLES_INLINE_MAX_NODES + 36, 'large')
  ];
  const now = Date.now();
  await Promise.all(large.map((id) => recorder.record(id, sample(now), now)));
  const seen = await store.readSeen(3);
  expect(seen.nodes.size).toBe(SAMPLES_INLINE_MAX_NODES + 36);
  // Their samples writes are under way off the heartbeat's path, one at a time.
  await eventually(async () => (store.started >= 1 ? true : undefined), 10_000, 'a samples write started');
  expect(store.active).toBe(1);
  store.open();
  await eventually(
    async () => (store.started >= 2 && store.active === 0 ? true : undefined),
    10_000,
    "both shards' samples written"
  );
  expect(store.mostAtOnce).toBe(1);
  const snapshot = await store.snapshot();
  expect(snapshot.nodes.get(large[0]!)?.sample.resources).toEqual({ cpu_percent: 10 });

  // A small shard's samples still ride along its last-seen write: its heartbeat is acknowledged with its sample.
  store.close();
  const small = idsOfShard(11, 5, 'small');
  let acknowledged = false;
  const beats = Promise.all(small.map((id) => recorder.record(id, sample(now), now))).then(() => (acknowledged = true));
  await eventually(async () => (store.active === 1 ? true : undefined), 10_000, "the small shard's samples write");
  expect(acknowledged).toBe(false);
  store.open();
  await beats;
  expect((await store.snapshot()).nodes.get(small[0]!)?.sample.resources).toEqual({ cpu_percent: 10 });
});

/** The real store, its last-seen writes held until `open()` or failing while `failing`; counts writes started and failed. */
class GatedSeen extends PresenceStore {
  started = 0;
  failed = 0;
  failing = false;
  private gate: Promise<void> = Promise.resolve();
  open: () => void = () => undefined;
  close(): void {
    this.gate = new Promise((r) => (this.open = r));
  }
  override async writeSeen(...args: Parameters<PresenceStore['writeSeen']>): Promise<void> {
    this.started++;
    await this.gate;
    if (this.failing) {
      this.failed++;
      throw new Error('database unavailable');
    }
    await super.writeSeen(...args);
  }
}

/** Whether a promise has settled, without waiting for it. */
function settledFlag(p: Promise<unknown>): { settled: boolean; failed: boolean } {
  const flag = { settled: false, failed: false };
  p.then(
    () => (flag.settled = true),
    () => Object.assign(flag, { settled: true, failed: true })
  );
  return flag;
}

it('answers an approved node before its write while the shard keeps up (online or offline); a pending node, a lagging or failing shard wait', async () => {
  const store = new GatedSeen(testDb.db);
  const history = new HeartbeatHistoryStore(testDb.db, { intervalMs: 60_000, size: 5 });
  const ackLagMs = 300;
  const recorder = new PresenceRecorder(
    store,
    history,
    { retentionMs: 120_000, flushIntervalMs: 10, samplesIntervalMs: 50, ackLagMs },
    pino({ level: 'silent' })
  );
  const [a, b, c, d, e] = idsOfShard(5, 5, 'early');
  const beat = (id: string, approved: boolean) => recorder.record(id, sample(Date.now()), Date.now(), approved);

  // The write is held: an approved node's heartbeat is answered anyway, a pending node's is not.
  store.close();
  await beat(a!, true);
  const pendingBeat = settledFlag(beat(b!, false));
  await eventually(async () => (store.started >= 1 ? true : undefined), 10_000, 'the write under way');
  expect(pendingBeat.settled).toBe(false);
  // Once the shard's oldest unstored heartbeat is older than ackLagMs, an approved node's heartbeat waits too.
  await new Promise((r) => setTimeout(r, ackLagMs + 100));
  const lateBeat = settledFlag(beat(c!, true));
  await new Promise((r) => setImmediate(r));
  expect(lateBeat.settled).toBe(false);
  store.open();
  await eventually(
    async () => (pendingBeat.settled && lateBeat.settled ? true : undefined),
    10_000,
    'the waiting heartbeats answered'
  );
  expect([pendingBeat.failed, lateBeat.failed]).toEqual([false, false]);
  const seen = (await store.readSeen(5)).nodes;
  expect([a, b, c].map((id) => seen.has(id!))).toEqual([true, true, true]);

  // A failing write: the heartbeat answered early is kept and stored by a later write; meanwhile every heartbeat of
  // the shard waits for its write and fails with it.
  store.failing = true;
  await beat(d!, true);
  await eventually(async () => (store.failed >= 1 ? true : undefined), 10_000, 'the failed write');
  await expect(beat(e!, true)).rejects.toThrow('database unavailable');
  expect(await recorder.drain(200)).toBe(false);
  store.failing = false;
  expect(await recorder.drain(10_000)).toBe(true);
  const after = (await store.readSeen(5)).nodes;
  expect([d, e].map((id) => after.has(id!))).toEqual([true, true]);
  expect(recorder.acknowledgedEarly).toBe(2);
});

it("with ackLagMs 0 every heartbeat waits for its write, an idle shard's too", async () => {
  const store = new GatedSeen(testDb.db);
  const history = new HeartbeatHistoryStore(testDb.db, { intervalMs: 60_000, size: 5 });
  const recorder = new PresenceRecorder(
    store,
    history,
    { retentionMs: 120_000, flushIntervalMs: 10, samplesIntervalMs: 50, ackLagMs: 0 },
    pino({ level: 'silent' })
  );
  const [a] = idsOfShard(9, 1, 'durable');
  store.close();
  const beat = settledFlag(recorder.record(a!, sample(Date.now()), Date.now(), true));
  await eventually(async () => (store.started >= 1 ? true : undefined), 10_000, 'the write under way');
  expect(beat.settled).toBe(false);
  store.open();
  await eventually(async () => (beat.settled ? true : undefined), 10_000, 'the heartbeat answered');
  expect(recorder.acknowledgedEarly).toBe(0);
  expect((await store.readSeen(9)).nodes.has(a!)).toBe(true);
});

it('keeps a presence clock: complete only through the oldest heartbeat not yet stored, removed when it stops', async () => {
  const store = new GatedSeen(testDb.db);
  const history = new HeartbeatHistoryStore(testDb.db, { intervalMs: 60_000, size: 5 });
  const recorder = new PresenceRecorder(
    store,
    history,
    { retentionMs: 120_000, flushIntervalMs: 10, samplesIntervalMs: 50, ackLagMs: 1000 },
    pino({ level: 'silent' })
  );
  const [a] = idsOfShard(11, 1, 'clock');
  const clockOf = async () =>
    (await testDb.db.collection('node_presence_clocks').findOne({ _id: recorder.instanceId as never })) as {
      complete_through: number;
      written_at: number;
    } | null;
  recorder.startClock();
  await eventually(async () => ((await clockOf()) ? true : undefined), 10_000, 'the first clock');
  // A heartbeat whose write is held: the clock stays before it, however long the write takes. (It arrived at the
  // route a little before the recorder took it, as every heartbeat does: the clock goes by its arrival.)
  store.close();
  const arrived = Date.now() - 20;
  await recorder.record(a!, sample(arrived), arrived, true); // answered early, not stored
  await new Promise((r) => setTimeout(r, 1500));
  expect(recorder.completeThrough()).toBeLessThanOrEqual(arrived);
  const held = (await clockOf())!;
  expect(held.complete_through).toBeLessThanOrEqual(arrived);
  expect(Date.now() - held.written_at).toBeLessThan(1500); // still written: the process is alive
  // Stored: the clock moves on past it.
  store.open();
  await eventually(
    async () => ((await clockOf())!.complete_through > arrived + 1000 ? true : undefined),
    10_000,
    'the clock past the stored heartbeat'
  );
  expect((await store.readSeen(11)).nodes.get(a!)).toBe(arrived);
  await recorder.stopClock();
  expect(await clockOf()).toBeNull();
});

it('a heartbeat holds the clock at its arrival until released, for at most its limit and PRESENCE_HOLD_MAX_MS', async () => {
  const recorder = new PresenceRecorder(
    new PresenceStore(testDb.db),
    new HeartbeatHistoryStore(testDb.db, { intervalMs: 60_000, size: 5 }),
    { retentionMs: 120_000, flushIntervalMs: 10 },
    pino({ level: 'silent' })
  );
  const arrived = Date.now() - 3000; // three seconds in authentication so far
  const held = recorder.hold(arrived);
  expect(recorder.completeThrough()).toBe(arrived);
  expect(held.seenAt()).toBe(arrived);
  held.release();
  expect(recorder.completeThrough()).toBeGreaterThan(arrived);
  // Limited to nothing more (a body that did not come in time): no longer held, seen when recorded.
  const limited = recorder.hold(arrived);
  limited.limit(-1);
  expect(recorder.completeThrough()).toBeGreaterThan(arrived);
  expect(limited.seenAt()).toBeGreaterThan(arrived);
  // Recorded at its arrival, after a later heartbeat of the shard is already pending: the clock goes by the older.
  const [a, b] = idsOfShard(12, 2, 'held');
  void recorder.record(a!, sample(Date.now()), Date.now(), true);
  void recorder.record(b!, sample(arrived), arrived, true);
  expect(recorder.completeThrough()).toBeLessThanOrEqual(arrived);
  expect(await recorder.drain(10_000)).toBe(true);
  // Older than PRESENCE_HOLD_MAX_MS: whatever still holds it, the clock moves on.
  const stale = Date.now() - PRESENCE_HOLD_MAX_MS - 1;
  recorder.hold(stale);
  expect(recorder.completeThrough()).toBeGreaterThan(stale);
});

it('the presence horizon is the least complete time of the processes whose clock is alive, never past now', () => {
  const now = 1_000_000;
  expect(presenceHorizon([], now, 30_000)).toBe(now);
  const lagging = { complete_through: now - 20_000, written_at: now - 400 };
  const current = { complete_through: now - 300, written_at: now - 300 };
  const dead = { complete_through: now - 90_000, written_at: now - 31_000 };
  expect(presenceHorizon([current], now, 30_000)).toBe(now - 300);
  expect(presenceHorizon([current, lagging, dead], now, 30_000)).toBe(now - 20_000);
  expect(presenceHorizon([current, dead], now, 30_000)).toBe(now - 300);
  expect(presenceHorizon([{ complete_through: now + 5_000, written_at: now }], now, 30_000)).toBe(now);
});

it('per shard, a process counts with the later of its clock and its document of the shard; dead processes not at all', () => {
  const now = 1_000_000;
  // Process a's clock waits for a slow shard elsewhere; its document of this shard was written 150 ms ago.
  const a = { instance: 'api-a', complete_through: now - 1_500, written_at: now - 100 };
  const b = { instance: 'api-b', complete_through: now - 400, written_at: now - 50 };
  const dead = { instance: 'api-dead', complete_through: now - 90_000, written_at: now - 31_000 };
  expect(presenceHorizon([a, b], now, 30_000)).toBe(now - 1_500);
  expect(presenceHorizon([a, b, dead], now, 30_000, new Map([['api-a', now - 150]]))).toBe(now - 400);
  expect(
    presenceHorizon(
      [a, b],
      now,
      30_000,
      new Map([
        ['api-a', now - 150],
        ['api-b', now - 200]
      ])
    )
  ).toBe(now - 200);
  // A document older than the clock (a shard with nothing new since) does not hold the process back.
  expect(presenceHorizon([a], now, 30_000, new Map([['api-a', now - 20_000]]))).toBe(now - 1_500);
  // A document of a process whose clock is dead, or that has no clock (tools and tests), holds nothing back.
  expect(presenceHorizon([dead], now, 30_000, new Map([['api-dead', now - 60_000]]))).toBe(now);
  expect(presenceHorizon([], now, 30_000, new Map([['api-x', now - 60_000]]))).toBe(now);
  expect(presenceHorizon([a], now, 30_000, new Map([['api-a', now + 5_000]]))).toBe(now);
});

/** The real store, the last-seen writes of one shard held until `open()`. */
class ShardGate extends PresenceStore {
  private held = -1;
  private gate: Promise<void> = Promise.resolve();
  open: () => void = () => undefined;
  holdShard(shard: number): void {
    this.held = shard;
    this.gate = new Promise((r) => (this.open = r));
  }
  override async writeSeen(...args: Parameters<PresenceStore['writeSeen']>): Promise<void> {
    if (args[0] === this.held) await this.gate;
    await super.writeSeen(...args);
  }
}

it('each shard document says how complete that shard is: every heartbeat of it received before then is in it', async () => {
  const store = new ShardGate(testDb.db);
  const recorder = new PresenceRecorder(
    store,
    new HeartbeatHistoryStore(testDb.db, { intervalMs: 60_000, size: 5 }),
    { retentionMs: 120_000, flushIntervalMs: 10, ackLagMs: 1000 },
    pino({ level: 'silent' })
  );
  const [a, b] = idsOfShard(13, 2, 'through');
  const [c] = idsOfShard(14, 1, 'through');
  const t0 = Date.now();
  await recorder.record(a!, sample(t0), t0, true);
  expect(await recorder.drain(10_000)).toBe(true);
  const first = (await store.readSeen(13)).complete.get(recorder.instanceId)!;
  expect(first).toBeGreaterThanOrEqual(t0);
  expect(first).toBeLessThanOrEqual(Date.now());
  // A heartbeat still in authentication (held, in no shard yet) keeps every shard's complete time at its arrival.
  const arrived = Date.now() - 50;
  const held = recorder.hold(arrived);
  await recorder.record(b!, sample(Date.now()), Date.now(), true);
  expect(await recorder.drain(10_000)).toBe(true);
  expect((await store.readSeen(13)).complete.get(recorder.instanceId)).toBeLessThanOrEqual(arrived);
  held.release();
  // Another shard's write held up: the process's clock stays before its heartbeat, this shard's document moves on.
  store.holdShard(14);
  const late = Date.now();
  await recorder.record(c!, sample(late), late, true);
  await new Promise((r) => setTimeout(r, 50));
  const later = Date.now();
  await recorder.record(a!, sample(later), later, true);
  await eventually(
    async () => ((await store.readSeen(13)).nodes.get(a!) === later ? true : undefined),
    10_000,
    'shard 13 written'
  );
  expect((await store.readSeen(13)).complete.get(recorder.instanceId)).toBeGreaterThanOrEqual(later);
  expect(recorder.completeThrough()).toBeLessThanOrEqual(late);
  expect((await store.readSeen(14)).nodes.has(c!)).toBe(false);
  store.open();
  expect(await recorder.drain(10_000)).toBe(true);
  expect((await store.readSeen(14)).complete.get(recorder.instanceId)).toBeGreaterThanOrEqual(late);
});
