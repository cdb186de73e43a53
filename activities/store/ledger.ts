/**
 * The append-only ledger: one MongoDB collection, one document per entry, `_id` = seq (1, 2, 3, … with no gaps).
 * This module exposes appending and reading and nothing else: no code path updates or deletes an entry.
 *
 * Every entry carries the Merkle state after it (RFC 6962 hashing, see core/merkle.ts): its leaf hash, the
 * frontier (roots of the perfect subtrees of the tree of `seq` leaves) and the root, plus the perfect subtrees it
 * completes, so an append is one read of the tail plus one insert, and a proof needs O(log n) reads.
 *
 * Concurrency without transactions: the insert of seq n is computed from entry n-1, and `_id` is unique, so two
 * writers that race for the same seq cannot both win; the loser re-reads the tail and retries. Inside one process,
 * appends are group-committed (one ordered insertMany per batch), so writers queue instead of colliding.
 */
import { randomBytes } from 'node:crypto';
import { Collection, Db, MongoBulkWriteError, MongoServerError } from 'mongodb';
import { canonicalJson, JsonValue } from '../../core/canonical-json';
import { appendToFrontier, fromHex, Hash, leafHash, rootFromFrontier, toHex, EMPTY_ROOT } from '../../core/merkle';
import { LedgerEntryDocument, LedgerEntryKind, ledgerLeafBytes } from '../../core/ledger-entry';

export const LEDGER_COLLECTION = 'ledger';
const MAX_BATCH = 256;
const MAX_RETRIES = 1000;

export interface AppendInput {
  kind: LedgerEntryKind;
  key: string;
  value: { [key: string]: JsonValue };
  truth_type?: string | null;
  did?: string | null;
  /** A retried write with the same (did, idempotency key) returns the first entry instead of a second one. */
  idempotencyKey?: string | null;
}

export interface AppendResult {
  entry: LedgerEntryDocument;
  /** True when the idempotency key matched an earlier entry and nothing new was written. */
  duplicate: boolean;
}

export interface LedgerHead {
  size: number;
  root: string;
}

interface Pending {
  input: AppendInput;
  eventId: string;
  createdAt: Date;
  idem: string;
  valueJson: string;
  resolve: (r: AppendResult) => void;
  reject: (e: unknown) => void;
}

export function newEventId(): string {
  // Time-ordered and unique: 9 base36 chars of milliseconds, 12 hex chars of randomness.
  return `truth-${Date.now().toString(36).padStart(9, '0')}${randomBytes(6).toString('hex')}`;
}

export class Ledger {
  private readonly entries: Collection<LedgerEntryDocument>;
  private queue: Pending[] = [];
  private committing = false;

  constructor(db: Db) {
    this.entries = db.collection<LedgerEntryDocument>(LEDGER_COLLECTION);
  }

  /** Appends one entry; resolves once it is durably inserted (or matched by its idempotency key). */
  append(input: AppendInput): Promise<AppendResult> {
    return new Promise<AppendResult>((resolve, reject) => {
      const eventId = newEventId();
      this.queue.push({
        input,
        eventId,
        createdAt: new Date(),
        idem: input.idempotencyKey ? `k:${input.did ?? ''}:${input.idempotencyKey}` : `e:${eventId}`,
        valueJson: canonicalJson(input.value),
        resolve,
        reject
      });
      void this.drain();
    });
  }

  private async drain(): Promise<void> {
    if (this.committing) return;
    this.committing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        await this.commit(batch).catch((err) => batch.forEach((p) => p.reject(err)));
      }
    } finally {
      this.committing = false;
    }
  }

  private async commit(batch: Pending[]): Promise<void> {
    let pending = await this.settleKnownIdempotencyKeys(batch);
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= MAX_RETRIES) throw new Error('ledger append kept losing the race for the next seq');
      const tail = await this.tail();
      const docs = this.buildDocs(pending, tail);
      try {
        await this.entries.insertMany(docs, { ordered: true });
        pending.forEach((p, i) => p.resolve({ entry: docs[i]!, duplicate: false }));
        return;
      } catch (err) {
        const failure = describeInsertFailure(err);
        if (!failure) throw err;
        pending.slice(0, failure.inserted).forEach((p, i) => p.resolve({ entry: docs[i]!, duplicate: false }));
        const rest = pending.slice(failure.inserted);
        if (failure.duplicateOf === 'idem') {
          // Another process wrote the same idempotency key between our check and our insert.
          pending = await this.settleKnownIdempotencyKeys(rest);
        } else if (failure.duplicateOf === '_id') {
          pending = rest; // lost the race for this seq: re-read the tail and go again
        } else {
          throw err;
        }
      }
    }
  }

  /** Resolves the writes whose idempotency key is already in the ledger (or repeated in this batch). */
  private async settleKnownIdempotencyKeys(batch: Pending[]): Promise<Pending[]> {
    const keyed = batch.filter((p) => p.idem.startsWith('k:'));
    if (keyed.length === 0) return batch;
    const found = await this.entries.find({ idem: { $in: keyed.map((p) => p.idem) } }).toArray();
    const byIdem = new Map(found.map((d) => [d.idem, d]));
    const first = new Map<string, Pending>();
    const rest: Pending[] = [];
    const followers: { p: Pending; leader: Pending }[] = [];
    for (const p of batch) {
      const existing = byIdem.get(p.idem);
      if (existing) {
        p.resolve({ entry: existing, duplicate: true });
      } else if (p.idem.startsWith('k:') && first.has(p.idem)) {
        followers.push({ p, leader: first.get(p.idem)! });
      } else {
        first.set(p.idem, p);
        rest.push(p);
      }
    }
    for (const { p, leader } of followers) {
      const leaderResolve = leader.resolve;
      const leaderReject = leader.reject;
      leader.resolve = (r) => {
        leaderResolve(r);
        p.resolve({ entry: r.entry, duplicate: true });
      };
      leader.reject = (e) => {
        leaderReject(e);
        p.reject(e);
      };
    }
    return rest;
  }

  private buildDocs(pending: Pending[], tail: { size: number; frontier: Hash[] }): LedgerEntryDocument[] {
    let size = tail.size;
    let frontier = tail.frontier;
    return pending.map((p) => {
      const seq = size + 1;
      const fields = {
        seq,
        event_id: p.eventId,
        kind: p.input.kind,
        key: p.input.key,
        truth_type: p.input.truth_type ?? null,
        did: p.input.did ?? null,
        created_at: p.createdAt.toISOString()
      };
      const leaf = leafHash(ledgerLeafBytes(fields, p.valueJson));
      const next = appendToFrontier(frontier, size, leaf);
      size = seq;
      frontier = next.frontier;
      return {
        _id: seq,
        ...fields,
        value_json: p.valueJson,
        day: fields.created_at.slice(0, 10),
        idem: p.idem,
        leaf_hash: toHex(leaf),
        completed: next.completed.map(toHex),
        frontier: frontier.map(toHex),
        root: toHex(rootFromFrontier(frontier))
      };
    });
  }

  private async tail(): Promise<{ size: number; frontier: Hash[] }> {
    const last = await this.entries.find({}, { projection: { _id: 1, frontier: 1 } }).sort({ _id: -1 }).limit(1).next();
    if (!last) return { size: 0, frontier: [] };
    return { size: last._id, frontier: last.frontier.map(fromHex) };
  }

  // ---- reads ----

  /** Size and root of the ledger as stored (the root recorded by its last entry). */
  async head(): Promise<LedgerHead> {
    const last = await this.entries.find({}, { projection: { _id: 1, root: 1 } }).sort({ _id: -1 }).limit(1).next();
    return last ? { size: last._id, root: last.root } : { size: 0, root: toHex(EMPTY_ROOT) };
  }

  get(seq: number): Promise<LedgerEntryDocument | null> {
    return this.entries.findOne({ _id: seq });
  }

  findByEventId(eventId: string): Promise<LedgerEntryDocument | null> {
    return this.entries.findOne({ event_id: eventId });
  }

  /** Entries whose key starts with `prefix`, oldest first. */
  findByKeyPrefix(prefix: string, limit: number): Promise<LedgerEntryDocument[]> {
    const filter = prefix ? { key: { $regex: `^${escapeRegex(prefix)}` } } : {};
    return this.entries.find(filter).sort({ _id: 1 }).limit(limit).toArray();
  }

  /** The newest entries first, optionally filtered by truth type. */
  latest(limit: number, filter: { truthTypes?: string[]; kind?: LedgerEntryKind } = {}): Promise<LedgerEntryDocument[]> {
    const q: Record<string, unknown> = {};
    if (filter.truthTypes) q.truth_type = { $in: filter.truthTypes };
    if (filter.kind) q.kind = filter.kind;
    return this.entries.find(q).sort({ _id: -1 }).limit(limit).toArray();
  }

  /** Entries with seq > after, oldest first. */
  after(after: number, limit: number, filter: { keyPrefix?: string } = {}): Promise<LedgerEntryDocument[]> {
    const q: Record<string, unknown> = { _id: { $gt: after } };
    if (filter.keyPrefix) q.key = { $regex: `^${escapeRegex(filter.keyPrefix)}` };
    return this.entries.find(q).sort({ _id: 1 }).limit(limit).toArray();
  }

  /** Every entry in seq order, streamed in batches (flat memory). */
  scan(batchSize = 1000): AsyncIterable<LedgerEntryDocument> {
    return this.entries.find({}).sort({ _id: 1 }).batchSize(batchSize);
  }

  countByDidOnDay(did: string, day: string): Promise<number> {
    return this.entries.countDocuments({ did, day });
  }

  /** The perfect subtree of 2^level leaves at `index`, as recorded by the entry that completed it. */
  async perfectSubtree(level: number, index: number): Promise<Hash> {
    const seq = (index + 1) * 2 ** level;
    const doc = await this.entries.findOne({ _id: seq }, { projection: { completed: 1 } });
    const hex = doc?.completed[level];
    if (!hex) throw new Error(`ledger has no subtree at level ${level}, index ${index}`);
    return fromHex(hex);
  }
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Reads an insertMany failure: how many documents went in before it, and which unique index refused the next. */
function describeInsertFailure(err: unknown): { inserted: number; duplicateOf: '_id' | 'idem' | 'other' } | null {
  if (err instanceof MongoBulkWriteError) {
    const first = Array.isArray(err.writeErrors) ? err.writeErrors[0] : err.writeErrors;
    if (!first) return null;
    return { inserted: first.index, duplicateOf: duplicateField(first.code, first.errmsg ?? '') };
  }
  if (err instanceof MongoServerError && err.code === 11000) {
    return { inserted: 0, duplicateOf: duplicateField(err.code, err.message) };
  }
  return null;
}

function duplicateField(code: number | undefined, message: string): '_id' | 'idem' | 'other' {
  if (code !== 11000) return 'other';
  return /idem/.test(message) ? 'idem' : '_id';
}
