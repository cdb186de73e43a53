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
import { writeErrorsOf } from '../insert-batch';
import { retryingUpsert } from '../mongo';
import {
  nodeChangesCollection,
  NODE_CHANGES_KEEP_MS,
  NODE_CHANGES_SLOTS,
  NODE_CHANGES_SLOT_MS
} from './node-changes-ring';

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
  /**
   * Liveness transitions (online ⇄ offline) recorded by the presence sweeper (applyLiveness), absent before the
   * first: each one's ledger event is idempotent by node and this number.
   */
  liveness_seq?: number;
}

/**
 * One online ⇄ offline transition decided by the presence sweeper from its read of presence
 * (activities/federation/node-lifecycle.ts): applied only if the node is still `from`; `seq` is its liveness_seq after.
 */
export interface LivenessTransition {
  node_id: string;
  from: 'online' | 'offline';
  to: 'online' | 'offline';
  /** ISO time of the change (the start of the presence read that decided it). */
  at: string;
  reason: string;
  /** The node's liveness_seq after this transition (1 for its first). */
  seq: number;
}

/** What the presence sweeper keeps of a node (its liveness view, see loadLiveness). */
export interface LivenessView {
  state: NodeState;
  seq: number;
  /** ms of state_changed_at. */
  state_at: number;
}

/** Most liveness transitions whose change records go in one insert. */
const LIVENESS_BATCH = 500;
/**
 * Node-document writes of this process in flight at once, each a single-statement update by `_id` (see write()).
 * FerretDB v1.24 keeps the database connection of every statement of one `update` command until the whole command
 * ends (its handler defers closing each statement's query to the end of the command), from a pool of 50 connections
 * on PostgreSQL: a bulkWrite of 100 conditional updates hung an idle FerretDB for good here, and several smaller
 * ones at once hung it under load (the whole server, every client waiting for a connection). One statement per
 * command holds at most two connections, for milliseconds: `_id` lookups use an index on both embedded backends
 * (PostgreSQL: the GIN index of scripts/stack/postgres.ts) and on MongoDB.
 */
const NODE_WRITES_IN_FLIGHT = 8;

/** The public view of a node: never the key hash. */
export type PublicNode = Omit<NodeDocument, '_id' | 'api_key_hash'> & { node_id: string };
export const PUBLIC_NODE_PROJECTION = { api_key_hash: 0 } as const;

/** A document read with PUBLIC_NODE_PROJECTION, with its id named node_id. */
export function publicNode({ _id, ...rest }: Omit<NodeDocument, 'api_key_hash'>): PublicNode {
  return { node_id: _id, ...rest };
}

/**
 * One change to a node document after registration, as every API process's node cache follows it
 * (store/federation/node-cache.ts): the new state, or null when the node was removed. Kept NODE_CHANGES_KEEP_MS, in
 * the change log's ring of collections (see NODE_CHANGES_SLOT_MS).
 */
export interface NodeChangeDocument {
  _id: string;
  node_id: string;
  state: NodeState | null;
  /** When the change happened (the node document's state_changed_at). */
  state_at: Date;
  /** When this record was written: what readers select on. */
  written_at: Date;
  /** The node's liveness_seq after a liveness transition (absent on other changes). */
  liveness_seq?: number;
  /**
   * A registration's record only: what a node cache needs to authenticate the new node (its key's digest, as the
   * node document holds it, and its brand), so every API process knows it from the log without reading its document.
   */
  registered?: NodeAuthFields;
}

/** What external_node authentication reads of a node document (the node cache's entries). */
export interface NodeAuthFields {
  api_key_hash: string;
  brand: string;
}

/** A node as the node cache loads it: its id, auth fields, state and when that state began. */
export interface NodeAuthDocument {
  _id: string;
  api_key_hash: string;
  state: NodeState;
  brand: { code: string };
  state_changed_at: string;
}

const NODE_AUTH_PROJECTION = { api_key_hash: 1, state: 1, 'brand.code': 1, state_changed_at: 1 } as const;

/** One change record to insert (see NodeStore.insertChanges). */
interface ChangeRecordInput {
  nodeId: string;
  state: NodeState | null;
  stateAt: string;
  livenessSeq?: number;
  registered?: NodeAuthFields;
}

/** Records written this far ahead of a reader's clock (another host's) are read too (see changesSince). */
const CHANGES_CLOCK_MARGIN_MS = 5000;
/** Most inserts of one batch of change records (see insertChanges). */
const MAX_CHANGE_RESTAMPS = 5;

/** Most state changes whose change records go in one insert (their updates are single statements, see write()). */
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
/** Tries to remove abandoned registrations (1 s, 2 s, 4 s, … apart): about a minute in all. */
const ABANDON_ATTEMPTS = 6;

export class NodeStore {
  readonly nodes: Collection<NodeDocument>;
  private readonly counters: Collection<CounterDocument>;
  private readonly db: Db;
  private lastChangesPrune = 0;
  /** State changes waiting for the next batch (see setState). */
  private readonly stateQueue: {
    nodeId: string;
    set: Partial<NodeDocument>;
    registration: boolean;
    resolve: () => void;
    reject: (err: unknown) => void;
  }[] = [];
  private writingStates = false;
  /** Node-document writes in flight, and those waiting for a place (see write()). */
  private writesInFlight = 0;
  private readonly writeWaiters: (() => void)[] = [];
  /** Per node, the end of its last write queued here (see write()). */
  private readonly nodeWrites = new Map<string, Promise<void>>();
  /** Registrations of this process waiting for a number; claimed together, one round at a time. */
  private readonly waiting: SequenceClaim[] = [];
  private claiming = false;
  /** The highest number this process has tried: it never tries one again. */
  private highWater = 0;

  constructor(db: Db) {
    this.nodes = db.collection('nodes');
    this.counters = db.collection('counters');
    this.db = db;
  }

  /** The change log's ring collection for records written at `ms` (see NODE_CHANGES_SLOT_MS). */
  private changesAt(ms: number): Collection<NodeChangeDocument> {
    return this.db.collection(nodeChangesCollection(ms));
  }

  /**
   * Records a change for the node caches of every API process. The log holds only the last NODE_CHANGES_KEEP_MS of
   * changes, in a ring of collections by time (NODE_CHANGES_SLOT_MS), so reading what is new stays cheap on FerretDB,
   * where every read of a range scans its collection.
   */
  private async recordChange(nodeId: string, state: NodeState | null, stateAt: string): Promise<void> {
    await this.insertChanges([{ nodeId, state, stateAt }]);
    this.pruneChanges();
  }

  /**
   * Change records (see recordChange), in one insert; `_id`s unique per record, opaque to readers. A record is stamped
   * (written_at) before its insert is sent, and readers ask for records newer than their previous read minus
   * CHANGES_CLOCK_MARGIN_MS: an insert that took longer than half that margin (an overloaded database) may have
   * become visible after a reader's read had moved past its stamp, so the records are inserted again with a new
   * stamp, until one insert is quick enough (readers apply a record twice harmlessly: by its state_at, liveness_seq).
   */
  private async insertChanges(changes: ChangeRecordInput[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const startedAt = Date.now();
      await this.insertChangesOnce(changes);
      if (Date.now() - startedAt <= CHANGES_CLOCK_MARGIN_MS / 2 || attempt >= MAX_CHANGE_RESTAMPS) return;
    }
  }

  private async insertChangesOnce(changes: ChangeRecordInput[]): Promise<void> {
    if (changes.length === 0) return;
    const now = new Date();
    const docs = changes.map((c, i): NodeChangeDocument => ({
      _id: `${c.nodeId}:${now.getTime()}:${i}:${Math.random().toString(36).slice(2, 10)}`,
      node_id: c.nodeId,
      state: c.state,
      state_at: new Date(Date.parse(c.stateAt) || now.getTime()),
      written_at: now,
      ...(c.livenessSeq === undefined ? {} : { liveness_seq: c.livenessSeq }),
      ...(c.registered ? { registered: c.registered } : {})
    }));
    const log = this.changesAt(now.getTime());
    if (docs.length === 1) await log.insertOne(docs[0]!);
    else await log.insertMany(docs, { ordered: false });
  }

  /**
   * At most once per NODE_CHANGES_SLOT_MS: empties the three ring collections after the current one of records older
   * than NODE_CHANGES_KEEP_MS (each holds at most one interval's records; a host whose clock runs ahead may already
   * write into the next one, which the age filter keeps). A collection no writer emptied (a quiet hub) only holds old
   * records that readers skip by their time.
   */
  private pruneChanges(): void {
    const now = Date.now();
    if (now - this.lastChangesPrune < NODE_CHANGES_SLOT_MS) return;
    this.lastChangesPrune = now;
    const old = { written_at: { $lt: new Date(now - NODE_CHANGES_KEEP_MS) } };
    for (let ahead = 1; ahead <= 3; ahead++)
      this.changesAt(now + ahead * NODE_CHANGES_SLOT_MS)
        .deleteMany(old)
        .catch(() => undefined);
  }

  /**
   * Change records written since `since` (see NodeCache): those of the ring collections from since's interval to the
   * interval CHANGES_CLOCK_MARGIN_MS from now (one or two collections for a reader that read a second ago), read at
   * once. A `since` older than the ring holds reads the whole ring (the caller starts over from the documents then).
   */
  async changesSince(since: Date): Promise<NodeChangeDocument[]> {
    // Readers prune too: a ring nobody writes to for a while (a quiet fleet) would otherwise keep a lap-old
    // collection's records where readers arrive (FerretDB reads a collection whole to filter it).
    this.pruneChanges();
    const first = Math.floor(since.getTime() / NODE_CHANGES_SLOT_MS);
    const last = Math.floor((Date.now() + CHANGES_CLOCK_MARGIN_MS) / NODE_CHANGES_SLOT_MS);
    const intervals = Array.from(
      { length: Math.min(NODE_CHANGES_SLOTS, Math.max(1, last - first + 1)) },
      (_, i) => last - i
    );
    const reads = await Promise.all(
      intervals.map((n) =>
        this.changesAt(n * NODE_CHANGES_SLOT_MS)
          .find({ written_at: { $gt: since } })
          .toArray()
      )
    );
    return reads.flat();
  }

  /**
   * Adds `count` to the hub-wide node counter and returns the first of the `count` numbers it covers. A hint only
   * (see insertWithNextSequence).
   */
  async nextSequence(count = 1): Promise<number> {
    // Two first registrations race to create the counter; the loser increments the winner's.
    const doc = await retryingUpsert(() =>
      this.counters.findOneAndUpdate(
        { _id: 'node_seq' },
        { $inc: { value: count } },
        { upsert: true, returnDocument: 'after' }
      )
    );
    return doc!.value - count + 1;
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
        const inserted: { claim: SequenceClaim; doc: NodeDocument }[] = [];
        // The round's documents in one unordered insert (one command, not one per registration: on FerretDB each
        // command costs a few ms whatever its size); a number another process took fails only its own document.
        const docs = round.map((claim, i) => {
          claim.attempts++;
          return claim.build(first + i);
        });
        let failed: ReturnType<typeof writeErrorsOf> = null;
        try {
          await this.nodes.insertMany(docs, { ordered: false });
        } catch (err) {
          failed = writeErrorsOf(err);
          if (!failed) {
            // The command failed as a whole, maybe after the database applied it (a timeout): nobody will be
            // given these nodes, so none may stay.
            void this.abandon(docs);
            for (const claim of round) claim.reject(err);
            continue;
          }
        }
        round.forEach((claim, i) => {
          const error = failed?.get(i);
          if (!error) inserted.push({ claim, doc: docs[i]! });
          else if (error.code === 11000 && claim.attempts < MAX_SEQUENCE_ATTEMPTS) retry.push(claim);
          else
            claim.reject(
              Object.assign(new Error(error.errmsg ?? 'the node could not be stored'), { code: error.code })
            );
        });
        // The round's new nodes go into the change log too (one insert), so the presence sweeper knows them at its
        // next tick without waiting for their workflows' first task (a registration burst queues thousands).
        // Best effort: otherwise the sweeper adopts them from presence when they first beat (sweepPresence).
        if (inserted.length > 0) {
          await this.insertChanges(
            inserted.map(({ doc }) => ({
              nodeId: doc._id,
              state: doc.state,
              stateAt: doc.state_changed_at,
              registered: { api_key_hash: doc.api_key_hash, brand: doc.brand.code }
            }))
          ).catch(() => undefined);
          this.pruneChanges();
        }
        for (const { claim, doc } of inserted) claim.resolve(doc);
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

  /**
   * Removes registrations that will not be answered (their insert failed without saying whether it was applied, or
   * their workflow could not be started), so no node is left that nobody was given: in the background, tried
   * again for a while if the database does not answer (the failure that abandoned them is usually it being
   * overloaded). Only documents that are still exactly these registrations (same id and key digest) are removed.
   */
  abandon(docs: NodeDocument[], onError: (err: unknown) => void = () => undefined): Promise<void> {
    const filter = { _id: { $in: docs.map((d) => d._id) }, api_key_hash: { $in: docs.map((d) => d.api_key_hash) } };
    const attempt = async (n: number): Promise<void> => {
      try {
        const { deletedCount } = await this.nodes.deleteMany(filter);
        if (deletedCount > 0) {
          await this.insertChanges(
            docs.map((d) => ({ nodeId: d._id, state: null, stateAt: new Date().toISOString() }))
          );
          this.pruneChanges();
        }
      } catch (err) {
        if (n >= ABANDON_ATTEMPTS) return onError(err);
        await new Promise((r) => setTimeout(r, 1000 * 2 ** n));
        return attempt(n + 1);
      }
    };
    return attempt(1);
  }

  /** What authentication needs of these nodes (those that exist), in one read (the node cache's shared reads). */
  findAuth(nodeIds: string[]): Promise<NodeAuthDocument[]> {
    return this.nodes.find<NodeAuthDocument>({ _id: { $in: nodeIds } }, { projection: NODE_AUTH_PROJECTION }).toArray();
  }

  /** What authentication needs of up to `limit` nodes, in one projected scan (a node cache's preload). */
  allAuth(limit: number): Promise<NodeAuthDocument[]> {
    return this.nodes.find<NodeAuthDocument>({}, { projection: NODE_AUTH_PROJECTION }).limit(limit).toArray();
  }

  findPublic(nodeId: string): Promise<Omit<NodeDocument, 'api_key_hash'> | null> {
    return this.nodes.findOne({ _id: nodeId }, { projection: PUBLIC_NODE_PROJECTION });
  }

  async list(
    filter: { state?: NodeState; brand?: BrandCode },
    page: { limit: number; offset: number }
  ): Promise<{ total: number; nodes: PublicNode[] }> {
    const query: Record<string, unknown> = {};
    if (filter.state) query.state = filter.state;
    if (filter.brand) query['brand.code'] = filter.brand;
    const [total, docs] = await Promise.all([
      this.nodes.countDocuments(query),
      this.nodes
        .find(query, { projection: PUBLIC_NODE_PROJECTION })
        .sort({ seq: 1 })
        .skip(page.offset)
        .limit(page.limit)
        .toArray()
    ]);
    return { total, nodes: docs.map(publicNode) };
  }

  /** Counts by state and by brand, and the memory nodes declared (for the dashboard). */
  async aggregates(): Promise<{
    byState: Record<string, number>;
    byBrand: Record<string, number>;
    memoryGb: number;
    total: number;
  }> {
    const docs = await this.nodes
      .find({}, { projection: { state: 1, 'brand.code': 1, 'instance.memory_gb': 1 } })
      .toArray();
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
   * changes that arrive while a batch is written go together in the next one: an update by _id each (a node's in
   * arrival order, NODE_WRITES_IN_FLIGHT at once) and one insert of their change records. Resolves once both are
   * stored.
   */
  setState(
    nodeId: string,
    state: NodeState,
    at: string,
    review: NodeDocument['review'] | undefined,
    options: { registration?: boolean } = {}
  ): Promise<void> {
    const set: Partial<NodeDocument> = { state, state_changed_at: at };
    if (review) set.review = review;
    const registration = options.registration === true;
    return new Promise<void>((resolve, reject) => {
      this.stateQueue.push({ nodeId, set, registration, resolve, reject });
      void this.writeStates();
    });
  }

  /**
   * Runs one write of a node's document after this process's earlier writes of that node, and when fewer than
   * NODE_WRITES_IN_FLIGHT of its node-document writes are in flight. A FerretDB update reads the document, changes
   * it and writes it whole: two updates of one node at once (a registration's state and a liveness transition) could
   * lose one of them; between processes the one writer per node and field (see setState, applyLiveness) keeps that
   * from happening.
   */
  private write<T>(nodeId: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.nodeWrites.get(nodeId) ?? Promise.resolve()).then(() => this.limited(fn));
    const done = run.then(
      () => undefined,
      () => undefined
    );
    this.nodeWrites.set(nodeId, done);
    void done.then(() => {
      if (this.nodeWrites.get(nodeId) === done) this.nodeWrites.delete(nodeId);
    });
    return run;
  }

  private async limited<T>(fn: () => Promise<T>): Promise<T> {
    if (this.writesInFlight < NODE_WRITES_IN_FLIGHT) this.writesInFlight++;
    else await new Promise<void>((resolve) => this.writeWaiters.push(resolve));
    try {
      return await fn();
    } finally {
      // The place passes to the next waiter, if any.
      const next = this.writeWaiters.shift();
      if (next) next();
      else this.writesInFlight--;
    }
  }

  /** Every node's liveness view (state, liveness_seq, state_changed_at) for which `keep` holds (the sweeper's shards). */
  async loadLiveness(keep: (nodeId: string) => boolean): Promise<Map<string, LivenessView>> {
    const docs = await this.nodes
      .find({}, { projection: { _id: 1, state: 1, liveness_seq: 1, state_changed_at: 1 } })
      .toArray();
    const out = new Map<string, LivenessView>();
    for (const d of docs)
      if (keep(d._id))
        out.set(d._id, { state: d.state, seq: d.liveness_seq ?? 0, state_at: Date.parse(d.state_changed_at) || 0 });
    return out;
  }

  /**
   * Applies liveness transitions, conditionally: each is an update by _id that matches only a node still in the
   * `from` state (so a review decision, a rejection or a removal written first wins) and increments its liveness_seq
   * (NODE_WRITES_IN_FLIGHT at once; before, an updateMany of up to 500 by `_id: { $in }`, which FerretDB cannot push
   * down to its database: each read every node document, 4-40 s a tick at 10,000 nodes under load). The nodes an
   * update did not match are read once to tell the caller their current views. The applied ones get their
   * node_changes records (one insert per LIVENESS_BATCH) and are returned; the caller appends their ledger events
   * (idempotent by node and liveness_seq). Transitions whose write failed, or whose records could not be written,
   * are returned as failed: the caller settles them later (settleLiveness). A node's document is written this way or
   * by its workflow (registration, review), never by the heartbeat path. On FerretDB `$inc` is not atomic across
   * concurrent writers; the only writer of liveness_seq is the sweeper of the node's group (one at a time, see
   * node-lifecycle-sweeper.contract.ts).
   */
  async applyLiveness(transitions: LivenessTransition[]): Promise<{
    applied: LivenessTransition[];
    refused: Map<string, LivenessView | null>;
    failed: LivenessTransition[];
  }> {
    const applied: LivenessTransition[] = [];
    const refused = new Map<string, LivenessView | null>();
    const failed: LivenessTransition[] = [];
    for (let i = 0; i < transitions.length; i += LIVENESS_BATCH) {
      const batch = transitions.slice(i, i + LIVENESS_BATCH);
      const won: LivenessTransition[] = [];
      const lost: LivenessTransition[] = [];
      // After a failed write the rest of the batch is not sent (the database is away or timing out: waiting for
      // each in turn would hold the tick for minutes); they are settled later like the failed one.
      let broken = false;
      await Promise.all(
        batch.map(async (t) => {
          try {
            const result = await this.write(t.node_id, () => {
              if (broken) throw new Error('not sent: an earlier write of this batch failed');
              return this.nodes.updateOne(
                { _id: t.node_id, state: t.from },
                { $set: { state: t.to, state_changed_at: t.at }, $inc: { liveness_seq: 1 } }
              );
            });
            (result.matchedCount === 1 ? won : lost).push(t);
          } catch {
            broken = true;
            failed.push(t);
          }
        })
      );
      if (lost.length > 0) {
        try {
          const views = await this.livenessOf(lost.map((t) => t.node_id));
          for (const t of lost) refused.set(t.node_id, views.get(t.node_id) ?? null);
        } catch {
          failed.push(...lost);
        }
      }
      try {
        await this.recordLivenessChanges(won);
        applied.push(...won);
      } catch {
        failed.push(...won);
      }
    }
    this.pruneChanges();
    return { applied, refused, failed };
  }

  /** The liveness views of these nodes that exist (one read). */
  async livenessOf(nodeIds: string[]): Promise<Map<string, LivenessView>> {
    const docs = await this.nodes
      .find({ _id: { $in: nodeIds } }, { projection: { _id: 1, state: 1, liveness_seq: 1, state_changed_at: 1 } })
      .toArray();
    return new Map(
      docs.map((d) => [
        d._id,
        { state: d.state, seq: d.liveness_seq ?? 0, state_at: Date.parse(d.state_changed_at) || 0 }
      ])
    );
  }

  /** Which of these transitions are in the node documents (one read); the others' current views (null: removed). */
  async settleLiveness(
    batch: LivenessTransition[]
  ): Promise<{ applied: LivenessTransition[]; refused: Map<string, LivenessView | null> }> {
    const views = await this.livenessOf(batch.map((t) => t.node_id));
    const applied: LivenessTransition[] = [];
    const refused = new Map<string, LivenessView | null>();
    for (const t of batch) {
      const v = views.get(t.node_id);
      // Applied: the document holds this transition's state and time (its liveness_seq is the number it got).
      if (v && v.state === t.to && v.state_at === Date.parse(t.at) && v.seq > 0) applied.push({ ...t, seq: v.seq });
      else refused.set(t.node_id, v ?? null);
    }
    return { applied, refused };
  }

  /** The node_changes records of applied liveness transitions (one insert), for every API process's node cache. */
  async recordLivenessChanges(applied: LivenessTransition[]): Promise<void> {
    await this.insertChanges(
      applied.map((t) => ({ nodeId: t.node_id, state: t.to, stateAt: t.at, livenessSeq: t.seq }))
    );
  }

  private async writeStates(): Promise<void> {
    if (this.writingStates) return;
    this.writingStates = true;
    try {
      while (this.stateQueue.length > 0) {
        const batch = this.stateQueue.splice(0, MAX_STATE_BATCH);
        try {
          // A registration's state is the one the document was inserted with (and its change record was written
          // then): it is written only if the presence sweeper has not recorded a liveness transition meanwhile,
          // and gets no second record (a late workflow task must not undo a node's coming online). The write looks
          // redundant, but three 10,000-node runs without it (sessions 16 and 17) did not finish their mass online
          // in 240 s (7,994, 8,471 and 8,014 of 10,000 online, nodes flapping online -> offline while beating)
          // against 113-193 s in every run with it; why is not understood yet
          // (docs/benchmarks.md#benchheartbeat-the-fleet).
          // One update per change, a node's in arrival order, different nodes' at once (see write()).
          const byNode = new Map<string, typeof batch>();
          for (const c of batch) byNode.set(c.nodeId, [...(byNode.get(c.nodeId) ?? []), c]);
          const outcomes = await Promise.allSettled(
            [...byNode.values()].map(async (changes) => {
              for (const c of changes) {
                await this.write(c.nodeId, () =>
                  this.nodes.updateOne(
                    c.registration ? { _id: c.nodeId, liveness_seq: { $exists: false } } : { _id: c.nodeId },
                    { $set: c.set }
                  )
                );
              }
            })
          );
          const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
          if (failure) throw failure.reason;
          await this.insertChanges(
            batch
              .filter((c) => !c.registration)
              .map((c) => ({ nodeId: c.nodeId, state: c.set.state!, stateAt: c.set.state_changed_at! }))
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
