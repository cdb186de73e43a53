/**
 * Work orders (inbox_push / inbox_ack of deployment arbitration): the `instructions` records GET
 * /api/instructions/<node_id> serves (api/routes/ledger/status-data.ts, through forNode), one per approved
 * order, `_id` = the instruction id. Written only once the order's truth approval is approved (by the
 * work-order/<id> workflow's activity, idempotently), acknowledged once by the node it is for.
 */
import { Collection, Db } from 'mongodb';
import { isDuplicateKey } from '../mongo';

export interface WorkOrderDocument {
  _id: string;
  node_id: string;
  key: string;
  value_json: string;
  created_at: string;
  acked_at: string | null;
  approval_id: string;
  pushed_by: string;
  acked_by: string | null;
}

export class WorkOrderStore {
  private readonly orders: Collection<WorkOrderDocument>;
  constructor(db: Db) {
    this.orders = db.collection<WorkOrderDocument>('instructions');
  }

  /** Inserts the approved order once (a retried activity finds it there). */
  async insert(order: Omit<WorkOrderDocument, 'created_at' | 'acked_at' | 'acked_by'>): Promise<WorkOrderDocument> {
    // insertOne, not an upsert with $setOnInsert: FerretDB v1 does not keep null members set that way.
    try {
      await this.orders.insertOne({ ...order, created_at: new Date().toISOString(), acked_at: null, acked_by: null });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    return (await this.orders.findOne({ _id: order._id }))!;
  }

  /** A node's orders, oldest first (at most `limit`); acknowledged ones only when asked for. */
  forNode(nodeId: string, includeAcked: boolean, limit: number): Promise<WorkOrderDocument[]> {
    const filter = includeAcked ? { node_id: nodeId } : { node_id: nodeId, acked_at: null };
    return this.orders.find(filter).sort({ created_at: 1 }).limit(limit).toArray();
  }

  async get(id: string): Promise<WorkOrderDocument | null> {
    return this.orders.findOne({ _id: id });
  }

  /** Acknowledges an order; the stored record after it, and whether this call acknowledged it. */
  async ack(id: string, by: string): Promise<{ order: WorkOrderDocument | null; acked: boolean }> {
    const res = await this.orders.updateOne(
      { _id: id, acked_at: null },
      { $set: { acked_at: new Date().toISOString(), acked_by: by } }
    );
    return { order: await this.orders.findOne({ _id: id }), acked: res.modifiedCount === 1 };
  }
}
