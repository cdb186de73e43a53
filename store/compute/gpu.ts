/**
 * The GPU registry (capability `compute`): GPU records a federation node declares about itself (model, memory,
 * count, price, endpoint). One document per (node, name), `_id` = `<node_id>/<name>`, so a node re-registering a
 * GPU updates it in place whichever API process answers. Availability is not stored: it follows the owner node's
 * state (store/federation), read when the registry is listed.
 */
import { Collection, Db } from 'mongodb';
import { isDuplicateKey } from '../mongo';

export interface GpuPrice {
  amount: number;
  currency: string;
  unit: 'gpu_hour';
}

export interface GpuDocument {
  _id: string; // <node_id>/<name>
  node_id: string;
  name: string;
  model: string;
  memory_gb: number;
  count: number;
  price: GpuPrice;
  endpoint: string;
  registered_at: string;
  updated_at: string;
}

export type GpuRecordInput = Pick<
  GpuDocument,
  'node_id' | 'name' | 'model' | 'memory_gb' | 'count' | 'price' | 'endpoint'
>;

/** How many GPU records one node may hold (a node re-registering one updates it; this bounds new names). */
export const MAX_GPUS_PER_NODE = 64;

export class GpuStore {
  private readonly gpus: Collection<GpuDocument>;
  constructor(db: Db) {
    this.gpus = db.collection<GpuDocument>('gpu_registry');
  }

  /** Creates or replaces the node's record of that name; `created` says which. Null when the node is at its limit. */
  async upsert(
    input: GpuRecordInput,
    now = new Date().toISOString()
  ): Promise<{ gpu: GpuDocument; created: boolean } | null> {
    const _id = `${input.node_id}/${input.name}`;
    const existing = await this.gpus.findOne({ _id });
    if (!existing && (await this.gpus.countDocuments({ node_id: input.node_id })) >= MAX_GPUS_PER_NODE) return null;
    const gpu: GpuDocument = { _id, ...input, registered_at: existing?.registered_at ?? now, updated_at: now };
    try {
      await this.gpus.replaceOne({ _id }, gpu, { upsert: true });
    } catch (err) {
      // Two first registrations of the same name raced to insert: the loser's write replaces the winner's.
      if (!isDuplicateKey(err)) throw err;
      await this.gpus.replaceOne({ _id }, gpu);
      return { gpu, created: false };
    }
    return { gpu, created: !existing };
  }

  /** Every record, optionally of one model, oldest node first. */
  list(filter: { model?: string; nodeId?: string } = {}): Promise<GpuDocument[]> {
    const query: Record<string, unknown> = {};
    if (filter.model) query.model = filter.model;
    if (filter.nodeId) query.node_id = filter.nodeId;
    return this.gpus.find(query).sort({ _id: 1 }).toArray();
  }
}
