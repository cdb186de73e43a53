/**
 * The API process's side of node presence: heartbeats are gathered in memory and written as this process's
 * presence document by a group commit (one write carries every heartbeat that arrived while the previous write
 * was in flight, and at most one write per PRESENCE_FLUSH_MS; a write also waits twice as long as the previous one
 * took after it, up to 200 ms, so presence takes at most a third of the database's time until a write takes
 * 100 ms, about 5,000 nodes per process on FerretDB). `record` resolves once the write holding the
 * heartbeat is stored, so an acknowledged heartbeat is durable. Entries older than the retention are dropped.
 *
 * The bounded history per node is down-sampled: at most one sample per node per HEARTBEAT_HISTORY_INTERVAL_S goes
 * to the heartbeat history (one insert of every due sample, after the presence commit); old samples are pruned
 * every quarter of the kept window.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { HeartbeatSample } from '../../core/federation/vocabulary';
import { PresenceEntry, PresenceStore } from './presence';
import { HeartbeatHistoryStore } from './heartbeat-history';

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

export interface PresenceRecorderOptions {
  retentionMs: number;
  /** Least time between two writes of the document: heartbeats arriving meanwhile share the next write. */
  flushIntervalMs: number;
}

export class PresenceRecorder {
  readonly instanceId = `api-${randomBytes(6).toString('hex')}`;
  private readonly entries = new Map<string, PresenceEntry>();
  private readonly perSecond = new Map<number, number>();
  /** Per node, the last history interval this process wrote a sample for. */
  private readonly historyInterval = new Map<string, number>();
  private waiting: Waiter[] = [];
  private flushing = false;
  private historyRunning = false;
  private lastPrune = 0;
  private lastHistoryPrune = Date.now();
  private lastWrite = 0;
  private lastWriteEnd = 0;
  private lastWriteMs = 0;

  constructor(
    private readonly store: PresenceStore,
    private readonly history: HeartbeatHistoryStore,
    private readonly options: PresenceRecorderOptions,
    private readonly logger: Logger
  ) {}

  /** Records a heartbeat; resolves when it is stored. */
  record(nodeId: string, sample: HeartbeatSample, seenAt: number): Promise<void> {
    this.entries.set(nodeId, { node_id: nodeId, seen_at: seenAt, sample });
    const second = Math.floor(seenAt / 1000);
    this.perSecond.set(second, (this.perSecond.get(second) ?? 0) + 1);
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.waiting.length > 0) {
        const wait = Math.max(this.lastWrite + this.options.flushIntervalMs, this.lastWriteEnd + Math.min(2 * this.lastWriteMs, 200)) - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        this.lastWrite = Date.now();
        const batch = this.waiting;
        this.waiting = [];
        const now = Date.now();
        for (const [id, e] of this.entries) if (now - e.seen_at > this.options.retentionMs) this.entries.delete(id);
        for (const s of this.perSecond.keys()) if (s < Math.floor(now / 1000) - 60) this.perSecond.delete(s);
        try {
          await this.store.write(
            this.instanceId,
            [...this.entries.values()],
            [...this.perSecond].map(([second, count]) => ({ second, count }))
          );
          for (const w of batch) w.resolve();
        } catch (err) {
          for (const w of batch) w.reject(err as Error);
        }
        this.lastWriteEnd = Date.now();
        this.lastWriteMs = this.lastWriteEnd - this.lastWrite;
        if (!this.historyRunning) {
          this.historyRunning = true;
          void this.writeHistory(now).finally(() => (this.historyRunning = false));
        }
        if (now - this.lastPrune > 60_000) {
          this.lastPrune = now;
          await this.store.prune(new Date(now - this.options.retentionMs)).catch((err) => this.logger.warn({ err }, 'presence prune failed'));
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /** Writes a history sample for nodes heard from in an interval that has none from this process yet. */
  private async writeHistory(now: number): Promise<void> {
    const due: PresenceEntry[] = [];
    for (const [nodeId, entry] of this.entries) {
      const interval = this.history.interval(entry.seen_at);
      if (interval <= (this.historyInterval.get(nodeId) ?? -1)) continue;
      this.historyInterval.set(nodeId, interval);
      due.push(entry);
    }
    for (const id of this.historyInterval.keys()) if (!this.entries.has(id)) this.historyInterval.delete(id);
    await this.history.append(due).catch((err) => this.logger.warn({ err, samples: due.length }, 'heartbeat history write failed'));
    if (now - this.lastHistoryPrune > this.history.windowMs / 4) {
      this.lastHistoryPrune = now;
      await this.history.prune(now).catch((err) => this.logger.warn({ err }, 'heartbeat history prune failed'));
    }
  }
}
