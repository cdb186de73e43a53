/**
 * Federation nodes as stored: identity, declared brand and resources, hashed API key, state and review decision.
 * The node lifecycle (states and their changes) is owned by the node/<node_id> workflow; this module only stores.
 * Node ids come from a hub-wide counter, made unique by index.
 *
 * After registration a node document has a single writer, the node workflow's state-change activity (which runs
 * one change at a time per node): FerretDB applies concurrent updates of one document as read-modify-write, so a
 * second writer could silently undo a state change. Heartbeat figures live elsewhere (presence.ts,
 * heartbeat-history.ts).
 */
import { Collection, Db } from 'mongodb';
import type { BrandCode, NodeState } from '../../core/federation/vocabulary';

export type { NodeState };

export interface NodeDocument {
  _id: string; // node id
  seq: number;
  name: string;
  brand: { code: BrandCode; model_base: string | null };
  instance: { os: string | null; cpu: string | null; memory_gb: number | null; gpu: string | null };
  capabilities: string[];
  api_key_hash: string;
  state: NodeState;
  created_at: string;
  state_changed_at: string;
  review: { decision: 'approved' | 'rejected'; reviewer: string; reason: string; at: string } | null;
}

/** The public view of a node: never the key hash. */
export type PublicNode = Omit<NodeDocument, '_id' | 'api_key_hash'> & { node_id: string };
export const PUBLIC_NODE_PROJECTION = { api_key_hash: 0 } as const;

/** A document read with PUBLIC_NODE_PROJECTION, with its id named node_id. */
export function publicNode({ _id, ...rest }: Omit<NodeDocument, 'api_key_hash'>): PublicNode {
  return { node_id: _id, ...rest };
}

interface CounterDocument {
  _id: string;
  value: number;
}

export class NodeStore {
  readonly nodes: Collection<NodeDocument>;
  private readonly counters: Collection<CounterDocument>;
  constructor(db: Db) {
    this.nodes = db.collection('nodes');
    this.counters = db.collection('counters');
  }

  /** The next value of the hub-wide node counter (a hint; see insertWithNextSequence). */
  async nextSequence(): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      try {
        const doc = await this.counters.findOneAndUpdate({ _id: 'node_seq' }, { $inc: { value: 1 } }, { upsert: true, returnDocument: 'after' });
        return doc!.value;
      } catch (err) {
        // Two first registrations race to create the counter; the loser increments the winner's.
        if ((err as { code?: number }).code !== 11000 || attempt >= 3) throw err;
      }
    }
  }

  /**
   * Inserts a node under the next sequence number. The counter is only a hint: FerretDB does not make
   * findAndModify's $inc atomic across concurrent callers, so two registrations can read the same value. The
   * unique index on seq (and the _id) decides: the loser takes the next number and tries again.
   */
  async insertWithNextSequence(build: (sequence: number) => NodeDocument): Promise<NodeDocument> {
    for (let attempt = 0; ; attempt++) {
      const doc = build(await this.nextSequence());
      try {
        await this.nodes.insertOne(doc);
        return doc;
      } catch (err) {
        if ((err as { code?: number }).code !== 11000 || attempt >= 50) throw err;
      }
    }
  }

  async delete(nodeId: string): Promise<void> {
    await this.nodes.deleteOne({ _id: nodeId });
  }

  findNode(nodeId: string): Promise<NodeDocument | null> {
    return this.nodes.findOne({ _id: nodeId });
  }

  findPublic(nodeId: string): Promise<Omit<NodeDocument, 'api_key_hash'> | null> {
    return this.nodes.findOne({ _id: nodeId }, { projection: PUBLIC_NODE_PROJECTION });
  }

  async list(filter: { state?: NodeState; brand?: BrandCode }, page: { limit: number; offset: number }): Promise<{ total: number; nodes: PublicNode[] }> {
    const query: Record<string, unknown> = {};
    if (filter.state) query.state = filter.state;
    if (filter.brand) query['brand.code'] = filter.brand;
    const [total, docs] = await Promise.all([
      this.nodes.countDocuments(query),
      this.nodes.find(query, { projection: PUBLIC_NODE_PROJECTION }).sort({ seq: 1 }).skip(page.offset).limit(page.limit).toArray()
    ]);
    return { total, nodes: docs.map(publicNode) };
  }

  /** Counts by state and by brand, and the memory nodes declared (for the dashboard). */
  async aggregates(): Promise<{ byState: Record<string, number>; byBrand: Record<string, number>; memoryGb: number; total: number }> {
    const docs = await this.nodes.find({}, { projection: { state: 1, 'brand.code': 1, 'instance.memory_gb': 1 } }).toArray();
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

  async setState(nodeId: string, state: NodeState, at: string, review: NodeDocument['review'] | undefined): Promise<void> {
    const set: Partial<NodeDocument> = { state, state_changed_at: at };
    if (review) set.review = review;
    await this.nodes.updateOne({ _id: nodeId }, { $set: set });
  }
}
