/**
 * Writes of node documents after registration: state changes (setState, group-committed) and the one queue every
 * node-document write of this process goes through (write(): a node's writes in order, a few at once). Part of
 * NodeStore (nodes.ts).
 */
import { Collection } from 'mongodb';
import type { NodeState } from '../../core/federation/vocabulary';
import type { NodeChangeLog } from './node-change-log';
import type { NodeDocument } from './node-document';

/**
 * Node-document writes of this process in flight at once, each a single-statement update by `_id` (see write()).
 * FerretDB v1.24 keeps the database connection of every statement of one `update` command until the whole command
 * ends (its handler defers closing each statement's query to the end of the command), from a pool of 50 connections
 * on PostgreSQL: a bulkWrite of 100 conditional updates hung an idle FerretDB for good here, and several smaller
 * ones at once hung it under load (the whole server, every client waiting for a connection). One statement per
 * command holds at most two connections, for milliseconds: `_id` lookups use an index on the embedded FerretDB
 * (the GIN index of scripts/stack/postgres.ts) and on MongoDB.
 */
const NODE_WRITES_IN_FLIGHT = 8;

/** Most state changes whose change records go in one insert (their updates are single statements, see write()). */
const MAX_STATE_BATCH = 32;

export class NodeDocumentWriter {
  private readonly nodes: Collection<NodeDocument>;
  private readonly changes: NodeChangeLog;
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

  constructor(nodes: Collection<NodeDocument>, changes: NodeChangeLog) {
    this.nodes = nodes;
    this.changes = changes;
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
  write<T>(nodeId: string, fn: () => Promise<T>): Promise<T> {
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
          await this.changes.insertChanges(
            batch
              .filter((c) => !c.registration)
              .map((c) => ({ nodeId: c.nodeId, state: c.set.state!, stateAt: c.set.state_changed_at! }))
          );
          for (const c of batch) c.resolve();
        } catch (err) {
          // The activity retries; setting a state and recording it again are both harmless.
          for (const c of batch) c.reject(err);
        }
        this.changes.pruneChanges();
      }
    } finally {
      this.writingStates = false;
    }
  }
}
