/**
 * A lease by epochs, for work that one API process at a time should do (the key tree's indexer, the task reads'
 * build): records `<prefix><epoch>` in a collection, every read and write by `_id` (FerretDB serves nothing else
 * from an index). An epoch is taken by a unique insert (of two processes taking the same one, one insert wins),
 * renewed by its holder, and taken over (the next epoch, again by a unique insert) when it was not renewed for
 * `leaseMs`. A holder that checks before its writes that no later epoch exists (renew()) stops once another took
 * over, so two write at once only if one stalled between that check and its writes for longer than `leaseMs`: the
 * work done under it must bear that (each user says why it does).
 *
 * The holder is this process (a random id: a restarted process is a new holder). Epochs are never deleted: one
 * record per takeover, a few per restart of the fleet.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './mongo';

interface LeaseRecord {
  _id: string;
  holder?: string;
  renewed_at?: string;
}

export class EpochLease {
  /** This process, as the records name it. */
  readonly holder = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly records: Collection<LeaseRecord>;
  private lease: { id: string; epoch: number; renewedAt: number } | null = null;
  /** The newest epoch this process has seen (the walk for a newer one starts there). */
  private seenEpoch = 0;

  constructor(
    db: Db,
    collection: string,
    private readonly prefix: string,
    private readonly leaseMs: number
  ) {
    this.records = db.collection<LeaseRecord>(collection);
  }

  /** Whether this process took a lease that it has not yet found taken over. */
  get held(): boolean {
    return this.lease !== null;
  }

  /** Takes the lease, or renews the one held; false while another live holder has it. */
  async hold(): Promise<boolean> {
    if (this.lease && (await this.renew())) return true;
    this.lease = null;
    let epoch = this.seenEpoch;
    let newest = epoch > 0 ? await this.records.findOne({ _id: this.id(epoch) }) : null;
    for (;;) {
      const next = await this.records.findOne({ _id: this.id(epoch + 1) });
      if (!next) break;
      newest = next;
      epoch++;
    }
    this.seenEpoch = epoch;
    if (newest && Date.parse(newest.renewed_at ?? '') > Date.now() - this.leaseMs) return false;
    try {
      await this.records.insertOne({
        _id: this.id(epoch + 1),
        holder: this.holder,
        renewed_at: new Date().toISOString()
      });
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
    this.lease = { id: this.id(epoch + 1), epoch: epoch + 1, renewedAt: Date.now() };
    this.seenEpoch = epoch + 1;
    return true;
  }

  /**
   * Whether this process still holds its lease (no later epoch exists), renewing it when `everyMs` (a quarter of
   * the lease period by default) has passed since its last renewal. Called before each batch of writes.
   */
  async renew(everyMs = this.leaseMs / 4): Promise<boolean> {
    if (!this.lease) return false;
    const lease = this.lease;
    if (await this.records.findOne({ _id: this.id(lease.epoch + 1) })) {
      this.lease = null;
      return false;
    }
    if (Date.now() - lease.renewedAt >= everyMs) {
      const now = Date.now();
      await this.records.updateOne({ _id: lease.id }, { $set: { renewed_at: new Date(now).toISOString() } });
      lease.renewedAt = now;
    }
    return true;
  }

  private id(epoch: number): string {
    return `${this.prefix}${epoch}`;
  }
}
