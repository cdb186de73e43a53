/** Peer hubs this hub federates with: added by an administrator, probed by fetching their agent card. */
import { Collection, Db } from 'mongodb';

export interface PeerDocument {
  _id: string; // peer id (slug of its name)
  name: string;
  agent_card_url: string;
  added_at: string;
  last_contact_at: string | null;
  last_probe_at: string;
  last_status: 'reachable' | 'unreachable';
  last_error: string | null;
  /** What the peer's card said about itself, when reachable. */
  card_name: string | null;
  card_version: string | null;
}

export class PeerStore {
  private readonly peers: Collection<PeerDocument>;
  constructor(db: Db) {
    this.peers = db.collection('peers');
  }

  async save(doc: PeerDocument): Promise<void> {
    await this.peers.replaceOne({ _id: doc._id }, doc, { upsert: true });
  }

  find(id: string): Promise<PeerDocument | null> {
    return this.peers.findOne({ _id: id });
  }

  list(): Promise<PeerDocument[]> {
    return this.peers.find({}).sort({ _id: 1 }).toArray();
  }

  async remove(id: string): Promise<boolean> {
    return (await this.peers.deleteOne({ _id: id })).deletedCount === 1;
  }
}
