/**
 * The DID registry behind X-DID auth, as deployment arbitration manages it (did_register / did_revoke): the same
 * `dids` records POST /admin/dids writes (store/credentials.ts, _id = the DID, revoked_at), with the registry's
 * fields beside them: node_id, public_key, autonomy_level and capability channels. A record written by
 * POST /admin/dids has none of these (no channels, level 0) until did_register completes it. The X-DID check reads
 * the record on every request, so a revocation is refused at once by every API process (no cache), except on the
 * truth write, which learns it from the revocation feed within TRUTH_DID_CACHE_MS (store/active-dids.ts).
 *
 * node_id is the DID's link to a node (X-DID alone then authenticates as that node, api/plugins/auth/external-node.ts):
 * one field of the DID's own record, so a DID links to at most one node, the link is read with the DID by `_id`, and
 * a change to it counts at once on every API process. did_register by an arbitrator sets it (moving an existing link:
 * relinking); a registration that names a DID, and did_register with the node's key, set it only on a DID linked to
 * no node (linkFreeDid).
 */
import { Collection, Db } from 'mongodb';
import { AppError } from '../../core/errors';
import { recordDidRevocation, type ActiveDids } from '../active-dids';
import { isDuplicateKey } from '../mongo';

export interface RegistryEntry {
  _id: string;
  label: string | null;
  created_at: string;
  /** Null or absent: active (on FerretDB, a record POST /admin/dids wrote has no null fields: its upsert drops them). */
  revoked_at?: string | null;
  node_id?: string | null;
  public_key?: string | null;
  autonomy_level?: number;
  channels?: string[];
  registry_updated_at?: string;
  registered_by?: string;
}

export class DidRegistryStore {
  private readonly dids: Collection<RegistryEntry>;
  constructor(
    private readonly db: Db,
    /** The truth write's memory of active DIDs in this process (store/active-dids.ts). */
    private readonly activeDids: ActiveDids
  ) {
    this.dids = db.collection<RegistryEntry>('dids');
  }

  async get(did: string): Promise<RegistryEntry | null> {
    return this.dids.findOne({ _id: did });
  }

  /**
   * Registers a DID, or updates an active one's registry fields (its node link included: `previous_node_id` is the
   * node it was linked to before, null for none); 409 when the DID was revoked.
   */
  async register(entry: {
    did: string;
    node_id: string;
    public_key: string | null;
    autonomy_level: number;
    channels: string[];
    by: string;
  }): Promise<{ entry: RegistryEntry; created: boolean; previous_node_id: string | null }> {
    const at = new Date().toISOString();
    try {
      // The record as it was (null: inserted now), in the same atomic step as the change.
      const before = await this.dids.findOneAndUpdate(
        { _id: entry.did, revoked_at: null },
        {
          $setOnInsert: { label: entry.node_id, created_at: at },
          $set: {
            node_id: entry.node_id,
            public_key: entry.public_key,
            autonomy_level: entry.autonomy_level,
            channels: entry.channels,
            registry_updated_at: at,
            registered_by: entry.by
          }
        },
        { upsert: true, returnDocument: 'before' }
      );
      const stored = (await this.dids.findOne({ _id: entry.did }))!;
      return { entry: stored, created: before === null, previous_node_id: before?.node_id ?? null };
    } catch (err) {
      // The filter missed an existing (revoked) record, so the upsert's insert collided with its _id.
      if (isDuplicateKey(err)) throw new AppError('conflict', `DID ${entry.did} was revoked; register a new one`);
      throw err;
    }
  }

  /**
   * Links an active DID that is linked to no node to a node; false when the DID is unknown, revoked or already linked
   * (the caller reads it again to say which). `node_id: null` also matches a record without the field (a DID made by
   * POST /admin/dids). `by`: who linked it (registered_by).
   */
  async linkFreeDid(did: string, nodeId: string, by: string): Promise<boolean> {
    const res = await this.dids.updateOne(
      { _id: did, revoked_at: null, node_id: null },
      { $set: { node_id: nodeId, registry_updated_at: new Date().toISOString(), registered_by: by } }
    );
    return res.modifiedCount === 1;
  }

  /** Undoes linkFreeDid for a registration that did not complete: only while the DID is still linked to that node. */
  async unlinkNode(did: string, nodeId: string): Promise<void> {
    await this.dids.updateOne({ _id: did, node_id: nodeId }, { $set: { node_id: null } });
  }

  /** Revokes an active DID; false when there is none. */
  async revoke(did: string, by: string): Promise<boolean> {
    await recordDidRevocation(this.db, did); // before the update: other processes find it (store/active-dids.ts)
    const res = await this.dids.updateOne(
      { _id: did, revoked_at: null },
      { $set: { revoked_at: new Date().toISOString(), registered_by: by } }
    );
    this.activeDids.forget(did);
    return res.modifiedCount === 1;
  }
}
