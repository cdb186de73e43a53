/**
 * The bounded, down-sampled heartbeat history of each node: at most one sample per node per interval, the newest
 * `size` intervals kept.
 *
 * Insert-only, one document per node and interval, its _id derived from both (`<node_id>:<interval number>`):
 * - FerretDB answers a lookup by _id from its primary key, but every update or delete scans the whole collection,
 *   so appending to an array inside a node document would cost a scan per sample (and FerretDB applies concurrent
 *   updates of one document as read-modify-write, so a history append could undo a state change written at the same
 *   moment; the node document therefore has one writer, the node workflow);
 * - a reader knows the ids of the last `size` intervals and fetches exactly those;
 * - two API processes writing the same node in the same interval collide on the _id and the second is dropped.
 * Old intervals are removed by `prune` (a scan, run rarely by each API process).
 */
import { Collection, Db, MongoBulkWriteError } from 'mongodb';
import type { HeartbeatSample } from '../../core/federation/vocabulary';

interface HistoryDocument {
  _id: string; // `${node_id}:${interval}`
  node_id: string;
  at: Date;
  /** JSON text of the HeartbeatSample. */
  sample_json: string;
}

export class HeartbeatHistoryStore {
  private readonly history: Collection<HistoryDocument>;
  constructor(
    db: Db,
    private readonly options: { intervalMs: number; size: number }
  ) {
    this.history = db.collection('node_heartbeat_history');
  }

  /** The length of one interval (one sample per node per interval). */
  get intervalMs(): number {
    return this.options.intervalMs;
  }

  /** The span of history kept. */
  get windowMs(): number {
    return this.options.size * this.options.intervalMs;
  }

  /** The number of the interval a time falls in (one sample per node per interval). */
  interval(atMs: number): number {
    return Math.floor(atMs / this.options.intervalMs);
  }

  /** Stores one sample per node (a node already holding a sample for that interval keeps the first). */
  async append(samples: { node_id: string; seen_at: number; sample: HeartbeatSample }[]): Promise<void> {
    if (samples.length === 0) return;
    const docs = samples.map((s) => ({
      _id: `${s.node_id}:${this.interval(s.seen_at)}`,
      node_id: s.node_id,
      at: new Date(s.seen_at),
      sample_json: JSON.stringify(s.sample)
    }));
    try {
      await this.history.insertMany(docs, { ordered: false });
    } catch (err) {
      const duplicatesOnly =
        err instanceof MongoBulkWriteError && [err.writeErrors].flat().every((e) => e.code === 11000);
      if (!duplicatesOnly) throw err;
    }
  }

  /** The node's samples of the last `size` intervals, oldest first. */
  async recent(nodeId: string, nowMs = Date.now()): Promise<HeartbeatSample[]> {
    const last = this.interval(nowMs);
    const ids = Array.from({ length: this.options.size }, (_, i) => `${nodeId}:${last - i}`);
    const docs = await Promise.all(ids.map((_id) => this.history.findOne({ _id })));
    return docs
      .filter((d): d is HistoryDocument => d !== null)
      .reverse()
      .map((d) => JSON.parse(d.sample_json) as HeartbeatSample);
  }

  /** Removes samples older than the kept window. */
  async prune(nowMs = Date.now()): Promise<void> {
    await this.history.deleteMany({ at: { $lt: new Date(nowMs - this.windowMs) } });
  }
}
