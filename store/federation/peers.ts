/**
 * Peer hubs this hub federates with: added by an administrator, probed by fetching their agent card; optionally with
 * the transparency keys the administrator pinned for them (services/tlog/peer-witnesses.ts reads them: the peer's log
 * witnessed by this hub, the peer as a witness of this hub's log). The collection is small (peers are few): read
 * whole, or by `_id`.
 */
import { Collection, Db } from 'mongodb';

/** The peer's transparency keys as an administrator pinned them (never taken from the peer's own answer). */
export interface PeerTlogKeys {
  /** The peer's log prefix, `<its PUBLIC_URL>/tlog`: its witness's submission prefix, where its keys are read. */
  url: string;
  /** Its checkpoint verifier key (0x01): this hub witnesses its log (POST /tlog/add-checkpoint). */
  verifier_key: string | null;
  /** Its cosignature verifier key (0x04): it witnesses this hub's log, at `<url>/add-checkpoint`. */
  witness_key: string | null;
  pinned_at: string;
}

/** What the peer's GET <url>/verifier-key and /witness-key answered at the last probe: shown, never trusted. */
export interface PeerTlogOffer {
  fetched_at: string;
  verifier_key: string | null;
  witness_key: string | null;
  /** Why a key could not be read (unreachable, an answer that is no key of its kind); null when both were. */
  error: string | null;
}

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
  /** Absent on peers added before transparency keys could be pinned: none. */
  tlog?: PeerTlogKeys | null;
  tlog_offered?: PeerTlogOffer | null;
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
