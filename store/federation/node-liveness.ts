/**
 * Node liveness as the presence sweeper keeps it: its view of each node (loadLiveness, livenessOf) and its
 * online ⇄ offline transitions, written conditionally (applyLiveness) and settled after a failed write
 * (settleLiveness). Part of NodeStore (nodes.ts).
 */
import { Collection } from 'mongodb';
import type { NodeState } from '../../core/federation/vocabulary';
import type { NodeChangeLog } from './node-change-log';
import type { NodeDocument } from './node-document';
import type { NodeDocumentWriter } from './node-writes';

/**
 * One online ⇄ offline transition decided by the presence sweeper from its read of presence
 * (activities/federation/node-lifecycle-sweeper.ts): applied only if the node is still `from`; `seq` is its liveness_seq after.
 */
export interface LivenessTransition {
  node_id: string;
  from: 'online' | 'offline';
  to: 'online' | 'offline';
  /** ISO time of the change (the start of the presence read that decided it). */
  at: string;
  reason: string;
  /** The node's liveness_seq after this transition (1 for its first). */
  seq: number;
}

/** What the presence sweeper keeps of a node (its liveness view, see loadLiveness). */
export interface LivenessView {
  state: NodeState;
  seq: number;
  /** ms of state_changed_at. */
  state_at: number;
}

/** Most liveness transitions whose change records go in one insert. */
const LIVENESS_BATCH = 500;
/**
 * Nodes in the first reply of the liveness read: up to this many, no cursor is left open (see loadLiveness); about
 * 80 bytes each, a reply well under MongoDB's 16 MB.
 */
const LIVENESS_READ_BATCH = 50_000;
const LIVENESS_PROJECTION = { _id: 1, state: 1, liveness_seq: 1, state_changed_at: 1 } as const;
type LivenessDocument = Pick<NodeDocument, '_id' | 'state' | 'liveness_seq' | 'state_changed_at'>;

export class NodeLiveness {
  private readonly nodes: Collection<NodeDocument>;
  private readonly writer: NodeDocumentWriter;
  private readonly changes: NodeChangeLog;
  /** The read of every node's liveness under way, shared by the sweeps loading meanwhile (see loadLiveness). */
  private loadingAll: Promise<LivenessDocument[]> | null = null;

  constructor(nodes: Collection<NodeDocument>, writer: NodeDocumentWriter, changes: NodeChangeLog) {
    this.nodes = nodes;
    this.writer = writer;
    this.changes = changes;
  }

  /**
   * Every node's liveness view (state, liveness_seq, state_changed_at) for which `keep` holds (the sweeper's shards).
   * The sweeps of one process that load at the same time (the groups start and end their runs together) share one
   * read of the nodes, and the read comes back in one reply (up to LIVENESS_READ_BATCH nodes): FerretDB drops a cursor whose connection closed, and
   * under load the getMores of a 10,000-node read met "cursor not found", the attempt failed and was retried
   * beside the others, each retry a full read again (a sort, a range or `$in` is a full read too on FerretDB, so
   * paging by `_id` would read every node once per page).
   */
  async loadLiveness(keep: (nodeId: string) => boolean): Promise<Map<string, LivenessView>> {
    this.loadingAll ??= this.nodes
      .find<LivenessDocument>({}, { projection: LIVENESS_PROJECTION })
      .batchSize(LIVENESS_READ_BATCH)
      .toArray()
      .finally(() => (this.loadingAll = null));
    const docs = await this.loadingAll;
    const out = new Map<string, LivenessView>();
    for (const d of docs)
      if (keep(d._id))
        out.set(d._id, { state: d.state, seq: d.liveness_seq ?? 0, state_at: Date.parse(d.state_changed_at) || 0 });
    return out;
  }

  /**
   * Applies liveness transitions, conditionally: each is an update by _id that matches only a node still in the
   * `from` state (so a review decision, a rejection or a removal written first wins) and increments its liveness_seq
   * (NODE_WRITES_IN_FLIGHT at once; before, an updateMany of up to 500 by `_id: { $in }`, which FerretDB cannot push
   * down to its database: each read every node document, 4-40 s a tick at 10,000 nodes under load). The nodes an
   * update did not match are read once to tell the caller their current views. The applied ones get their
   * node_changes records (one insert per LIVENESS_BATCH) and are returned; the caller appends their ledger events
   * (idempotent by node and liveness_seq). Transitions whose write failed, or whose records could not be written,
   * are returned as failed: the caller settles them later (settleLiveness). A node's document is written this way or
   * by its workflow (registration, review), never by the heartbeat path. On FerretDB `$inc` is not atomic across
   * concurrent writers; the only writer of liveness_seq is the sweeper of the node's group (one at a time, see
   * node-lifecycle-sweeper.contract.ts).
   */
  async applyLiveness(transitions: LivenessTransition[]): Promise<{
    applied: LivenessTransition[];
    refused: Map<string, LivenessView | null>;
    failed: LivenessTransition[];
  }> {
    const applied: LivenessTransition[] = [];
    const refused = new Map<string, LivenessView | null>();
    const failed: LivenessTransition[] = [];
    for (let i = 0; i < transitions.length; i += LIVENESS_BATCH) {
      const batch = transitions.slice(i, i + LIVENESS_BATCH);
      const won: LivenessTransition[] = [];
      const lost: LivenessTransition[] = [];
      // After a failed write the rest of the batch is not sent (the database is away or timing out: waiting for
      // each in turn would hold the tick for minutes); they are settled later like the failed one.
      let broken = false;
      await Promise.all(
        batch.map(async (t) => {
          try {
            const result = await this.writer.write(t.node_id, () => {
              if (broken) throw new Error('not sent: an earlier write of this batch failed');
              return this.nodes.updateOne(
                { _id: t.node_id, state: t.from },
                { $set: { state: t.to, state_changed_at: t.at }, $inc: { liveness_seq: 1 } }
              );
            });
            (result.matchedCount === 1 ? won : lost).push(t);
          } catch {
            broken = true;
            failed.push(t);
          }
        })
      );
      if (lost.length > 0) {
        try {
          const views = await this.livenessOf(lost.map((t) => t.node_id));
          for (const t of lost) refused.set(t.node_id, views.get(t.node_id) ?? null);
        } catch {
          failed.push(...lost);
        }
      }
      try {
        await this.recordLivenessChanges(won);
        applied.push(...won);
      } catch {
        failed.push(...won);
      }
    }
    this.changes.pruneChanges();
    return { applied, refused, failed };
  }

  /** The liveness views of these nodes that exist (one read). */
  async livenessOf(nodeIds: string[]): Promise<Map<string, LivenessView>> {
    const docs = await this.nodes
      .find({ _id: { $in: nodeIds } }, { projection: { _id: 1, state: 1, liveness_seq: 1, state_changed_at: 1 } })
      .toArray();
    return new Map(
      docs.map((d) => [
        d._id,
        { state: d.state, seq: d.liveness_seq ?? 0, state_at: Date.parse(d.state_changed_at) || 0 }
      ])
    );
  }

  /** Which of these transitions are in the node documents (one read); the others' current views (null: removed). */
  async settleLiveness(
    batch: LivenessTransition[]
  ): Promise<{ applied: LivenessTransition[]; refused: Map<string, LivenessView | null> }> {
    const views = await this.livenessOf(batch.map((t) => t.node_id));
    const applied: LivenessTransition[] = [];
    const refused = new Map<string, LivenessView | null>();
    for (const t of batch) {
      const v = views.get(t.node_id);
      // Applied: the document holds this transition's state and time (its liveness_seq is the number it got).
      if (v && v.state === t.to && v.state_at === Date.parse(t.at) && v.seq > 0) applied.push({ ...t, seq: v.seq });
      else refused.set(t.node_id, v ?? null);
    }
    return { applied, refused };
  }

  /** The node_changes records of applied liveness transitions (one insert), for every API process's node cache. */
  async recordLivenessChanges(applied: LivenessTransition[]): Promise<void> {
    await this.changes.insertChanges(
      applied.map((t) => ({ nodeId: t.node_id, state: t.to, stateAt: t.at, livenessSeq: t.seq }))
    );
  }
}
