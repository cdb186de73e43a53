/**
 * The API process's side of node presence: heartbeats are gathered in memory and written as this process's
 * presence document by a group commit (one write carries every heartbeat that arrived while the previous write
 * was in flight, and at most one write per PRESENCE_FLUSH_MS). `record` resolves once the write holding the
 * heartbeat is stored, so an acknowledged heartbeat is durable. Entries older than the retention are dropped.
 *
 * The bounded history per node is down-sampled: at most one sample per HEARTBEAT_HISTORY_INTERVAL_S is appended
 * to the node document (keeping the newest HEARTBEAT_HISTORY_SIZE), written after the presence commit.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { HeartbeatSample } from '../core/federation';
import { PresenceEntry, PresenceStore } from '../activities/store/presence';
import { NodeStore } from '../activities/store/nodes';

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

export interface PresenceRecorderOptions {
  retentionMs: number;
  /** Least time between two writes of the document: heartbeats arriving meanwhile share the next write. */
  flushIntervalMs: number;
  historyIntervalMs: number;
  historySize: number;
}

export class PresenceRecorder {
  readonly instanceId = `api-${randomBytes(6).toString('hex')}`;
  private readonly entries = new Map<string, PresenceEntry>();
  private readonly perSecond = new Map<number, number>();
  private readonly historyWrittenAt = new Map<string, number>();
  private waiting: Waiter[] = [];
  private flushing = false;
  private historyRunning = false;
  private lastPrune = 0;
  private lastWrite = 0;

  constructor(
    private readonly store: PresenceStore,
    private readonly nodes: NodeStore,
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
        const wait = this.lastWrite + this.options.flushIntervalMs - Date.now();
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

  /** Appends a history sample for nodes whose last one is older than the interval. */
  private async writeHistory(now: number): Promise<void> {
    for (const [nodeId, entry] of this.entries) {
      const last = this.historyWrittenAt.get(nodeId) ?? 0;
      if (entry.seen_at <= last || now - last < this.options.historyIntervalMs) continue;
      this.historyWrittenAt.set(nodeId, now);
      await this.nodes.appendHistory(nodeId, [entry.sample], this.options.historySize).catch((err) => this.logger.warn({ err, nodeId }, 'heartbeat history write failed'));
    }
    for (const id of this.historyWrittenAt.keys()) if (!this.entries.has(id)) this.historyWrittenAt.delete(id);
  }
}
