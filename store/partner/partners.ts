/**
 * Partner federation (capability `partner`): the partners an administrator registered, each with its Ed25519
 * public key, and the replay store of their signed requests. Both in MongoDB, so every API process sees the same:
 * a signature accepted by one process is refused as a replay by every other. A replay record's `_id` is the digest
 * of the signature (unique, so the first insert wins a race); FerretDB has no TTL indexes, so expired records are
 * pruned here at most once a minute per process and every check compares `expires_at`.
 */
import { Collection, Db } from 'mongodb';
import { isDuplicateKey } from '../mongo';

export interface PartnerDocument {
  _id: string; // partner id (the signature's keyid)
  name: string;
  /** Ed25519 public key: the 32 raw bytes, base64url. */
  public_key: string;
  created_at: string;
  revoked_at: string | null;
}

interface ReplayDocument {
  _id: string;
  partner_id: string;
  expires_at: Date;
}

export class PartnerStore {
  readonly partners: Collection<PartnerDocument>;
  private readonly replays: Collection<ReplayDocument>;
  private prunedAt = 0;

  constructor(db: Db) {
    this.partners = db.collection<PartnerDocument>('partners');
    this.replays = db.collection<ReplayDocument>('partner_replays');
  }

  /** Registers a partner, or answers the existing one (`created` false); a revoked id is not reused. */
  async register(id: string, name: string, publicKey: string): Promise<{ partner: PartnerDocument; created: boolean }> {
    const doc: PartnerDocument = {
      _id: id,
      name,
      public_key: publicKey,
      created_at: new Date().toISOString(),
      revoked_at: null
    };
    try {
      await this.partners.insertOne(doc);
      return { partner: doc, created: true };
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      return { partner: (await this.partners.findOne({ _id: id }))!, created: false };
    }
  }

  find(id: string): Promise<PartnerDocument | null> {
    return this.partners.findOne({ _id: id });
  }

  async active(id: string): Promise<PartnerDocument | null> {
    const doc = await this.find(id);
    return doc && !doc.revoked_at ? doc : null;
  }

  list(): Promise<PartnerDocument[]> {
    return this.partners.find({}).sort({ _id: 1 }).limit(10_000).toArray();
  }

  async revoke(id: string): Promise<boolean> {
    const res = await this.partners.updateOne(
      { _id: id, revoked_at: null },
      { $set: { revoked_at: new Date().toISOString() } }
    );
    return res.modifiedCount === 1;
  }

  private ttlIndex: Promise<void> | null = null;

  /**
   * A TTL index on expires_at, so real MongoDB removes expired records by itself; FerretDB may refuse or ignore it,
   * which is harmless (prune() below bounds the collection, and every check compares expires_at anyway).
   */
  private ensureTtlIndex(): void {
    this.ttlIndex ??= this.replays
      .createIndex({ expires_at: 1 }, { name: 'expires_at_ttl', expireAfterSeconds: 0 })
      .then(() => undefined)
      .catch(() => undefined);
  }

  /** Records a signature; false when it was already recorded and has not expired (a replay). */
  async rememberSignature(digest: string, partnerId: string, expiresAt: Date): Promise<boolean> {
    this.ensureTtlIndex();
    this.prune();
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.replays.insertOne({ _id: digest, partner_id: partnerId, expires_at: expiresAt });
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        const removed = await this.replays.deleteOne({ _id: digest, expires_at: { $lte: new Date() } });
        if (removed.deletedCount === 0) return false;
      }
    }
    return false;
  }

  private prune(): void {
    const now = Date.now();
    if (now - this.prunedAt < 60_000) return;
    this.prunedAt = now;
    void this.replays.deleteMany({ expires_at: { $lte: new Date(now) } }).catch(() => {
      this.prunedAt = 0;
    });
  }
}
