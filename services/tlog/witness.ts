/**
 * The hub as a C2SP tlog-witness (c2sp.org/tlog-witness): add-checkpoint for the logs it is configured to witness
 * (TLOG_WITNESSED_LOGS and the peer registry's pinned checkpoint keys: services/tlog/peer-witnesses.ts), answered with a cosignature/v1 (c2sp.org/tlog-cosignature) by the hub's Ed25519 key under
 * the witness name (TLOG_WITNESS_NAME).
 *
 * In the spec's order: a malformed body is 400; an origin not witnessed 404; no valid signature of a trusted key of
 * that origin (or one that fails) 403; an old size above the checkpoint's 400; an old size other than the last
 * cosigned size (read from MongoDB for every request: store/tlog/witness.ts) 409 with that size; a consistency proof
 * that does not verify from the last cosigned root 422 checkpoint_inconsistent; the same size with another root 422
 * checkpoint_fork (logged and kept as evidence). A larger checkpoint is recorded as the unique successor of the last
 * one before it is cosigned; of two replicas racing, the loser reads the chain again and answers 409.
 */
import { AppError } from '../../core/errors';
import { EMPTY_ROOT, verifyConsistency } from '../../core/ledger/merkle.node';
import { AddCheckpointSyntaxError, parseAddCheckpoint } from '../../core/tlog/add-checkpoint.node';
import {
  checkNoteSignatures,
  cosign,
  cosignatureVerifierKey,
  parseVerifierKey,
  type Ed25519VerifierKey
} from '../../core/tlog/cosignature.node';
import type { WitnessedLog } from '../../core/config/tlog.node';
import type { HubKeys } from '../../store/keys/hub-keys';
import type { CosignedCheckpoint, WitnessStore } from '../../store/tlog/witness';

export interface WitnessLog {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

export type AddCheckpointResult = { cosigned: true; lines: string } | { cosigned: false; latestSize: number };

export interface TlogWitness {
  readonly name: string;
  /** The witness's cosignature verifier key: `<name>+<key id>+<base64 of 0x04 || Ed25519 key>`. */
  readonly verifierKey: string;
  /** The origins witnessed now. */
  readonly origins: string[];
  addCheckpoint(body: string, log: WitnessLog): Promise<AddCheckpointResult>;
}

/** Racing replicas more often than this in one request: 503, retry. */
const APPEND_ATTEMPTS = 5;

export function createTlogWitness(deps: {
  store: WitnessStore;
  keys: Pick<HubKeys, 'privateKey' | 'publicKeyBase64'>;
  name: string;
  /** The logs witnessed, read at every request (they change at run time with the peer registry). */
  logs: () => WitnessedLog[];
  now?: () => Date;
}): TlogWitness {
  const { store, name } = deps;
  const now = deps.now ?? (() => new Date());
  const publicKey = Buffer.from(deps.keys.publicKeyBase64, 'base64');
  const parsed = new Map<string, Ed25519VerifierKey | null>();
  const parse = (key: string) => {
    if (!parsed.has(key)) parsed.set(key, parseVerifierKey(key));
    return parsed.get(key) ?? null;
  };
  /** The trusted keys of `origin` now; undefined when it is not witnessed. */
  const trustedKeys = (origin: string) =>
    deps
      .logs()
      .find((l) => l.origin === origin)
      ?.verifierKeys.map(parse)
      .filter((k) => k !== null);

  return {
    name,
    verifierKey: cosignatureVerifierKey(name, publicKey),
    get origins() {
      return deps.logs().map((l) => l.origin);
    },
    async addCheckpoint(body, log) {
      let request;
      try {
        request = parseAddCheckpoint(body);
      } catch (err) {
        if (err instanceof AddCheckpointSyntaxError) throw new AppError('invalid_request', err.message);
        throw err;
      }
      const { oldSize, proof, note, checkpoint } = request;
      const { origin, size } = checkpoint;
      const root = checkpoint.root.toString('hex');
      const keys = trustedKeys(origin);
      if (!keys) throw new AppError('not_found', 'This hub does not witness that log', { origin });
      const signatures = checkNoteSignatures(note, keys);
      if (signatures !== 'ok')
        throw new AppError(
          'forbidden',
          signatures === 'bad'
            ? "A signature of the log's key does not verify"
            : "The checkpoint has no signature of the log's key",
          { origin }
        );
      if (oldSize > size)
        throw new AppError('invalid_request', 'The old size is larger than the checkpoint size', {
          old: oldSize,
          size
        });
      const context = { origin, old: oldSize, size, root };

      for (let attempt = 0; attempt < APPEND_ATTEMPTS; attempt++) {
        const last = await store.last(origin);
        const lastSize = last?.size ?? 0;
        const lastRoot = last ? Buffer.from(last.root, 'hex') : EMPTY_ROOT;
        if (oldSize !== lastSize) return { cosigned: false, latestSize: lastSize };
        if (size === 0 && !checkpoint.root.equals(EMPTY_ROOT))
          throw inconsistent(log, context, 'A checkpoint of size 0 must have the root hash of the empty tree');
        if (oldSize === 0 && proof.length > 0)
          throw inconsistent(log, context, 'The consistency proof from the empty tree must be empty');
        if (size === oldSize) {
          if (!checkpoint.root.equals(lastRoot)) throw await forked(log, context, last!, body);
        } else if (!verifyConsistency(oldSize, size, lastRoot, checkpoint.root, proof)) {
          throw inconsistent(log, context, `The consistency proof from ${oldSize} to ${size} does not verify`);
        } else {
          const next: CosignedCheckpoint = {
            size,
            root,
            note: body.slice(body.indexOf('\n\n') + 2),
            cosigned_at: now().toISOString()
          };
          if (!(await store.append(origin, last, next))) continue;
        }
        const timestamp = Math.floor(now().getTime() / 1000);
        return { cosigned: true, lines: cosign(note.text, timestamp, name, deps.keys.privateKey, publicKey) };
      }
      throw new AppError('unavailable', 'Witness replicas kept racing; retry', {}, { 'Retry-After': '1' });
    }
  };

  function inconsistent(log: WitnessLog, context: object, message: string): AppError {
    log.warn({ witness: context }, `tlog witness: refusing to cosign: ${message}`);
    return new AppError('checkpoint_inconsistent', message, { ...context });
  }

  async function forked(
    log: WitnessLog,
    context: { origin: string; size: number; root: string },
    last: CosignedCheckpoint,
    body: string
  ) {
    const cosignedRoot = last.root;
    log.error(
      { witness: { ...context, cosigned_root: cosignedRoot } },
      `tlog witness: refusing a fork of ${context.origin}: size ${context.size} was cosigned with another root`
    );
    await store.recordFork(context.origin, {
      size: context.size,
      root: context.root,
      note: body.slice(body.indexOf('\n\n') + 2),
      cosigned_root: cosignedRoot,
      seen_at: now().toISOString()
    });
    return new AppError(
      'checkpoint_fork',
      `A checkpoint of size ${context.size} with root ${context.root} was cosigned with root ${cosignedRoot}: a fork`,
      { ...context, cosigned_root: cosignedRoot }
    );
  }
}
