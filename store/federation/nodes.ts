/**
 * Federation nodes as stored: identity, declared brand and resources, hashed API key, state and review decision.
 * The node lifecycle (states and their changes) is owned by the node/<node_id> workflow; this module only stores.
 * Node ids come from a hub-wide counter, made unique by index; one process claims numbers in rounds (see
 * insertWithNextSequence).
 *
 * After registration a node document has a single writer, the node workflow's state-change activity (which runs
 * one change at a time per node): FerretDB applies concurrent updates of one document as read-modify-write, so a
 * second writer could silently undo a state change. Heartbeat figures live elsewhere (presence.ts,
 * heartbeat-history.ts).
 */
import { Collection, Db } from 'mongodb';
import type { BrandCode, NodeState } from '../../core/federation/vocabulary';

export type { NodeState };

export interface NodeDocument {
  _id: string; // node id
  seq: number;
  name: string;
  brand: { code: BrandCode; model_base: string | null };
  instance: { os: string | null; cpu: string | null; memory_gb: number | null; gpu: string | null };
  capabilities: string[];
  api_key_hash: string;
  state: NodeState;
  created_at: string;
  state_changed_at: string;
  review: { decision: 'approved' | 'rejected'; reviewer: string; reason: string; at: string } | null;
}

/** The public view of a node: never the key hash. */
export type PublicNode = Omit<NodeDocument, '_id' | 'api_key_hash'> & { node_id: string };
export const PUBLIC_NODE_PROJECTION = { api_key_hash: 0 } as const;

/** A document read with PUBLIC_NODE_PROJECTION, with its id named node_id. */
export function publicNode({ _id, ...rest }: Omit<NodeDocument, 'api_key_hash'>): PublicNode {
  return { node_id: _id, ...rest };
}

/**
 * One change to a node document after registration, as every API process's node cache follows it
 * (store/federation/node-cache.ts): the new state, or null when the node was removed. Kept NODE_CHANGES_KEEP_MS.
 */
export interface NodeChangeDocument {
  _id: string;
  node_id: string;
  state: NodeState | null;
  /** When the change happened (the node document's state_changed_at). */
  state_at: Date;
  /** When this record was written: what readers select on. */
  written_at: Date;
}

/** How long change records are kept; a reader that has not read for longer starts over from the documents. */
export const NODE_CHANGES_KEEP_MS = 120_000;

/**
 * Most state changes written in one batch. FerretDB v1.24 (SQLite) answered a bulkWrite of 40 updates in 255 ms here
 * but did not answer one of 120 within a minute; 32 keeps well inside what was seen to work.
 */
const MAX_STATE_BATCH = 32;

interface CounterDocument {
  _id: string;
  value: number;
}

/** A registration waiting for its sequence number (see NodeStore.insertWithNextSequence). */
interface SequenceClaim {
  build: (sequence: number) => NodeDocument;
  attempts: number;
  resolve: (doc: NodeDocument) => void;
  reject: (err: unknown) => void;
}

/**
 * How many times one registration may find its number taken by another API process before it fails. Each time
 * means another process's registration succeeded with that number, and numbers only move forward, so this is
 * reached only if other processes win every round for that long; the error is then a duplicate key (11000), which
 * the route answers with 503 (retry), never 500.
 */
export const MAX_SEQUENCE_ATTEMPTS = 100;

export class NodeStore {
  readonly nodes: Collection<NodeDocument>;
  private readonly counters: Collection<CounterDocument>;
  readonly changes: Collection<NodeChangeDocument>;
  private lastChangesPrune = 0;
  /** State changes waiting for the next batch (see setState). */
  private readonly stateQueue: { nodeId: string; set: Partial<NodeDocument>; resolve: () => void; reject: (err: unknown) => void }[] = [];
  private writingStates = false;
  /** Registrations of this process waiting for a number; claimed together, one round at a time. */
  private readonly waiting: SequenceClaim[] = [];
  private claiming = false;
  /** The highest number this process has tried: it never tries one again. */
  private highWater = 0;

  constructor(db: Db) {
    this.nodes = db.collection('nodes');
    this.counters = db.collection('counters');
    this.changes = db.collection('node_changes');
  }

  /**
   * Records a change for the node caches of every API process. The collection holds only the last
   * NODE_CHANGES_KEEP_MS of changes (pruned here at most every 10 s), so reading it stays cheap on FerretDB/SQLite,
   * where every read scans its collection.
   */
  private async recordChange(nodeId: string, state: NodeState | null, stateAt: string): Promise<void> {
    const now = new Date();
    await this.changes.insertOne({ _id: `${nodeId}:${now.getTime()}:${Math.random().toString(36).slice(2, 10)}`, node_id: nodeId, state, state_at: new Date(Date.parse(stateAt) || now.getTime()), written_at: now });
    this.pruneChanges();
  }

  private pruneChanges(): void {
    const now = Date.now();
    if (now - this.lastChangesPrune <= 10_000) return;
    this.lastChangesPrune = now;
    this.changes.deleteMany({ written_at: { $lt: new Date(now - NODE_CHANGES_KEEP_MS) } }).catch(() => undefined);
  }

  /** Change records written since `since` (see NodeCache). */
  changesSince(since: Date): Promise<NodeChangeDocument[]> {
    return this.changes.find({ written_at: { $gt: since } }).toArray();
  }

  /**
   * Adds `count` to the hub-wide node counter and returns the first of the `count` numbers it covers. A hint only
   * (see insertWithNextSequence).
   */
  async nextSequence(count = 1): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      try {
        const doc = await this.counters.findOneAndUpdate({ _id: 'node_seq' }, { $inc: { value: count } }, { upsert: true, returnDocument: 'after' });
        return doc!.value - count + 1;
      } catch (err) {
        // Two first registrations race to create the counter; the loser increments the winner's.
        if ((err as { code?: number }).code !== 11000 || attempt >= 3) throw err;
      }
    }
  }

  /**
   * Inserts a node under the next free sequence number. The unique index on seq (and the _id) decides who gets a
   * number; the counter only suggests where to start, because FerretDB does not make findAndModify's $inc atomic:
   * concurrent callers read the same value (and a late write can even move it back).
   *
   * Before, each registration took its own number from the counter and, on a collision, asked the counter again:
   * at 16 concurrent registrations in one process most of them collided (median 2, p99 17, worst 26 tries on the
   * embedded FerretDB), and past 50 tries the duplicate key error surfaced as a 500. Now the registrations of one
   * process never compete with each other: whoever waits is claimed together, in rounds: one counter update for
   * the whole round, distinct consecutive numbers, above every number this process tried before, inserted in
   * parallel. Only another API process can take a number first; then that registration goes into the next round
   * with a higher number.
   */
  insertWithNextSequence(build: (sequence: number) => NodeDocument): Promise<NodeDocument> {
    return new Promise<NodeDocument>((resolve, reject) => {
      this.waiting.push({ build, attempts: 0, resolve, reject });
      void this.claimRounds();
    });
  }

  private async claimRounds(): Promise<void> {
    if (this.claiming) return;
    this.claiming = true;
    try {
      while (this.waiting.length > 0) {
        const round = this.waiting.splice(0, this.waiting.length);
        let first: number;
        try {
          first = Math.max(await this.nextSequence(round.length), this.highWater + 1);
        } catch (err) {
          for (const claim of round) claim.reject(err);
          continue;
        }
        this.highWater = first + round.length - 1;
        const retry: SequenceClaim[] = [];
        await Promise.all(
          round.map(async (claim, i) => {
            claim.attempts++;
            try {
              const doc = claim.build(first + i);
              await this.nodes.insertOne(doc);
              claim.resolve(doc);
            } catch (err) {
              if ((err as { code?: number }).code === 11000 && claim.attempts < MAX_SEQUENCE_ATTEMPTS) retry.push(claim);
              else claim.reject(err);
            }
          })
        );
        // Those who lost a number to another process go first in the next round.
        this.waiting.unshift(...retry);
      }
    } finally {
      this.claiming = false;
    }
  }

  async delete(nodeId: string): Promise<void> {
    await this.nodes.deleteOne({ _id: nodeId });
    await this.recordChange(nodeId, null, new Date().toISOString());
  }

  findNode(nodeId: string): Promise<NodeDocument | null> {
    return this.nodes.findOne({ _id: nodeId });
  }

  findPublic(nodeId: string): Promise<Omit<NodeDocument, 'api_key_hash'> | null> {
    return this.nodes.findOne({ _id: nodeId }, { projection: PUBLIC_NODE_PROJECTION });
  }

  async list(filter: { state?: NodeState; brand?: BrandCode }, page: { limit: number; offset: number }): Promise<{ total: number; nodes: PublicNode[] }> {
    const query: Record<string, unknown> = {};
    if (filter.state) query.state = filter.state;
    if (filter.brand) query['brand.code'] = filter.brand;
    const [total, docs] = await Promise.all([
      this.nodes.countDocuments(query),
      this.nodes.find(query, { projection: PUBLIC_NODE_PROJECTION }).sort({ seq: 1 }).skip(page.offset).limit(page.limit).toArray()
    ]);
    return { total, nodes: docs.map(publicNode) };
  }

  /** Counts by state and by brand, and the memory nodes declared (for the dashboard). */
  async aggregates(): Promise<{ byState: Record<string, number>; byBrand: Record<string, number>; memoryGb: number; total: number }> {
    const docs = await this.nodes.find({}, { projection: { state: 1, 'brand.code': 1, 'instance.memory_gb': 1 } }).toArray();
    const byState: Record<string, number> = {};
    const byBrand: Record<string, number> = {};
    let memoryGb = 0;
    for (const d of docs) {
      byState[d.state] = (byState[d.state] ?? 0) + 1;
      byBrand[d.brand.code] = (byBrand[d.brand.code] ?? 0) + 1;
      if (d.state !== 'rejected') memoryGb += d.instance?.memory_gb ?? 0;
    }
    return { byState, byBrand, memoryGb, total: docs.length };
  }

  /**
   * Sets a node's state (the node workflow's state-change activity, the document's one writer). Group-committed: the
   * changes that arrive while a batch is written go together in the next one, as one bulkWrite of updates by _id
   * (in arrival order) and one insert of their change records, so a mass online (every node's state change at once)
   * costs a round trip per batch, not per node. Resolves once both are stored.
   */
  setState(nodeId: string, state: NodeState, at: string, review: NodeDocument['review'] | undefined): Promise<void> {
    const set: Partial<NodeDocument> = { state, state_changed_at: at };
    if (review) set.review = review;
    return new Promise<void>((resolve, reject) => {
      this.stateQueue.push({ nodeId, set, resolve, reject });
      void this.writeStates();
    });
  }

  private async writeStates(): Promise<void> {
    if (this.writingStates) return;
    this.writingStates = true;
    try {
      while (this.stateQueue.length > 0) {
        const batch = this.stateQueue.splice(0, MAX_STATE_BATCH);
        try {
          await this.nodes.bulkWrite(
            batch.map((c) => ({ updateOne: { filter: { _id: c.nodeId }, update: { $set: c.set } } })),
            { ordered: true }
          );
          const now = new Date();
          await this.changes.insertMany(
            batch.map((c, i) => ({
              _id: `${c.nodeId}:${now.getTime()}:${i}:${Math.random().toString(36).slice(2, 10)}`,
              node_id: c.nodeId,
              state: c.set.state!,
              state_at: new Date(Date.parse(c.set.state_changed_at!) || now.getTime()),
              written_at: now
            })),
            { ordered: false }
          );
          for (const c of batch) c.resolve();
        } catch (err) {
          // The activity retries; setting a state and recording it again are both harmless.
          for (const c of batch) c.reject(err);
        }
        this.pruneChanges();
      }
    } finally {
      this.writingStates = false;
    }
  }
}
