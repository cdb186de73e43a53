/**
 * Node registration's storage: node ids from the hub-wide counter, claimed in rounds and made unique by index
 * (insertWithNextSequence), and the removal of registrations that will not be answered (abandon). Part of NodeStore
 * (nodes.ts).
 */
import { Collection, Db } from 'mongodb';
import { writeErrorsOf } from '../insert-batch';
import { retryingUpsert } from '../mongo';
import type { NodeChangeLog } from './node-change-log';
import type { NodeDocument } from './node-document';

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

export class NodeRegistrations {
  private readonly nodes: Collection<NodeDocument>;
  private readonly counters: Collection<CounterDocument>;
  private readonly changes: NodeChangeLog;
  /** Registrations of this process waiting for a number; claimed together, one round at a time. */
  private readonly waiting: SequenceClaim[] = [];
  private claiming = false;
  /** The highest number this process has tried: it never tries one again. */
  private highWater = 0;

  constructor(db: Db, nodes: Collection<NodeDocument>, changes: NodeChangeLog) {
    this.nodes = nodes;
    this.counters = db.collection('counters');
    this.changes = changes;
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
        // next tick without waiting for their workflows' first task (a registration burst queues thousands), and
        // every API process's node cache and directory index without reading their documents.
        // Best effort: otherwise the sweeper adopts them from presence when they first beat (sweepPresence).
        if (inserted.length > 0) {
          await this.changes
            .insertChanges(
              inserted.map(({ doc }) => ({
                nodeId: doc._id,
                state: doc.state,
                stateAt: doc.state_changed_at,
                registered: {
                  api_key_hash: doc.api_key_hash,
                  brand: doc.brand.code,
                  seq: doc.seq,
                  name: doc.name,
                  memory_gb: doc.instance.memory_gb
                }
              }))
            )
            .catch(() => undefined);
          this.changes.pruneChanges();
        }
        for (const { claim, doc } of inserted) claim.resolve(doc);
        // Those who lost a number to another process go first in the next round.
        this.waiting.unshift(...retry);
      }
    } finally {
      this.claiming = false;
    }
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
          await this.changes.insertChanges(
            docs.map((d) => ({ nodeId: d._id, state: null, stateAt: new Date().toISOString() }))
          );
          this.changes.pruneChanges();
        }
      } catch (err) {
        if (n >= ABANDON_ATTEMPTS) return onError(err);
        await new Promise((r) => setTimeout(r, 1000 * 2 ** n));
        return attempt(n + 1);
      }
    };
    return attempt(1);
  }
}
