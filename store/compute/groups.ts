/**
 * SLIM groups in MongoDB: one document per group (`slim_groups`, its owner and current epoch) and one per epoch
 * (`slim_group_epochs`, _id `<group>#<epoch>`): the members with their public keys, the per-member wraps of the
 * epoch key, its ephemeral public key and commitment. No secret is stored (core/compute/group-crypto.node.ts).
 * A new epoch is inserted under its _id, so two concurrent membership changes cannot both make epoch n+1: the
 * loser gets a duplicate key (409). The group's `epoch` is advanced after the insert; a reader that finds a later
 * epoch document than the group names (a crash between the two writes) rolls the group forward.
 */
import { Collection, Db, MongoServerError } from 'mongodb';
import type { EpochKeyMaterial } from '../../core/compute/group-crypto.node';

export interface GroupMember {
  member_id: string;
  /** Raw public keys, base64url. */
  x25519: string;
  ed25519: string;
}

export interface GroupDocument {
  _id: string;
  name: string | null;
  /** The OAuth client that created the group and may change its membership. */
  owner: string;
  epoch: number;
  created_at: string;
  updated_at: string;
}

export interface EpochDocument extends EpochKeyMaterial {
  _id: string;
  group_id: string;
  epoch: number;
  members: GroupMember[];
  reason: string;
  created_by: string;
  created_at: string;
}

export const epochDocId = (groupId: string, epoch: number) => `${groupId}#${epoch}`;

export class SlimGroupStore {
  readonly groups: Collection<GroupDocument>;
  readonly epochs: Collection<EpochDocument>;

  constructor(db: Db) {
    this.groups = db.collection('slim_groups');
    this.epochs = db.collection('slim_group_epochs');
  }

  async create(group: GroupDocument, first: EpochDocument): Promise<void> {
    await this.epochs.insertOne(first);
    await this.groups.insertOne(group);
  }

  /** The group with its current epoch (rolled forward past an interrupted change), or null. */
  async find(groupId: string): Promise<{ group: GroupDocument; current: EpochDocument } | null> {
    const group = await this.groups.findOne({ _id: groupId });
    if (!group) return null;
    const stored = await this.epochs.findOne({ _id: epochDocId(groupId, group.epoch) });
    if (!stored) return null;
    let current: EpochDocument = stored;
    for (;;) {
      const next: EpochDocument | null = await this.epochs.findOne({ _id: epochDocId(groupId, current.epoch + 1) });
      if (!next) break;
      current = next;
    }
    if (current.epoch !== group.epoch) {
      await this.groups.updateOne(
        { _id: groupId, epoch: { $lt: current.epoch } },
        { $set: { epoch: current.epoch, updated_at: current.created_at } }
      );
      group.epoch = current.epoch;
    }
    return { group, current };
  }

  epoch(groupId: string, epoch: number): Promise<EpochDocument | null> {
    return this.epochs.findOne({ _id: epochDocId(groupId, epoch) });
  }

  /** Inserts the next epoch; false when another change made that epoch first. */
  async advance(next: EpochDocument): Promise<boolean> {
    try {
      await this.epochs.insertOne(next);
    } catch (err) {
      if (err instanceof MongoServerError && err.code === 11000) return false;
      throw err;
    }
    await this.groups.updateOne(
      { _id: next.group_id, epoch: { $lt: next.epoch } },
      { $set: { epoch: next.epoch, updated_at: next.created_at } }
    );
    return true;
  }
}
