/**
 * The node change log: a record of every change to a node document after registration (and of each registration
 * round's new nodes), which every API process's node cache and the presence sweepers follow. Written and read
 * through NodeStore (nodes.ts); the ring of collections it lives in is node-changes-ring.ts.
 */
import { Collection, Db } from 'mongodb';
import type { NodeState } from '../../core/federation/vocabulary';
import {
  nodeChangesCollection,
  NODE_CHANGES_KEEP_MS,
  NODE_CHANGES_SLOTS,
  NODE_CHANGES_SLOT_MS
} from './node-changes-ring';

/**
 * One change to a node document after registration, as every API process's node cache follows it
 * (store/federation/node-cache.ts): the new state, or null when the node was removed. Kept NODE_CHANGES_KEEP_MS, in
 * the change log's ring of collections (see NODE_CHANGES_SLOT_MS).
 */
export interface NodeChangeDocument {
  _id: string;
  node_id: string;
  state: NodeState | null;
  /** When the change happened (the node document's state_changed_at). */
  state_at: Date;
  /** When this record was written: what readers select on. */
  written_at: Date;
  /** The node's liveness_seq after a liveness transition (absent on other changes). */
  liveness_seq?: number;
  /**
   * A registration's record only: what a node cache needs to authenticate the new node (its key's digest, as the
   * node document holds it, and its brand) and what the node directory's index holds of it (its number, name and
   * declared memory), so every API process knows it from the log without reading its document.
   */
  registered?: NodeRegisteredFields;
}

/** What external_node authentication reads of a node document (the node cache's entries). */
export interface NodeAuthFields {
  api_key_hash: string;
  brand: string;
}

/**
 * A registration record's fields: authentication's, and the directory index's (node-index.ts; absent from records
 * written before the index existed, whose nodes the index reads from their documents).
 */
export interface NodeRegisteredFields extends NodeAuthFields {
  seq?: number;
  name?: string;
  memory_gb?: number | null;
}

/** One change record to insert (see NodeStore.insertChanges). */
export interface ChangeRecordInput {
  nodeId: string;
  state: NodeState | null;
  stateAt: string;
  livenessSeq?: number;
  registered?: NodeRegisteredFields;
}

/** Records written this far ahead of a reader's clock (another host's) are read too (see changesSince). */
const CHANGES_CLOCK_MARGIN_MS = 5000;
/** Most inserts of one batch of change records (see insertChanges). */
const MAX_CHANGE_RESTAMPS = 5;

export class NodeChangeLog {
  private readonly db: Db;
  private lastChangesPrune = 0;
  /**
   * Hears the records this process wrote, once they are stored (the node directory's index applies them at once, so
   * a registration this process answered is listed by it before the next read of the log).
   */
  onWritten: ((records: NodeChangeDocument[]) => void) | null = null;

  constructor(db: Db) {
    this.db = db;
  }

  /** The change log's ring collection for records written at `ms` (see NODE_CHANGES_SLOT_MS). */
  private changesAt(ms: number): Collection<NodeChangeDocument> {
    return this.db.collection(nodeChangesCollection(ms));
  }

  /**
   * Records a change for the node caches of every API process. The log holds only the last NODE_CHANGES_KEEP_MS of
   * changes, in a ring of collections by time (NODE_CHANGES_SLOT_MS), so reading what is new stays cheap on FerretDB,
   * where every read of a range scans its collection.
   */
  async recordChange(nodeId: string, state: NodeState | null, stateAt: string): Promise<void> {
    await this.insertChanges([{ nodeId, state, stateAt }]);
    this.pruneChanges();
  }

  /**
   * Change records (see recordChange), in one insert; `_id`s unique per record, opaque to readers. A record is stamped
   * (written_at) before its insert is sent, and readers ask for records newer than their previous read minus
   * CHANGES_CLOCK_MARGIN_MS: an insert that took longer than half that margin (an overloaded database) may have
   * become visible after a reader's read had moved past its stamp, so the records are inserted again with a new
   * stamp, until one insert is quick enough (readers apply a record twice harmlessly: by its state_at, liveness_seq).
   */
  async insertChanges(changes: ChangeRecordInput[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const startedAt = Date.now();
      await this.insertChangesOnce(changes);
      if (Date.now() - startedAt <= CHANGES_CLOCK_MARGIN_MS / 2 || attempt >= MAX_CHANGE_RESTAMPS) return;
    }
  }

  private async insertChangesOnce(changes: ChangeRecordInput[]): Promise<void> {
    if (changes.length === 0) return;
    const now = new Date();
    const docs = changes.map((c, i): NodeChangeDocument => ({
      _id: `${c.nodeId}:${now.getTime()}:${i}:${Math.random().toString(36).slice(2, 10)}`,
      node_id: c.nodeId,
      state: c.state,
      state_at: new Date(Date.parse(c.stateAt) || now.getTime()),
      written_at: now,
      ...(c.livenessSeq === undefined ? {} : { liveness_seq: c.livenessSeq }),
      ...(c.registered ? { registered: c.registered } : {})
    }));
    const log = this.changesAt(now.getTime());
    if (docs.length === 1) await log.insertOne(docs[0]!);
    else await log.insertMany(docs, { ordered: false });
    this.onWritten?.(docs);
  }

  /**
   * At most once per NODE_CHANGES_SLOT_MS: empties the three ring collections after the current one of records older
   * than NODE_CHANGES_KEEP_MS (each holds at most one interval's records; a host whose clock runs ahead may already
   * write into the next one, which the age filter keeps). A collection no writer emptied (a quiet hub) only holds old
   * records that readers skip by their time.
   */
  pruneChanges(): void {
    const now = Date.now();
    if (now - this.lastChangesPrune < NODE_CHANGES_SLOT_MS) return;
    this.lastChangesPrune = now;
    const old = { written_at: { $lt: new Date(now - NODE_CHANGES_KEEP_MS) } };
    for (let ahead = 1; ahead <= 3; ahead++)
      this.changesAt(now + ahead * NODE_CHANGES_SLOT_MS)
        .deleteMany(old)
        .catch(() => undefined);
  }

  /**
   * Change records written since `since` (see NodeCache): those of the ring collections from since's interval to the
   * interval CHANGES_CLOCK_MARGIN_MS from now (one or two collections for a reader that read a second ago), read at
   * once. A `since` older than the ring holds reads the whole ring (the caller starts over from the documents then).
   */
  async changesSince(since: Date): Promise<NodeChangeDocument[]> {
    // Readers prune too: a ring nobody writes to for a while (a quiet fleet) would otherwise keep a lap-old
    // collection's records where readers arrive (FerretDB reads a collection whole to filter it).
    this.pruneChanges();
    const first = Math.floor(since.getTime() / NODE_CHANGES_SLOT_MS);
    const last = Math.floor((Date.now() + CHANGES_CLOCK_MARGIN_MS) / NODE_CHANGES_SLOT_MS);
    const intervals = Array.from(
      { length: Math.min(NODE_CHANGES_SLOTS, Math.max(1, last - first + 1)) },
      (_, i) => last - i
    );
    const reads = await Promise.all(
      intervals.map((n) =>
        this.changesAt(n * NODE_CHANGES_SLOT_MS)
          .find({ written_at: { $gt: since } })
          .toArray()
      )
    );
    return reads.flat();
  }
}
