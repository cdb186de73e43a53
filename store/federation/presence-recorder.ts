/**
 * The API process's side of node presence: heartbeats are gathered in memory per presence shard and written as this
 * process's last-seen document of that shard (store/federation/presence.ts) by a group commit per shard: one write
 * carries every heartbeat of the shard that arrived while the previous write was waiting or in flight, at most one
 * write per shard per PRESENCE_FLUSH_MS, and at most PRESENCE_WRITES_IN_FLIGHT shard writes of this process at
 * once (when the database is slow, heartbeats queue behind those and the batches grow, instead of the writes
 * piling up). A write carries the last-seen times of about n / PRESENCE_SHARDS nodes (some 35 bytes each).
 * `record` resolves once the write holding the heartbeat is stored (an acknowledged heartbeat is durable), except
 * for an approved node's heartbeat while its shard's writes keep up (`early`, below).
 *
 * Early acknowledgement (`ackLagMs`, PRESENCE_ACK_LAG_MS): a heartbeat of an approved node (online or offline)
 * resolves at once, before its write, when its shard has no write failing and no heartbeat waiting longer than
 * ackLagMs for its write;
 * otherwise it waits for the write as above (back-pressure). This keeps the database's write time out of the
 * steady state's answers while every judgement stays as it was: the sweeper reads the same durable presence, which
 * trails the heartbeats by the same write time either way. What changes is a crash of the API process: the
 * heartbeats it acknowledged in its last ackLagMs may not be stored (the node's previous one is; it beats again well
 * inside its window). Liveness is soft state here, as in etcd's leases and Nomad's heartbeats, which keep TTL
 * renewals in the leader's memory. This holds for an offline node's heartbeat too (before, it waited for its
 * write): the sweeper brings the node online from the stored presence either way, and a heartbeat lost in a crash is
 * followed by the node's next one, while waiting added the database's write time (up to 2 s in a 10,000-node mass
 * online, when the transitions' own writes slow the presence writes) to a restart's first heartbeats. A pending
 * node's heartbeat always waits for its write: a review decision made right after it reads presence to set the
 * approved node's state, and must find it.
 * The samples go to the shard's samples document at most every PRESENCE_SAMPLES_MS: in a small shard (at most
 * SAMPLES_INLINE_MAX_NODES nodes) with the last-seen write when due then, otherwise later, off the heartbeat's path
 * (those one at a time per process, never in one of the last-seen writes' slots). (A large shard's
 * samples document is big, some 150 KB at 10,000 nodes, and carried along it held every heartbeat of its shard.)
 * Entries older than the retention are dropped.
 *
 * The bounded history per node is down-sampled: at most one sample per node per HEARTBEAT_HISTORY_INTERVAL_S goes
 * to the heartbeat history (one insert of every due sample, at most once a second or a quarter interval); old samples are pruned every
 * quarter of the kept window.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { HeartbeatSample } from '../../core/federation/vocabulary';
import { PresenceEntry, PresenceStore, presenceShardOf, PRESENCE_CLOCK_MS, PRESENCE_SHARDS } from './presence';
import { HeartbeatHistoryStore } from './heartbeat-history';

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

export interface PresenceRecorderOptions {
  retentionMs: number;
  /** Least time between two writes of one shard's document: heartbeats arriving meanwhile share the next write. */
  flushIntervalMs: number;
  /** Most shard writes of this process in flight at once (default PRESENCE_WRITES_IN_FLIGHT). */
  writesInFlight?: number;
  /** Least time between two writes of one shard's samples document (default PRESENCE_SAMPLES_MS). */
  samplesIntervalMs?: number;
  /** An approved node's heartbeat resolves before its write while its shard's writes are this far behind at most; 0: never. */
  ackLagMs?: number;
}

/** Default least time between two writes of one shard's samples (the directory's and dashboard's staleness). */
export const PRESENCE_SAMPLES_MS = 5000;

/** Default bound on one API process's concurrent shard writes. */
export const PRESENCE_WRITES_IN_FLIGHT = 4;

/** A shard's samples ride along its last-seen write only while it holds at most this many nodes. */
export const SAMPLES_INLINE_MAX_NODES = 64;

interface Shard {
  /** Latest heartbeat of each node of the shard heard by this process (with its sample). */
  entries: Map<string, PresenceEntry>;
  samplesDirty: boolean;
  samplesScheduled: boolean;
  lastSamplesWrite: number;
  perSecond: Map<number, number>;
  waiting: Waiter[];
  /** Arrival (ms) of the oldest heartbeat not yet taken by a write; null when every one is. */
  pendingSince: number | null;
  /** Arrival (ms) of the oldest heartbeat the write under way carries; null when none is under way. */
  writingSince: number | null;
  /** The last write of this shard failed (until one succeeds, every heartbeat waits for its write). */
  failing: boolean;
  /** A write of this shard is queued or running (it takes every heartbeat present when it starts). */
  scheduled: boolean;
  lastWrite: number;
}

/**
 * A heartbeat on its way to `record` (see PresenceRecorder.hold): while it holds, the presence clock stays at or before
 * its arrival, and the heartbeat counts as seen at its arrival.
 */
export interface PresenceHold {
  /** The heartbeat is recorded or answered: the clock may move past its arrival. */
  release(): void;
  /** From now on the hold lasts at most `ms` more (what is left is the client's: its body). */
  limit(ms: number): void;
  /** When the heartbeat counts as seen: its arrival while the hold lasts, otherwise now. */
  seenAt(): number;
}

/** The longest a heartbeat holds the presence clock (see PresenceRecorder.hold). */
export const PRESENCE_HOLD_MAX_MS = 10_000;

/** A failed shard write is tried again after this long when no heartbeat waits for it. */
const RETRY_AFTER_FAILURE_MS = 1000;

export class PresenceRecorder {
  readonly instanceId = `api-${randomBytes(6).toString('hex')}`;
  private readonly shards: Shard[] = Array.from({ length: PRESENCE_SHARDS }, () => ({
    entries: new Map(),
    samplesDirty: false,
    samplesScheduled: false,
    lastSamplesWrite: 0,
    perSecond: new Map(),
    waiting: [],
    pendingSince: null,
    writingSince: null,
    failing: false,
    scheduled: false,
    lastWrite: 0
  }));
  /** Per node, the last history interval this process wrote a sample for. */
  private readonly historyInterval = new Map<string, number>();
  private inFlight = 0;
  /** The samples write under way or queued last (samples writes go one at a time). */
  private samplesLane: Promise<unknown> = Promise.resolve();
  private readonly slotWaiters: (() => void)[] = [];
  private historyRunning = false;
  private lastHistory = 0;
  private lastPrune = 0;
  private lastHistoryPrune = Date.now();
  private readonly maxInFlight: number;
  private readonly samplesIntervalMs: number;
  private readonly ackLagMs: number;
  private earlyAcks = 0;
  private clockTimer: NodeJS.Timeout | null = null;
  private clockWriting = false;
  /** Heartbeats arrived and not yet recorded (see hold): arrival and the time the hold lasts until (ms). */
  private readonly holds = new Set<{ at: number; until: number }>();

  constructor(
    private readonly store: PresenceStore,
    private readonly history: HeartbeatHistoryStore,
    private readonly options: PresenceRecorderOptions,
    private readonly logger: Logger
  ) {
    this.maxInFlight = Math.max(1, options.writesInFlight ?? PRESENCE_WRITES_IN_FLIGHT);
    this.samplesIntervalMs = options.samplesIntervalMs ?? PRESENCE_SAMPLES_MS;
    this.ackLagMs = options.ackLagMs ?? 0;
  }

  /**
   * Records a heartbeat; resolves when it is stored, or at once for an approved node (`approved`: online or
   * offline) while its shard keeps up (see Early acknowledgement above). Rejects when the write holding a heartbeat
   * that waited for it fails.
   */
  record(nodeId: string, sample: HeartbeatSample, seenAt: number, approved = false): Promise<void> {
    const index = presenceShardOf(nodeId);
    const shard = this.shards[index]!;
    // A heartbeat seen at its arrival (it held the presence clock through authentication) may be older than one
    // of the same node recorded meanwhile (a retry): the node's last-seen time never moves back.
    const previous = shard.entries.get(nodeId);
    if (!previous || previous.seen_at <= seenAt)
      shard.entries.set(nodeId, { node_id: nodeId, seen_at: seenAt, sample });
    shard.samplesDirty = true;
    const second = Math.floor(seenAt / 1000);
    shard.perSecond.set(second, (shard.perSecond.get(second) ?? 0) + 1);
    const now = Date.now();
    // How long the oldest heartbeat of this shard not yet stored has waited: the shard's write lag.
    const lag = now - Math.min(shard.pendingSince ?? now, shard.writingSince ?? Infinity);
    // The heartbeat's arrival is its seen_at (read before this call, up to PRESENCE_HOLD_MAX_MS earlier for one that
    // held the clock through authentication): the presence clock must never claim a time past a heartbeat not yet
    // stored, so the shard's oldest pending time is the least of them, not merely the first one's.
    shard.pendingSince = Math.min(shard.pendingSince ?? Infinity, now, seenAt);
    const early = this.ackLagMs > 0 && approved && !shard.failing && lag <= this.ackLagMs;
    if (!shard.scheduled) {
      shard.scheduled = true;
      void this.flush(index);
    }
    if (early) {
      this.earlyAcks++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => shard.waiting.push({ resolve, reject }));
  }

  /**
   * Starts writing this process's presence clock every PRESENCE_CLOCK_MS (the API does): the time before which every
   * heartbeat it received is stored, so the sweeper never judges a node on presence this process has not written yet
   * (a database that falls behind makes the writes lag, not the nodes look silent).
   */
  startClock(): void {
    if (this.clockTimer) return;
    this.clockTimer = setInterval(() => void this.writeClock(), PRESENCE_CLOCK_MS);
    this.clockTimer.unref();
    void this.writeClock();
  }

  /**
   * Holds the presence clock at or before a heartbeat's arrival (`at`, ms) until it is recorded: a heartbeat that
   * waits in authentication (its node read, when the node cache misses) is in no shard yet, and without the hold the
   * clock would pass its arrival and the sweeper could judge its node silent although it beat in time. The route
   * holds from the request's first hook; once authentication is done the hold is limited (`limit`), so a client
   * that trickles its body cannot hold every node's judgement back. No hold lasts longer than PRESENCE_HOLD_MAX_MS:
   * a flood of heartbeats with unknown node ids (each a miss the cache reads, in shared reads of up to 1,000) delays
   * offline judgements by at most that, never stops them.
   */
  hold(at: number): PresenceHold {
    // `at` must be the heartbeat's arrival, taken just before this call (the route's first hook): a shard write that
    // began between an earlier `at` and this call would claim its shard complete past a heartbeat it does not hold.
    const held = { at, until: at + PRESENCE_HOLD_MAX_MS };
    this.holds.add(held);
    return {
      release: () => void this.holds.delete(held),
      limit: (ms) => void (held.until = Math.min(held.until, Date.now() + ms)),
      seenAt: () => (this.holds.has(held) && Date.now() <= held.until ? held.at : Date.now())
    };
  }

  /** Every heartbeat received before this time (ms) is stored. */
  completeThrough(): number {
    let through = this.heldThrough(Date.now());
    for (const s of this.shards) through = Math.min(through, s.pendingSince ?? Infinity, s.writingSince ?? Infinity);
    return through;
  }

  /** `now`, or the arrival of the oldest heartbeat still held in authentication (in no shard yet) if earlier. */
  private heldThrough(now: number): number {
    let through = now;
    for (const held of this.holds) {
      if (now > held.until) this.holds.delete(held);
      else through = Math.min(through, held.at);
    }
    return through;
  }

  private async writeClock(): Promise<void> {
    if (this.clockWriting) return;
    this.clockWriting = true;
    try {
      await this.store.writeClock(this.instanceId, this.completeThrough());
    } catch (err) {
      this.logger.warn({ err }, 'presence clock write failed');
    } finally {
      this.clockWriting = false;
    }
  }

  /** Stops the clock and removes it (after drain: every heartbeat this process took is stored). */
  async stopClock(): Promise<void> {
    if (!this.clockTimer) return;
    clearInterval(this.clockTimer);
    this.clockTimer = null;
    while (this.clockWriting) await new Promise((r) => setTimeout(r, 10));
    await this.store
      .removeClock(this.instanceId)
      .catch((err: unknown) => this.logger.warn({ err }, 'presence clock could not be removed'));
  }

  /** Resolves true once every recorded heartbeat is stored (false if that takes longer than timeoutMs). */
  async drain(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const pending = () => this.shards.some((s) => s.pendingSince !== null || s.writingSince !== null);
    while (pending()) {
      if (Date.now() >= deadline) return false;
      await new Promise((r) => setTimeout(r, 20));
    }
    return true;
  }

  /** Heartbeats acknowledged before their write, since this process started. */
  get acknowledgedEarly(): number {
    return this.earlyAcks;
  }

  private async acquire(): Promise<void> {
    if (this.inFlight < this.maxInFlight) {
      this.inFlight++;
      return;
    }
    await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
  }

  private release(): void {
    const next = this.slotWaiters.shift();
    if (next) next();
    else this.inFlight--;
  }

  /** Writes one shard until every heartbeat of it is taken by a successful write; one such loop per shard at a time. */
  private async flush(index: number): Promise<void> {
    const shard = this.shards[index]!;
    try {
      while (shard.pendingSince !== null) {
        // After a failed write with no heartbeat waiting for the next one (those acknowledged early are still to be
        // stored), the next attempt comes RETRY_AFTER_FAILURE_MS later, not at the heartbeats' pace.
        const pace =
          shard.failing && shard.waiting.length === 0 ? RETRY_AFTER_FAILURE_MS : this.options.flushIntervalMs;
        const wait = shard.lastWrite + pace - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await this.acquire();
        const now = Date.now();
        shard.lastWrite = now;
        const batch = shard.waiting;
        shard.waiting = [];
        const pendingSince = shard.pendingSince;
        shard.writingSince = pendingSince;
        shard.pendingSince = null;
        try {
          for (const [id, e] of shard.entries) if (now - e.seen_at > this.options.retentionMs) shard.entries.delete(id);
          for (const s of shard.perSecond.keys()) if (s < Math.floor(now / 1000) - 60) shard.perSecond.delete(s);
          const seen = new Map<string, number>();
          for (const [id, e] of shard.entries) seen.set(id, e.seen_at);
          const perSecond = [...shard.perSecond].map(([second, count]) => ({ second, count }));
          // Every heartbeat of this shard recorded so far is in `seen`; one still in authentication may be of it.
          const through = this.heldThrough(now);
          // Samples due (none written for PRESENCE_SAMPLES_MS) go with this write, so a small fleet's directory
          // shows each heartbeat's sample once it is stored; a large one's are written every interval.
          const samplesDue =
            !shard.samplesScheduled &&
            shard.entries.size <= SAMPLES_INLINE_MAX_NODES &&
            now - shard.lastSamplesWrite >= this.samplesIntervalMs;
          if (samplesDue) {
            shard.lastSamplesWrite = now;
            shard.samplesDirty = false;
          }
          await Promise.all([
            this.store.writeSeen(index, this.instanceId, seen, perSecond, through),
            samplesDue ? this.store.writeSamples(index, this.instanceId, [...shard.entries.values()]) : undefined
          ]);
          shard.failing = false;
          shard.writingSince = null;
          for (const w of batch) w.resolve();
        } catch (err) {
          shard.samplesDirty = true;
          shard.failing = true;
          // What this write carried is still in memory and goes with the next one.
          shard.pendingSince = Math.min(pendingSince ?? now, shard.pendingSince ?? now);
          shard.writingSince = null;
          for (const w of batch) w.reject(err as Error);
        } finally {
          this.release();
        }
        this.housekeeping(now);
        if (shard.samplesDirty && !shard.samplesScheduled) {
          shard.samplesScheduled = true;
          void this.flushSamples(index);
        }
      }
    } finally {
      shard.scheduled = false;
    }
  }

  /** Writes a shard's samples once its interval allows; off the heartbeat's path (failures are only logged). */
  private async flushSamples(index: number): Promise<void> {
    const shard = this.shards[index]!;
    try {
      const wait = shard.lastSamplesWrite + this.samplesIntervalMs - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      // One samples write of this process at a time, in a lane of its own: the last-seen writes keep their slots.
      const write = this.samplesLane.then(() => {
        shard.lastSamplesWrite = Date.now();
        shard.samplesDirty = false;
        return this.store.writeSamples(index, this.instanceId, [...shard.entries.values()]);
      });
      this.samplesLane = write.catch(() => undefined);
      await write;
    } catch (err) {
      shard.samplesDirty = true;
      this.logger.warn({ err, shard: index }, 'presence samples write failed');
    } finally {
      shard.samplesScheduled = false;
    }
  }

  private housekeeping(now: number): void {
    if (!this.historyRunning && now - this.lastHistory >= Math.min(1000, this.history.intervalMs / 4)) {
      this.historyRunning = true;
      this.lastHistory = now;
      void this.writeHistory(now).finally(() => (this.historyRunning = false));
    }
    if (now - this.lastPrune > 60_000) {
      this.lastPrune = now;
      void this.store
        .prune(new Date(now - this.options.retentionMs))
        .catch((err) => this.logger.warn({ err }, 'presence prune failed'));
    }
  }

  /** Writes a history sample for nodes heard from in an interval that has none from this process yet. */
  private async writeHistory(now: number): Promise<void> {
    const due: PresenceEntry[] = [];
    const live = new Set<string>();
    for (const shard of this.shards) {
      for (const [nodeId, entry] of shard.entries) {
        live.add(nodeId);
        const interval = this.history.interval(entry.seen_at);
        if (interval <= (this.historyInterval.get(nodeId) ?? -1)) continue;
        this.historyInterval.set(nodeId, interval);
        due.push(entry);
      }
    }
    for (const id of this.historyInterval.keys()) if (!live.has(id)) this.historyInterval.delete(id);
    await this.history
      .append(due)
      .catch((err) => this.logger.warn({ err, samples: due.length }, 'heartbeat history write failed'));
    if (now - this.lastHistoryPrune > this.history.windowMs / 4) {
      this.lastHistoryPrune = now;
      await this.history.prune(now).catch((err) => this.logger.warn({ err }, 'heartbeat history prune failed'));
    }
  }
}
