/** Daily quotas (truth writes per DID per UTC day): one counter document per scope and day, incremented atomically. */
import { Collection, Db } from 'mongodb';

interface QuotaDocument {
  _id: string;
  scope: string;
  day: string;
  count: number;
}

export class QuotaStore {
  private readonly counters: Collection<QuotaDocument>;
  constructor(db: Db) {
    this.counters = db.collection('quota_counters');
  }

  /** Counts one use; `allowed` is false once the count passes `limit` (the refused attempt is counted too). */
  async consume(scope: string, day: string, limit: number): Promise<{ allowed: boolean; count: number }> {
    for (let attempt = 0; ; attempt++) {
      try {
        const doc = await this.counters.findOneAndUpdate(
          { _id: `${scope}|${day}` },
          { $inc: { count: 1 }, $setOnInsert: { scope, day } },
          { upsert: true, returnDocument: 'after' }
        );
        const count = doc?.count ?? 1;
        return { allowed: count <= limit, count };
      } catch (err) {
        // Two first uses of the day race to insert the counter; the loser increments the winner's.
        if ((err as { code?: number }).code !== 11000 || attempt >= 3) throw err;
      }
    }
  }
}
