/**
 * Key groups of the chat gateway: under a key of a plan that allows them (S4 and above), an administrator creates
 * groups and issues keys into them. Each key of a group has its own limits and usage (the limits are per key id),
 * so one team's use never eats another's quota. A grouped key records its group and the key that owns it.
 */
import { Collection, Db } from 'mongodb';
import { newId } from '../../core/credentials.node';
import { forgetApiKey } from '../verified-api-keys';

export interface KeyGroupDocument {
  _id: string;
  owner_key_id: string;
  label: string | null;
  created_at: string;
}

interface GroupedKeyFields {
  _id: string;
  group_id?: string;
  owner_key_id?: string;
  plan: string;
  label: string | null;
  created_at: string;
  revoked_at: string | null;
}

export class KeyGroupStore {
  private readonly groups: Collection<KeyGroupDocument>;
  private readonly keys: Collection<GroupedKeyFields>;

  constructor(db: Db) {
    this.groups = db.collection('chat_key_groups');
    this.keys = db.collection('api_keys');
  }

  async create(ownerKeyId: string, label: string | null): Promise<KeyGroupDocument> {
    const doc: KeyGroupDocument = {
      _id: newId('grp_').slice(0, 24),
      owner_key_id: ownerKeyId,
      label,
      created_at: new Date().toISOString()
    };
    await this.groups.insertOne(doc);
    return doc;
  }

  find(groupId: string): Promise<KeyGroupDocument | null> {
    return this.groups.findOne({ _id: groupId });
  }

  listOf(ownerKeyId: string): Promise<KeyGroupDocument[]> {
    return this.groups.find({ owner_key_id: ownerKeyId }).sort({ created_at: 1 }).limit(1000).toArray();
  }

  /** Marks a freshly issued key as a member of `group`. */
  async attach(keyId: string, group: KeyGroupDocument): Promise<void> {
    await this.keys.updateOne({ _id: keyId }, { $set: { group_id: group._id, owner_key_id: group.owner_key_id } });
  }

  members(groupId: string): Promise<GroupedKeyFields[]> {
    return this.keys
      .find(
        { group_id: groupId },
        { projection: { _id: 1, group_id: 1, owner_key_id: 1, plan: 1, label: 1, created_at: 1, revoked_at: 1 } }
      )
      .limit(1000)
      .toArray();
  }

  async setPlan(keyId: string, plan: string): Promise<boolean> {
    const matched = (await this.keys.updateOne({ _id: keyId }, { $set: { plan } })).matchedCount === 1;
    forgetApiKey(keyId); // the plan counts at once on this process (store/verified-api-keys.ts)
    return matched;
  }
}
