/**
 * The cosignatures this hub's log collected from its witnesses (TLOG_WITNESSES), and each witness's progress, kept
 * beside the checkpoints (store/tlog/checkpoints.ts) for GET /tlog/checkpoint and /api/status.
 *
 * Collection `tlog_cosignatures`, every read and write by `_id` (FerretDB serves anything else by reading the whole
 * collection), each prefixed with the log's origin (`<origin> `):
 *   `state:<witness name>`          the witness's progress: what it last cosigned (verified), what it said it has,
 *                                   the outcome of the last submission, and the sizes it has cosignatures for;
 *   `cosig:<witness name>:<size>`   one verified cosignature line of the checkpoint of that size.
 * Each witness's documents are written by its one workflow (witness/<queue>/<name>), one activity at a time, so a
 * read-modify-write of its state is never raced. The cosignature is written before the state that lists its size,
 * and a size leaves the list before its document is deleted: a reader never counts a cosignature it cannot read
 * (one deleted between its two reads is skipped). A witness keeps the cosignatures of its last KEPT_SIZES sizes.
 */
import type { Collection, Db } from 'mongodb';

export const TLOG_COSIGNATURES_COLLECTION = 'tlog_cosignatures';

/** The cosignatures of this many of a witness's last cosigned sizes are kept (for a quorum of witnesses lagging). */
export const KEPT_SIZES = 64;

export type WitnessOutcome = 'pending' | 'cosigned' | 'unreachable' | 'refused';

export interface WitnessProgress {
  name: string;
  /** The verifier key its cosignatures were checked with (a key configured since then counts none of them). */
  verifier_key: string;
  state: WitnessOutcome;
  /** The largest checkpoint size it cosigned with a cosignature that verified (0: none yet). */
  cosigned_size: number;
  /** The size the witness says it last cosigned for this log (its answer, or its 409), null before any answer. */
  witness_size: number | null;
  /** Why the last submission did not give a verified cosignature (null after one that did). */
  reason: string | null;
  attempted_at: string | null;
  cosigned_at: string | null;
  /** The sizes whose cosignature documents exist, ascending (at most KEPT_SIZES). */
  sizes: number[];
}

export interface Cosignature {
  size: number;
  /** Hex root of the checkpoint cosigned. */
  root: string;
  /** The cosignature line, with its newline. */
  line: string;
  /** The cosignature's timestamp (unix seconds). */
  timestamp: number;
  verifier_key: string;
  stored_at: string;
}

type Doc = { _id: string } & Partial<WitnessProgress> & Partial<Cosignature>;

export class CosignatureStore {
  private readonly docs: Collection<Doc>;

  constructor(
    db: Db,
    private readonly origin: string
  ) {
    this.docs = db.collection<Doc>(TLOG_COSIGNATURES_COLLECTION);
  }

  private stateId = (name: string) => `${this.origin} state:${name}`;
  private cosigId = (name: string, size: number) => `${this.origin} cosig:${name}:${size}`;

  /** A witness's progress (a fresh one before its first submission). */
  async progress(name: string, verifierKey: string): Promise<WitnessProgress> {
    const doc = await this.docs.findOne({ _id: this.stateId(name) });
    if (!doc || doc.state === undefined)
      return {
        name,
        verifier_key: verifierKey,
        state: 'pending',
        cosigned_size: 0,
        witness_size: null,
        reason: null,
        attempted_at: null,
        cosigned_at: null,
        sizes: []
      };
    const { _id, ...rest } = doc;
    void _id;
    const progress = rest as WitnessProgress;
    // Cosignatures checked with another key than the one configured now count for nothing.
    if (progress.verifier_key !== verifierKey)
      return { ...progress, verifier_key: verifierKey, cosigned_size: 0, sizes: [] };
    return progress;
  }

  /** Records the outcome of a submission that gave no verified cosignature. */
  async recordOutcome(
    previous: WitnessProgress,
    outcome: { state: Exclude<WitnessOutcome, 'cosigned' | 'pending'>; reason: string; witness_size?: number }
  ): Promise<WitnessProgress> {
    const next: WitnessProgress = {
      ...previous,
      state: outcome.state,
      reason: outcome.reason,
      witness_size: outcome.witness_size ?? previous.witness_size,
      attempted_at: new Date().toISOString()
    };
    await this.docs.replaceOne({ _id: this.stateId(previous.name) }, next, { upsert: true });
    return next;
  }

  /** Stores a verified cosignature, then the witness's progress listing it; prunes the oldest past KEPT_SIZES. */
  async recordCosignature(previous: WitnessProgress, cosignature: Cosignature): Promise<WitnessProgress> {
    const { name } = previous;
    await this.docs.replaceOne({ _id: this.cosigId(name, cosignature.size) }, cosignature, { upsert: true });
    const all = [...new Set([...previous.sizes, cosignature.size])].sort((x, y) => x - y);
    const kept = all.slice(-KEPT_SIZES);
    const at = new Date().toISOString();
    const next: WitnessProgress = {
      ...previous,
      verifier_key: cosignature.verifier_key,
      state: 'cosigned',
      reason: null,
      cosigned_size: Math.max(previous.cosigned_size, cosignature.size),
      witness_size: cosignature.size,
      attempted_at: at,
      cosigned_at: at,
      sizes: kept
    };
    await this.docs.replaceOne({ _id: this.stateId(name) }, next, { upsert: true });
    for (const size of all.slice(0, all.length - kept.length))
      await this.docs.deleteOne({ _id: this.cosigId(name, size) });
    return next;
  }

  /** The cosignature of `name` on the checkpoint of `size`, if kept. */
  async cosignature(name: string, size: number): Promise<Cosignature | null> {
    const doc = await this.docs.findOne({ _id: this.cosigId(name, size) });
    if (!doc || doc.line === undefined) return null;
    return {
      size: doc.size!,
      root: doc.root!,
      line: doc.line,
      timestamp: doc.timestamp!,
      verifier_key: doc.verifier_key!,
      stored_at: doc.stored_at!
    };
  }
}
