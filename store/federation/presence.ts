/**
 * Node presence: when each node was last heard from, and its latest heartbeat sample.
 *
 * Each API process owns one document (its instance id) holding every node it heard from recently, rewritten as a
 * whole by that process's group commit. A heartbeat is acknowledged only once the document holding it is written,
 * so the cost per heartbeat is a share of one write, whatever the number of nodes (FerretDB rewrites documents
 * by scanning, so per-node updates would not sustain the heartbeat rate). Readers (the node workflow's offline
 * check, the directory, the dashboard) merge the few documents and take the newest time per node.
 *
 * The entries are stored as one JSON text, not as an array of subdocuments: FerretDB converts every field of
 * every subdocument on each write and read (about 80 µs per entry, so ~46 ms to write 500 nodes), while one
 * string costs a copy (~11 ms for the same 500 nodes, measured with bench:heartbeat's stack).
 */
import { Collection, Db } from 'mongodb';
import type { HeartbeatSample } from '../../core/federation/vocabulary';

export interface PresenceEntry {
  node_id: string;
  /** Milliseconds since the epoch when the hub received the heartbeat. */
  seen_at: number;
  sample: HeartbeatSample;
}

export interface HeartbeatsPerSecond {
  /** Epoch second. */
  second: number;
  count: number;
}

interface PresenceDocument {
  _id: string; // API instance id
  updated_at: Date;
  /** JSON text of PresenceEntry[]. */
  nodes_json: string;
  /** JSON text of HeartbeatsPerSecond[] over the last minute. */
  per_second_json: string;
}

export class PresenceStore {
  private readonly presence: Collection<PresenceDocument>;
  constructor(db: Db) {
    this.presence = db.collection('node_presence');
  }

  async write(instanceId: string, nodes: PresenceEntry[], perSecond: HeartbeatsPerSecond[]): Promise<void> {
    await this.presence.replaceOne(
      { _id: instanceId },
      { updated_at: new Date(), nodes_json: JSON.stringify(nodes), per_second_json: JSON.stringify(perSecond) },
      { upsert: true }
    );
  }

  /** Newest entry per node across every API process's document. */
  async snapshot(): Promise<{ nodes: Map<string, PresenceEntry>; heartbeatsLastMinute: number }> {
    const docs = await this.presence.find({}).toArray();
    const nodes = new Map<string, PresenceEntry>();
    const sinceSecond = Math.floor(Date.now() / 1000) - 60;
    let heartbeatsLastMinute = 0;
    for (const doc of docs) {
      for (const entry of JSON.parse(doc.nodes_json ?? '[]') as PresenceEntry[]) {
        const known = nodes.get(entry.node_id);
        if (!known || known.seen_at < entry.seen_at) nodes.set(entry.node_id, entry);
      }
      for (const s of JSON.parse(doc.per_second_json ?? '[]') as HeartbeatsPerSecond[]) if (s.second > sinceSecond) heartbeatsLastMinute += s.count;
    }
    return { nodes, heartbeatsLastMinute };
  }

  /** Drops documents of API processes that stopped writing long ago. */
  async prune(olderThan: Date): Promise<void> {
    await this.presence.deleteMany({ updated_at: { $lt: olderThan } });
  }
}
