/**
 * Usage accounting of the chat gateway: one inserted record per answered request (`chat_usage`: key, day, model,
 * tokens, cost, error), never updated, so the per-key, per-day sums are exact under any number of API processes
 * (FerretDB makes `$inc` a read-modify-write, so counters could lose updates).
 *
 * For the daily token limit, which is checked before each request, summing records would scan; each process
 * instead keeps its own running total per key and day in memory and publishes it as one document of its own
 * (`chat_usage_tallies`, `_id` = `<key>|<day>|<process>`, only ever written by that process), at most every
 * 500 ms. A key's tokens today = this process's exact total + the other processes' published totals (read again
 * in the background when the last reading is over a second old). The limit can therefore be passed by what is in
 * flight plus about two seconds of other processes' use: documented as the token limit's overshoot.
 */
import { randomBytes } from 'node:crypto';
import { Collection, Db } from 'mongodb';
import { InsertBatcher } from '../insert-batch';

/**
 * How long a usage record may wait for others to share its insert: the records are written after the answer, so
 * this is how much later than its answer a request shows in the usage figures (and what a crash could lose).
 */
const USAGE_LINGER_MS = 25;

export interface ChatUsageRecord {
  _id: string;
  key_id: string;
  day: string;
  at: Date;
  model: string;
  provider: string | null;
  endpoint: string;
  stream: boolean;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost: number;
  estimated: boolean;
  /** null for an answered request; else the error code the client got. */
  error: string | null;
  /** 1 when `error` is set, else 0; and 1 when `estimated`: summed by the aggregation (no $cond on FerretDB). */
  error_count: 0 | 1;
  estimated_count: 0 | 1;
}

interface TallyDocument {
  _id: string;
  key_id: string;
  day: string;
  process: string;
  tokens: number;
  updated_at: Date;
}

export interface DailyUsage {
  day: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost: number;
  estimated_requests: number;
}

export class ChatUsageStore {
  private readonly records: Collection<ChatUsageRecord>;
  /** Records of concurrent requests share an insert command (store/chat/insert-batch.ts). */
  private readonly inserts: InsertBatcher<ChatUsageRecord>;
  private readonly tallies: Collection<TallyDocument>;
  private readonly process = randomBytes(6).toString('hex');
  /** `<key>|<day>` → this process's tokens. */
  private readonly own = new Map<string, number>();
  private readonly dirty = new Set<string>();
  /** `<key>|<day>` → other processes' tokens and when they were read. */
  private readonly others = new Map<string, { tokens: number; at: number; pending?: Promise<void> }>();
  private flushTimer: NodeJS.Timeout | null = null;

  constructor(
    db: Db,
    private readonly onError: (err: unknown) => void = () => undefined
  ) {
    this.records = db.collection('chat_usage');
    this.inserts = new InsertBatcher(this.records, 2, 256, USAGE_LINGER_MS);
    this.tallies = db.collection('chat_usage_tallies');
  }

  /** Records one request's usage (the record is the account; the tally follows within 500 ms). */
  async record(rec: ChatUsageRecord): Promise<void> {
    const tallyKey = `${rec.key_id}|${rec.day}`;
    this.own.set(tallyKey, (this.own.get(tallyKey) ?? 0) + rec.total_tokens);
    this.dirty.add(tallyKey);
    this.scheduleFlush();
    await this.inserts.insert(rec);
  }

  /**
   * Tokens `keyId` used on `day`, across processes (see the module comment for its bound). The first call for a
   * key and day waits for the other processes' tallies; later calls answer from the last reading and, when it is
   * over a second old, read again in the background (a request never waits for that round trip).
   */
  async tokensOn(keyId: string, day: string): Promise<number> {
    const k = `${keyId}|${day}`;
    let o = this.others.get(k);
    if (!o) {
      o = { tokens: 0, at: 0 };
      this.others.set(k, o);
      if (this.others.size > 10_000) this.others.clear();
    }
    if (!o.pending && Date.now() - o.at > 1000) {
      o.pending = this.readOthers(keyId, day, o);
      // A failed background reading keeps the last one (and is tried again at the next call); the first is awaited.
      o.pending.catch((err: unknown) => (o.at === 0 ? undefined : this.onError(err)));
    }
    if (o.at === 0) await o.pending;
    return (this.own.get(k) ?? 0) + o.tokens;
  }

  private readOthers(
    keyId: string,
    day: string,
    into: { tokens: number; at: number; pending?: Promise<void> }
  ): Promise<void> {
    return this.tallies
      .find({ key_id: keyId, day }, { projection: { process: 1, tokens: 1 } })
      .toArray()
      .then((docs) => {
        into.tokens = docs.filter((d) => d.process !== this.process).reduce((s, d) => s + d.tokens, 0);
        into.at = Date.now();
      })
      .finally(() => {
        into.pending = undefined;
      });
  }

  /**
   * Per-day sums for one key over [from, to] (ISO days), newest first. Summed here rather than by `$group`:
   * FerretDB v1.24 answers `$sum` of a field path with 0.
   */
  async daily(keyId: string, from: string, to: string): Promise<DailyUsage[]> {
    const byDay = new Map<string, DailyUsage>();
    const cursor = this.records.find(
      { key_id: keyId, day: { $gte: from, $lte: to } },
      {
        projection: {
          day: 1,
          prompt_tokens: 1,
          completion_tokens: 1,
          total_tokens: 1,
          cost: 1,
          error_count: 1,
          estimated_count: 1
        }
      }
    );
    for await (const r of cursor) {
      let d = byDay.get(r.day);
      if (!d) {
        d = {
          day: r.day,
          requests: 0,
          errors: 0,
          prompt_tokens: 0,
          completion_tokens: 0,
          total_tokens: 0,
          cost: 0,
          estimated_requests: 0
        };
        byDay.set(r.day, d);
      }
      d.requests++;
      d.errors += r.error_count;
      d.prompt_tokens += r.prompt_tokens;
      d.completion_tokens += r.completion_tokens;
      d.total_tokens += r.total_tokens;
      d.cost += r.cost;
      d.estimated_requests += r.estimated_count;
    }
    return [...byDay.values()]
      .map((d) => ({ ...d, cost: Math.round(d.cost * 1e9) / 1e9 }))
      .sort((a, b) => b.day.localeCompare(a.day));
  }

  private scheduleFlush(): void {
    if (this.flushTimer) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      this.flush().catch(this.onError);
    }, 500);
    this.flushTimer.unref();
  }

  /** At shutdown: the usage records still waiting for their insert, then this process's tallies. */
  async close(): Promise<void> {
    await this.inserts.flush();
    await this.flush();
  }

  async flush(): Promise<void> {
    const keys = [...this.dirty];
    this.dirty.clear();
    await Promise.all(
      keys.map(async (k) => {
        const [key_id = '', day = ''] = k.split('|');
        const tokens = this.own.get(k) ?? 0;
        await this.tallies
          .updateOne(
            { _id: `${k}|${this.process}` },
            { $set: { key_id, day, process: this.process, tokens, updated_at: new Date() } },
            { upsert: true }
          )
          .catch((err) => {
            this.dirty.add(k);
            throw err;
          });
      })
    );
    // Yesterday's and older totals are no longer needed in memory.
    const today = new Date().toISOString().slice(0, 10);
    for (const k of this.own.keys()) if (!k.endsWith(`|${today}`) && !this.dirty.has(k)) this.own.delete(k);
  }
}
