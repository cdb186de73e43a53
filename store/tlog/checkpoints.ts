/**
 * The checkpoints the hub has signed (C2SP tlog-checkpoint), kept so it never signs two that are not consistent.
 *
 * Collection `tlog_checkpoints`, every read and write by `_id` (each prefixed with the origin, `<origin> `: another
 * origin is another log):
 *   `after:<m>`  the checkpoint signed after the one of size m (`after:0`: the first), inserted once and never
 *                updated: the unique `_id` makes each insert a compare-and-set (of two replicas signing a successor
 *                of the same checkpoint, one insert wins, the other is refused as a duplicate), so the signed
 *                checkpoints form one chain, each checked against the one before it.
 *   `latest`     a copy of a recent link (a hint): served as it is while the tree has not grown, and where the walk
 *                along the chain starts. Written after each link; a stale hint (two replicas writing it, FerretDB's
 *                read-modify-write update) only makes the next walk one lookup longer.
 */
import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from '../mongo';

export const TLOG_CHECKPOINTS_COLLECTION = 'tlog_checkpoints';

export interface SignedCheckpoint {
  size: number;
  /** Hex root hash of the tree of `size` entries. */
  root: string;
  /** The whole signed note, as served. */
  note: string;
  signed_at: string;
}

interface CheckpointDocument extends SignedCheckpoint {
  _id: string;
  /** The size of the checkpoint this one follows (0 for the first). */
  after: number;
}

/** Links followed at most in one walk (each is one `_id` lookup); past it the walk goes on at the next call. */
const MAX_WALK = 64;

export class CheckpointStore {
  private readonly docs: Collection<CheckpointDocument>;

  constructor(
    db: Db,
    private readonly origin: string
  ) {
    this.docs = db.collection<CheckpointDocument>(TLOG_CHECKPOINTS_COLLECTION);
  }

  private id(name: string): string {
    return `${this.origin} ${name}`;
  }

  /** The hint: a recently signed checkpoint (null before the first). One `_id` read. */
  async hint(): Promise<SignedCheckpoint | null> {
    return strip(await this.docs.findOne({ _id: this.id('latest') }));
  }

  /** The last signed checkpoint: from the hint (or the start) along the chain to its end; null before the first. */
  async last(): Promise<SignedCheckpoint | null> {
    let at = await this.hint();
    for (let i = 0; i < MAX_WALK; i++) {
      const next = strip(await this.docs.findOne({ _id: this.id(`after:${at?.size ?? 0}`) }));
      if (!next) return at;
      at = next;
    }
    return at;
  }

  /**
   * Records `next` as the successor of `previous` (null: the first checkpoint). False when another signer recorded
   * a successor first: the caller reads the chain again.
   */
  async append(previous: SignedCheckpoint | null, next: SignedCheckpoint): Promise<boolean> {
    const after = previous?.size ?? 0;
    try {
      await this.docs.insertOne({ _id: this.id(`after:${after}`), after, ...next });
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
    await this.docs.replaceOne({ _id: this.id('latest') }, { after, ...next }, { upsert: true });
    return true;
  }
}

function strip(doc: CheckpointDocument | null): SignedCheckpoint | null {
  if (!doc) return null;
  return { size: doc.size, root: doc.root, note: doc.note, signed_at: doc.signed_at };
}
