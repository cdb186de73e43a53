/**
 * What the hub, as a C2SP tlog-witness, has cosigned for each log it witnesses: so that no restart and no other
 * replica ever cosigns a checkpoint inconsistent with one cosigned before.
 *
 * Collection `tlog_witness`, every read and write by `_id`, each prefixed with the log's origin (`<origin> `), as the
 * hub's own checkpoints (store/tlog/checkpoints.ts) and for the same reason: FerretDB's conditional updates are a
 * read-modify-write, not an atomic compare-and-set, while an insert of an existing `_id` is always refused.
 *   `after:<m>`   the checkpoint cosigned after the one of size m (`after:0`: the first, of a non-empty tree),
 *                 inserted once and never updated: two replicas cosigning a successor of m race on one `_id`, one
 *                 wins, the other reads the chain again (and answers 409 with the winner's size). The links form
 *                 one chain of strictly growing sizes, each checked consistent with the one before it.
 *   `latest`      a copy of a recent link, where the walk starts (a hint: stale only makes the walk longer).
 *   `fork:<size>:<root hex>`  a validly signed checkpoint refused as a fork of the cosigned one: the evidence.
 * Nothing is cached: every decision reads the chain's end again.
 */
import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from '../mongo';

export const TLOG_WITNESS_COLLECTION = 'tlog_witness';

export interface CosignedCheckpoint {
  size: number;
  /** Hex root hash. */
  root: string;
  /** The submitted checkpoint note, with the log's signatures, as verified. */
  note: string;
  cosigned_at: string;
}

export interface ForkEvidence {
  size: number;
  root: string;
  note: string;
  /** The checkpoint cosigned at that size. */
  cosigned_root: string;
  seen_at: string;
}

interface WitnessDocument extends Partial<CosignedCheckpoint>, Partial<ForkEvidence> {
  _id: string;
  after?: number;
}

export class WitnessStore {
  private readonly docs: Collection<WitnessDocument>;

  constructor(db: Db) {
    this.docs = db.collection<WitnessDocument>(TLOG_WITNESS_COLLECTION);
  }

  /** The last checkpoint cosigned for `origin`: from the hint along the chain to its end; null before the first. */
  async last(origin: string): Promise<CosignedCheckpoint | null> {
    let at = strip(await this.docs.findOne({ _id: `${origin} latest` }));
    for (;;) {
      const next = strip(await this.docs.findOne({ _id: `${origin} after:${at?.size ?? 0}` }));
      if (!next) return at;
      at = next;
    }
  }

  /**
   * Records `next` as the successor of `previous` (null: nothing cosigned yet). False when another replica
   * recorded a successor first: the caller reads the chain again.
   */
  async append(origin: string, previous: CosignedCheckpoint | null, next: CosignedCheckpoint): Promise<boolean> {
    const after = previous?.size ?? 0;
    if (next.size <= after) throw new Error('a cosigned checkpoint follows a smaller one');
    try {
      await this.docs.insertOne({ _id: `${origin} after:${after}`, after, ...next });
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
    await this.docs.replaceOne({ _id: `${origin} latest` }, { after, ...next }, { upsert: true });
    return true;
  }

  /** Keeps a refused fork (once per size and root). */
  async recordFork(origin: string, fork: ForkEvidence): Promise<void> {
    try {
      await this.docs.insertOne({ _id: `${origin} fork:${fork.size}:${fork.root}`, ...fork });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  /** The forks refused for `origin` at `size` with `root`, if recorded. */
  async fork(origin: string, size: number, root: string): Promise<ForkEvidence | null> {
    const doc = await this.docs.findOne({ _id: `${origin} fork:${size}:${root}` });
    if (!doc || doc.cosigned_root === undefined) return null;
    return {
      size: doc.size!,
      root: doc.root!,
      note: doc.note!,
      cosigned_root: doc.cosigned_root,
      seen_at: doc.seen_at!
    };
  }
}

function strip(doc: WitnessDocument | null): CosignedCheckpoint | null {
  if (!doc || doc.size === undefined || doc.root === undefined) return null;
  return { size: doc.size, root: doc.root, note: doc.note ?? '', cosigned_at: doc.cosigned_at ?? '' };
}
