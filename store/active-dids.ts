/**
 * Recently active DIDs, per process: what lets a truth write skip its X-DID read (api/plugins/auth/did.ts).
 *
 * A DID this process found active (registered, unrevoked) is taken as active without a read while both hold:
 *   - it was found active less than MAX_AGE_MS ago (its own read; re-read in the background once half that old);
 *   - this process has checked for revocations less than `ttl` ms ago: its own read of the DID, or a read of the
 *     revocation feed (below) that started after it was found active, whichever started last.
 * So no answer rests on a check that started more than `ttl` ms ago: a revocation made through another process
 * counts here at most `ttl` ms later; one made through this process counts at once (`forget`). Only active DIDs are
 * kept: an unknown or revoked DID is read every time.
 *
 * The revocation feed. Every revocation first inserts a record in `did_revocations` (`_id` = the DID; see
 * recordDidRevocation), then sets the DID's `revoked_at`. A revocation is final (a revoked DID cannot be registered
 * again), so a DID found active and absent from the feed later is still active. One read of that small collection
 * then confirms every DID this process remembers, where each DID's own read did it before: a hub whose 1,000 DIDs
 * each wrote about once a second read a DID at every write (TRUTH_DID_CACHE_MS 1 s), 1.02 finds a write, and its
 * truth writes ran at 0.49x of a bare insert at concurrency 16; without those reads 0.93x (docs/benchmarks.md). The
 * feed is read when a check finds the last read half `ttl` old (one read at a time, in the background: a steady
 * writer never waits for it), and its records are deleted RETENTION_MS after they were written, by the process that
 * reads them then. A record lives longer than any remembered DID (RETENTION_MS is twice MAX_AGE_MS), so a DID
 * revoked after it was found active is still in the feed at every read that could confirm it, unless its revoker
 * stopped for minutes between the record and the update: then MAX_AGE_MS bounds how long it is taken as active.
 */
import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './mongo';

export const DID_REVOCATIONS_COLLECTION = 'did_revocations';
/** How long a DID found active is remembered without its own read (a backstop: see above). */
const MAX_AGE_MS = 5 * 60_000;
/** How long a revocation record is kept. */
const RETENTION_MS = 2 * MAX_AGE_MS;
/** The most DIDs remembered; past it the memory starts again empty. */
const MAX_ACTIVE = 10_000;

interface RevocationRecord {
  _id: string;
  at: Date;
}

/**
 * Writes the feed record of a revocation: call it before setting `revoked_at`, so that every process that reads the
 * DID as revoked can also find it in the feed. A record already there (the DID was revoked before) is kept.
 */
export async function recordDidRevocation(db: Db, did: string): Promise<void> {
  try {
    await db.collection<RevocationRecord>(DID_REVOCATIONS_COLLECTION).insertOne({ _id: did, at: new Date() });
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
  }
}

interface Remembered {
  /** When the read that found the DID active started (ms). */
  readAt: number;
  refreshing: boolean;
}

export class ActiveDids {
  private readonly feed: Collection<RevocationRecord>;
  private readonly active = new Map<string, Remembered>();
  /** Bumped when a DID is forgotten: a read that started before must not put it back. */
  private generation = 0;
  /** When the newest read of the feed that succeeded started (ms; 0: none yet). */
  private feedReadAt = 0;
  private feedRead: Promise<void> | null = null;
  /** The DIDs in the feed at its last read: never remembered (their revocation may not have landed yet). */
  private revoked = new Set<string>();

  constructor(
    db: Db,
    /** Reads whether `did` is registered and unrevoked. */
    private readonly readDid: (did: string) => Promise<boolean>
  ) {
    this.feed = db.collection<RevocationRecord>(DID_REVOCATIONS_COLLECTION);
  }

  /** Whether `did` is registered and unrevoked, trusting a check that started less than `ttl` ms ago (0: always read). */
  async isActive(did: string, ttl: number): Promise<boolean> {
    if (ttl <= 0) return this.readDid(did);
    const now = Date.now();
    const entry = this.active.get(did);
    if (!entry || now - entry.readAt >= MAX_AGE_MS) return this.read(did);
    const checkedAt = Math.max(entry.readAt, this.feedReadAt);
    if (now - checkedAt >= ttl) {
      // Checked too long ago (the process was idle): one read of the feed checks every DID remembered at once.
      await this.readFeed();
      const after = this.active.get(did);
      return after && Date.now() - Math.max(after.readAt, this.feedReadAt) < ttl ? true : this.read(did);
    }
    if (now - checkedAt >= ttl / 2) void this.readFeed();
    if (now - entry.readAt >= MAX_AGE_MS / 2 && !entry.refreshing) {
      entry.refreshing = true;
      // A failed read leaves the entry to age out; a read that finds it revoked removes it.
      this.read(did).catch(() => {
        entry.refreshing = false;
      });
    }
    return true;
  }

  /** This process revoked `did`: no answer from memory any more. */
  forget(did: string): void {
    this.generation++;
    this.active.delete(did);
  }

  private async read(did: string): Promise<boolean> {
    const startedAt = Date.now();
    const generation = this.generation;
    const found = await this.readDid(did);
    if (!found) {
      this.active.delete(did);
      return false;
    }
    // Answered from this read, but not remembered: forgotten meanwhile, or in the feed.
    if (generation !== this.generation || this.revoked.has(did)) return true;
    if (this.active.size >= MAX_ACTIVE && !this.active.has(did)) this.active.clear();
    this.active.set(did, { readAt: Math.max(startedAt, this.active.get(did)?.readAt ?? 0), refreshing: false });
    return true;
  }

  /** Reads the feed (one read at a time, shared); never rejects: a failed read leaves the DIDs' checks to age. */
  private readFeed(): Promise<void> {
    this.feedRead ??= this.readFeedNow()
      .catch(() => undefined)
      .finally(() => {
        this.feedRead = null;
      });
    return this.feedRead;
  }

  private async readFeedNow(): Promise<void> {
    const startedAt = Date.now();
    const records = await this.feed.find({}).toArray();
    const revoked = new Set<string>();
    let stale = false;
    for (const record of records) {
      revoked.add(record._id);
      if (this.active.delete(record._id)) this.generation++;
      if (startedAt - record.at.getTime() > RETENTION_MS) stale = true;
    }
    this.revoked = revoked;
    this.feedReadAt = Math.max(this.feedReadAt, startedAt);
    if (stale) await this.feed.deleteMany({ at: { $lt: new Date(startedAt - RETENTION_MS) } });
  }
}
