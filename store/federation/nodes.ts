/**
 * Federation nodes as stored: identity, declared brand and resources, hashed API key, state and review decision.
 * The node lifecycle (states and their changes) is owned by the node/<node_id> workflow; this module only stores.
 * Node ids come from a hub-wide counter, made unique by index; one process claims numbers in rounds (see
 * insertWithNextSequence).
 *
 * After registration a node document has a single writer, the node workflow's state-change activity (which runs
 * one change at a time per node): FerretDB applies concurrent updates of one document as read-modify-write, so a
 * second writer could silently undo a state change. Heartbeat figures live elsewhere (presence.ts,
 * heartbeat-history.ts).
 */
import { Collection, Db } from 'mongodb';
import type { BrandCode, NodeState } from '../../core/federation/vocabulary';
import { NodeChangeLog, type NodeChangeDocument } from './node-change-log';
import type { NodeDocument } from './node-document';
import { NodeLiveness, type LivenessTransition, type LivenessView } from './node-liveness';
import { NodeRegistrations } from './node-registrations';
import { NodeDocumentWriter } from './node-writes';

export type { NodeState };

/** The public view of a node: never the key hash. */
export type PublicNode = Omit<NodeDocument, '_id' | 'api_key_hash'> & { node_id: string };
export const PUBLIC_NODE_PROJECTION = { api_key_hash: 0 } as const;

/** A document read with PUBLIC_NODE_PROJECTION, with its id named node_id. */
export function publicNode({ _id, ...rest }: Omit<NodeDocument, 'api_key_hash'>): PublicNode {
  return { node_id: _id, ...rest };
}

/** A node as the node cache loads it: its id, auth fields, state and when that state began. */
export interface NodeAuthDocument {
  _id: string;
  api_key_hash: string;
  state: NodeState;
  brand: { code: string };
  state_changed_at: string;
}

const NODE_AUTH_PROJECTION = { api_key_hash: 1, state: 1, 'brand.code': 1, state_changed_at: 1 } as const;

/**
 * The node store: the reads and listings of node documents here, the rest in the modules it is built from (the
 * change log, registrations, state writes, liveness), each method of which it offers as its own.
 */
export class NodeStore {
  readonly nodes: Collection<NodeDocument>;
  private readonly changes: NodeChangeLog;
  private readonly registrations: NodeRegistrations;
  private readonly writer: NodeDocumentWriter;
  private readonly liveness: NodeLiveness;

  constructor(db: Db) {
    this.nodes = db.collection('nodes');
    this.changes = new NodeChangeLog(db);
    this.registrations = new NodeRegistrations(db, this.nodes, this.changes);
    this.writer = new NodeDocumentWriter(this.nodes, this.changes);
    this.liveness = new NodeLiveness(this.nodes, this.writer, this.changes);
  }

  /** Change records written since `since` (see NodeChangeLog.changesSince). */
  changesSince(since: Date): Promise<NodeChangeDocument[]> {
    return this.changes.changesSince(since);
  }

  /** A hint of the next free node number (see NodeRegistrations.nextSequence). */
  nextSequence(count = 1): Promise<number> {
    return this.registrations.nextSequence(count);
  }

  /** Inserts a node under the next free sequence number (see NodeRegistrations.insertWithNextSequence). */
  insertWithNextSequence(build: (sequence: number) => NodeDocument): Promise<NodeDocument> {
    return this.registrations.insertWithNextSequence(build);
  }

  async delete(nodeId: string): Promise<void> {
    await this.nodes.deleteOne({ _id: nodeId });
    await this.changes.recordChange(nodeId, null, new Date().toISOString());
  }

  /** Removes registrations that will not be answered, in the background (see NodeRegistrations.abandon). */
  abandon(docs: NodeDocument[], onError: (err: unknown) => void = () => undefined): Promise<void> {
    return this.registrations.abandon(docs, onError);
  }

  /** What authentication needs of these nodes (those that exist), in one read (the node cache's shared reads). */
  findAuth(nodeIds: string[]): Promise<NodeAuthDocument[]> {
    return this.nodes.find<NodeAuthDocument>({ _id: { $in: nodeIds } }, { projection: NODE_AUTH_PROJECTION }).toArray();
  }

  /** What authentication needs of up to `limit` nodes, in one projected scan (a node cache's preload). */
  allAuth(limit: number): Promise<NodeAuthDocument[]> {
    return this.nodes.find<NodeAuthDocument>({}, { projection: NODE_AUTH_PROJECTION }).limit(limit).toArray();
  }

  findPublic(nodeId: string): Promise<Omit<NodeDocument, 'api_key_hash'> | null> {
    return this.nodes.findOne({ _id: nodeId }, { projection: PUBLIC_NODE_PROJECTION });
  }

  async list(
    filter: { state?: NodeState; brand?: BrandCode },
    page: { limit: number; offset: number }
  ): Promise<{ total: number; nodes: PublicNode[] }> {
    const query: Record<string, unknown> = {};
    if (filter.state) query.state = filter.state;
    if (filter.brand) query['brand.code'] = filter.brand;
    const [total, docs] = await Promise.all([
      this.nodes.countDocuments(query),
      this.nodes
        .find(query, { projection: PUBLIC_NODE_PROJECTION })
        .sort({ seq: 1 })
        .skip(page.offset)
        .limit(page.limit)
        .toArray()
    ]);
    return { total, nodes: docs.map(publicNode) };
  }

  /** Counts by state and by brand, and the memory nodes declared (for the dashboard). */
  async aggregates(): Promise<{
    byState: Record<string, number>;
    byBrand: Record<string, number>;
    memoryGb: number;
    total: number;
  }> {
    const docs = await this.nodes
      .find({}, { projection: { state: 1, 'brand.code': 1, 'instance.memory_gb': 1 } })
      .toArray();
    const byState: Record<string, number> = {};
    const byBrand: Record<string, number> = {};
    let memoryGb = 0;
    for (const d of docs) {
      byState[d.state] = (byState[d.state] ?? 0) + 1;
      byBrand[d.brand.code] = (byBrand[d.brand.code] ?? 0) + 1;
      if (d.state !== 'rejected') memoryGb += d.instance?.memory_gb ?? 0;
    }
    return { byState, byBrand, memoryGb, total: docs.length };
  }

  /** Sets a node's state, group-committed (see NodeDocumentWriter.setState). */
  setState(
    nodeId: string,
    state: NodeState,
    at: string,
    review: NodeDocument['review'] | undefined,
    options: { registration?: boolean } = {}
  ): Promise<void> {
    return this.writer.setState(nodeId, state, at, review, options);
  }

  /** Every node's liveness view for which `keep` holds (see NodeLiveness.loadLiveness). */
  loadLiveness(keep: (nodeId: string) => boolean): Promise<Map<string, LivenessView>> {
    return this.liveness.loadLiveness(keep);
  }

  /** Applies liveness transitions, conditionally (see NodeLiveness.applyLiveness). */
  applyLiveness(transitions: LivenessTransition[]): ReturnType<NodeLiveness['applyLiveness']> {
    return this.liveness.applyLiveness(transitions);
  }

  /** The liveness views of these nodes that exist (see NodeLiveness.livenessOf). */
  livenessOf(nodeIds: string[]): Promise<Map<string, LivenessView>> {
    return this.liveness.livenessOf(nodeIds);
  }

  /** Which of these transitions are in the node documents (see NodeLiveness.settleLiveness). */
  settleLiveness(batch: LivenessTransition[]): ReturnType<NodeLiveness['settleLiveness']> {
    return this.liveness.settleLiveness(batch);
  }

  /** The node_changes records of applied liveness transitions (see NodeLiveness.recordLivenessChanges). */
  recordLivenessChanges(applied: LivenessTransition[]): Promise<void> {
    return this.liveness.recordLivenessChanges(applied);
  }
}
