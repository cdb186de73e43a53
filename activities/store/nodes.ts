/**
 * Federation nodes as stored: identity, declared brand and resources, hashed API key, last-seen time.
 * The node lifecycle (states and their changes) is owned by the node workflow; this module only stores.
 */
import { Collection, Db } from 'mongodb';

export type NodeState = 'pending_review' | 'online' | 'offline' | 'rejected';

export interface NodeDocument {
  _id: string; // node id
  name: string;
  api_key_hash: string;
  state: NodeState;
  created_at: string;
  last_seen_at: string | null;
}

export class NodeStore {
  readonly nodes: Collection<NodeDocument>;
  constructor(db: Db) {
    this.nodes = db.collection('nodes');
  }

  findNode(nodeId: string): Promise<NodeDocument | null> {
    return this.nodes.findOne({ _id: nodeId });
  }
}
