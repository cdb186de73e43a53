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
import {
  NODE_INDEX_PROJECTION,
  NodeIndex,
  type NodeAggregates,
  type NodeFilter,
  type NodeIndexDocument
} from './node-index';
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

/** A node as the node cache's preload reads it: what authentication needs and what the directory's index holds. */
export type NodePreloadDocument = NodeAuthDocument & NodeIndexDocument;

/** Nodes in the first reply of the preload's scan (about 200 bytes each: a reply well under MongoDB's 16 MB). */
const PRELOAD_BATCH = 50_000;

/** Node documents read at once for one page of the directory (each an `_id` lookup). */
const PAGE_READS_IN_FLIGHT = 50;

/**
 * The node store: the reads and listings of node documents here, the rest in the modules it is built from (the
 * change log, registrations, state writes, liveness), each method of which it offers as its own.
 */
export class NodeStore {
  readonly nodes: Collection<NodeDocument>;
  /**
   * The directory's order, filters and counts, in memory (node-index.ts): loaded and kept current by this process's
   * node cache, which follows the change log.
   */
  readonly index: NodeIndex;
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
    this.index = new NodeIndex((nodeId) =>
      this.nodes.findOne<NodeIndexDocument>({ _id: nodeId }, { projection: NODE_INDEX_PROJECTION })
    );
    // The records this process writes reach its own index at once, not at the next read of the log.
    this.changes.onWritten = (records) => this.index.apply(records, Date.now());
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

  /**
   * What authentication and the directory's index need of up to `limit` nodes, in one projected scan (a node cache's
   * preload). Up to PRELOAD_BATCH nodes come in one reply, so no cursor is left open between replies (FerretDB drops
   * a cursor whose connection closed, and the getMores of a 10,000-node read on a busy database met
   * "cursor not found").
   */
  allAuth(limit: number): Promise<NodePreloadDocument[]> {
    return this.nodes
      .find<NodePreloadDocument>({}, { projection: { ...NODE_AUTH_PROJECTION, ...NODE_INDEX_PROJECTION } })
      .limit(limit)
      .batchSize(Math.min(limit, PRELOAD_BATCH))
      .toArray();
  }

  findPublic(nodeId: string): Promise<Omit<NodeDocument, 'api_key_hash'> | null> {
    return this.nodes.findOne({ _id: nodeId }, { projection: PUBLIC_NODE_PROJECTION });
  }

  /**
   * A page of the directory, by seq, and how many nodes match: the order, filter and count from the index (as of
   * its last read of the change log, about a second), then the page's documents, each read by `_id` (in parallel:
   * FerretDB answers `_id: { $in }` by reading every node). A node removed between the two is left out of the page.
   */
  async list(
    filter: NodeFilter,
    page: { limit: number; offset: number }
  ): Promise<{ total: number; nodes: PublicNode[] }> {
    await this.index.ready();
    const { total, nodes } = this.index.page(filter, page.offset, page.limit);
    const docs = await this.readEach(nodes.map((n) => n.node_id));
    return { total, nodes: docs.filter((d) => d !== null).map(publicNode) };
  }

  /** These nodes' public documents, in this order (null where none), PAGE_READS_IN_FLIGHT `_id` lookups at a time. */
  private async readEach(nodeIds: string[]): Promise<(Omit<NodeDocument, 'api_key_hash'> | null)[]> {
    const out: (Omit<NodeDocument, 'api_key_hash'> | null)[] = new Array(nodeIds.length).fill(null);
    let next = 0;
    const reader = async () => {
      while (next < nodeIds.length) {
        const i = next++;
        out[i] = await this.findPublic(nodeIds[i]!);
      }
    };
    await Promise.all(Array.from({ length: Math.min(PAGE_READS_IN_FLIGHT, nodeIds.length) }, reader));
    return out;
  }

  /** These nodes' states from the index (as of its last read of the change log); null for a node it does not hold. */
  async statesOf(nodeIds: string[]): Promise<Map<string, NodeState | null>> {
    await this.index.ready();
    return new Map(nodeIds.map((id) => [id, this.index.get(id)?.state ?? null]));
  }

  /** Counts by state and by brand, and the memory nodes declared (for the dashboard), from the index. */
  async aggregates(): Promise<NodeAggregates> {
    await this.index.ready();
    return this.index.aggregates();
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
