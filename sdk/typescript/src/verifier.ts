/**
 * Trust but verify: every acknowledged write is proven included in a checkpoint the SDK checked itself. A round
 * fetches `GET /tlog/checkpoint`, checks its signature against the pinned verifier key, checks it is consistent with
 * the last checkpoint this node accepted (`GET /api/proof/consistency`, RFC 6962, recomputed here; the last one is
 * kept in a file, so a restart does not forget it), then asks `GET /api/proof/inclusion` for each acknowledged write
 * the checkpoint covers and recomputes the entry's leaf hash from what the node wrote and the path to the signed
 * root. With witnesses pinned, a checkpoint counts only with valid cosignatures of enough of them (k of n). Any
 * mismatch is a VerificationError for the application; the checkpoint is then not adopted and the write stays
 * unverified.
 */
import fs from 'node:fs';
import path from 'node:path';
import { canonicalJson, leafBytes } from './canonical-json';
import {
  parseVerifierKey,
  parseWitnessKey,
  verifiedCosigners,
  verifyCheckpoint,
  VerificationError,
  type Checkpoint,
  type VerifierKey
} from './checkpoint';
import { syncDirectory } from './credentials';
import { HubError, HubHttp } from './http';
import type { Logger } from './logger';
import { hashFromHex, leafHash, verifyConsistency, verifyInclusion } from './merkle';
import type { Outbox, OutboxRecord } from './outbox';
import { Wake } from './wake';

export interface VerifierOptions {
  http: HubHttp;
  outbox: Outbox;
  did: string;
  /** The checkpoint verifier key to pin; without it the hub's is fetched once and pinned in `keyFile`. */
  verifierKey?: string;
  keyFile: string;
  checkpointFile: string;
  /**
   * Witness cosignature verifier keys (`<name>+<id>+<base64 of 0x04 ‖ key>`, each witness's published key): a
   * checkpoint is adopted only with valid cosignatures of `witnessQuorum` of them (default: all). Until one is, the
   * writes wait unverified; a forged cosignature is a `checkpoint_cosignature` error.
   */
  witnesses?: string[];
  witnessQuorum?: number;
  /** Between rounds while writes wait for proof (default 10 s). */
  intervalMs?: number;
  /** Inclusion proofs fetched per round at most (default 64). */
  proofsPerRound?: number;
  log: Logger;
  onVerified(record: OutboxRecord, checkpoint: Checkpoint): void;
  onCheckpoint(checkpoint: Checkpoint): void;
  onError(err: Error): void;
}

export class LedgerVerifier {
  private readonly wake = new Wake();
  private key: VerifierKey | undefined;
  private readonly witnesses: VerifierKey[];
  private readonly quorum: number;

  constructor(private readonly options: VerifierOptions) {
    if (options.verifierKey) this.key = parseVerifierKey(options.verifierKey);
    this.witnesses = (options.witnesses ?? []).map(parseWitnessKey);
    this.quorum = options.witnessQuorum ?? this.witnesses.length;
    if (!Number.isInteger(this.quorum) || this.quorum < 0 || this.quorum > this.witnesses.length)
      throw new TypeError(`the witness quorum must be 0 to the ${this.witnesses.length} witnesses given`);
  }

  kick(): void {
    this.wake.kick();
  }

  /** The last checkpoint this node accepted, if any. */
  lastCheckpoint(): Checkpoint | undefined {
    if (!fs.existsSync(this.options.checkpointFile)) return undefined;
    const text = fs.readFileSync(this.options.checkpointFile, 'utf8');
    return this.key ? verifyCheckpoint(text, this.key) : undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    const interval = this.options.intervalMs ?? 10_000;
    while (!signal.aborted) {
      if (this.options.outbox.counts().unverified > 0) {
        try {
          await this.round(signal);
        } catch (err) {
          if (signal.aborted) break;
          if (err instanceof VerificationError) this.options.onError(err);
          else this.options.log.warn('verification round failed', { error: (err as Error).message });
        }
      }
      await this.wake.wait(interval, signal);
    }
  }

  /** One round: the checkpoint, its consistency with the last one, and inclusion proofs under it. */
  async round(signal: AbortSignal): Promise<{ checkpoint: Checkpoint; proven: number }> {
    const checkpoint = await this.checkpoint(signal);
    const { outbox, log } = this.options;
    const due = outbox.take(
      'unverified',
      this.options.proofsPerRound ?? 64,
      (id) => outbox.get(id)!.seq! > checkpoint.size
    );
    let proven = 0;
    for (const r of due) {
      if (signal.aborted) break;
      try {
        await this.proveInclusion(r, checkpoint, signal);
        outbox.markVerified(r.id, checkpoint.size);
        proven++;
        this.options.onVerified({ ...r, verified_size: checkpoint.size }, checkpoint);
      } catch (err) {
        if (!(err instanceof VerificationError)) throw err;
        this.options.onError(err);
      }
    }
    if (proven > 0) log.debug('writes proven included', { proven, tree_size: checkpoint.size });
    return { checkpoint, proven };
  }

  /** The hub's current checkpoint, verified and proven consistent with the last one accepted (then adopted). */
  async checkpoint(signal: AbortSignal): Promise<Checkpoint> {
    const { http } = this.options;
    const key = await this.pinnedKey(signal);
    const res = await http.request('GET', '/tlog/checkpoint', { signal });
    if (res.status !== 200) throw new HubError(res.status, `GET /tlog/checkpoint answered ${res.status}`, res.body);
    const next = verifyCheckpoint(res.text, key);
    const cosigners = verifiedCosigners(res.text, this.witnesses);
    if (cosigners.length < this.quorum)
      // Not yet witnessed (the hub serves the newest checkpoint with enough cosignatures once it has one): the
      // writes wait for a later round. An error for the round, not a verification failure.
      throw new HubError(
        res.status,
        `the checkpoint of ${next.size} carries ${cosigners.length} of the ${this.quorum} witness cosignatures required`,
        { cosigners }
      );
    const last = this.lastCheckpoint();
    if (last) {
      if (next.size < last.size)
        throw new VerificationError('checkpoint_rollback', `the hub's tree shrank from ${last.size} to ${next.size}`, {
          last_size: last.size,
          size: next.size
        });
      if (next.size === last.size && !next.root.equals(last.root))
        throw new VerificationError('checkpoint_fork', `two different roots for a tree of ${next.size}`, {
          size: next.size
        });
      if (next.size > last.size && last.size > 0) {
        const proof = await http.request('GET', `/api/proof/consistency?first=${last.size}&second=${next.size}`, {
          signal
        });
        if (proof.status !== 200) throw new HubError(proof.status, 'no consistency proof', proof.body);
        const hashes = hexList(proof.body?.proof);
        if (!hashes || !verifyConsistency(last.size, next.size, last.root, next.root, hashes))
          throw new VerificationError(
            'consistency',
            `the checkpoint of ${next.size} is not consistent with the one of ${last.size}`,
            { first: last.size, second: next.size }
          );
      }
    }
    if (!last || next.size !== last.size) {
      writeAtomically(this.options.checkpointFile, next.text);
      this.options.onCheckpoint(next);
    }
    return next;
  }

  private async proveInclusion(r: OutboxRecord, cp: Checkpoint, signal: AbortSignal): Promise<void> {
    const res = await this.options.http.request('GET', `/api/proof/inclusion?seq=${r.seq}&tree_size=${cp.size}`, {
      signal
    });
    if (res.status !== 200) throw new HubError(res.status, `no inclusion proof for seq ${r.seq}`, res.body);
    const entry = res.body?.entry;
    const mismatch = (what: string) =>
      new VerificationError('entry_mismatch', `entry ${r.seq} is not the write ${r.id}: ${what}`, {
        id: r.id,
        seq: r.seq
      });
    if (!entry || entry.seq !== r.seq || res.body.leaf_index !== r.seq! - 1) throw mismatch('another seq');
    if (entry.kind !== 'truth' || entry.key !== r.key) throw mismatch('another key');
    if (entry.did !== this.options.did) throw mismatch('another DID');
    if ((entry.truth_type ?? null) !== r.truth_type) throw mismatch('another truth type');
    if (canonicalJson(entry.value) !== canonicalJson(r.value)) throw mismatch('another value');
    if (typeof entry.event_id !== 'string' || typeof entry.created_at !== 'string') throw mismatch('fields missing');
    // The leaf is recomputed from what this node wrote, never taken from the answer.
    const leaf = leafHash(leafBytes({ ...entry, value: r.value, did: this.options.did, truth_type: r.truth_type }));
    const path = hexList(res.body.audit_path);
    if (!path || !verifyInclusion(r.seq! - 1, cp.size, leaf, path, cp.root))
      throw new VerificationError('inclusion', `entry ${r.seq} is not proven in the checkpoint of ${cp.size}`, {
        id: r.id,
        seq: r.seq,
        tree_size: cp.size
      });
  }

  /** The pinned key; with none given, the hub's own, fetched once and pinned (trust on first use). */
  private async pinnedKey(signal: AbortSignal): Promise<VerifierKey> {
    if (this.key) return this.key;
    const { keyFile, http, log } = this.options;
    if (fs.existsSync(keyFile)) {
      this.key = parseVerifierKey(fs.readFileSync(keyFile, 'utf8'));
      return this.key;
    }
    const res = await http.request('GET', '/tlog/verifier-key', { signal });
    if (res.status !== 200) throw new HubError(res.status, 'no verifier key', res.body);
    this.key = parseVerifierKey(res.text);
    writeAtomically(keyFile, `${this.key.text}\n`);
    log.warn('no verifier key given: pinned the one the hub served now (trust on first use)', { key: this.key.text });
    return this.key;
  }
}

function hexList(value: unknown): Buffer[] | null {
  if (!Array.isArray(value)) return null;
  const out: Buffer[] = [];
  for (const v of value) {
    const h = hashFromHex(v);
    if (!h) return null;
    out.push(h);
  }
  return out;
}

function writeAtomically(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w', 0o600);
  try {
    fs.writeSync(fd, text);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  syncDirectory(path.dirname(file));
}
