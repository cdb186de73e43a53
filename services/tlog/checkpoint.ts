/**
 * GET /tlog/checkpoint: the ledger's C2SP checkpoint, signed by the hub's Ed25519 key, never inconsistent with one
 * signed before (store/tlog/checkpoints.ts keeps them).
 *
 * While the tree has not grown past the last signed checkpoint, that one is served (the hint: one `_id` read beside
 * the head). Before signing a larger size n after the last signed size m, the ledger must be an extension of it:
 *   - entry n's stored root is the head's root, and the root recomputed from the stored perfect subtrees (the hashes
 *     the tiles are made of) is the same;
 *   - entry m's stored root is the root signed at m;
 *   - the RFC 6962 consistency proof from m to n, computed from the stored subtrees, verifies between the two roots.
 * Any failure is a fork: nothing is signed, the caller gets 500 ledger_fork naming it, and it is logged. Two replicas
 * signing at once: one appends the successor of m, the other reads the chain again and serves the winner's
 * checkpoint once it has checked it the same way.
 *
 * What GET /tlog/checkpoint serves (served): with witnesses configured (services/tlog/cosigned.ts), the newest
 * checkpoint at most as large as the current one that k witnesses cosigned, with their cosignature lines after the
 * hub's signature (C2SP tlog-cosignature); before the first such one, the current checkpoint with the cosignatures
 * it has (none, or fewer than k). The current one is signed (and checked) first in every case, so a fork is refused
 * whatever is served.
 */
import { AppError } from '../../core/errors';
import {
  consistencyProof,
  EMPTY_ROOT,
  fromHex,
  rangeHash,
  toHex,
  verifyConsistency
} from '../../core/ledger/merkle.node';
import { checkpointBody, noteVerifierKey, signNote } from '../../core/tlog/signed-note.node';
import type { HubKeys } from '../../store/keys/hub-keys';
import type { Ledger } from '../../store/ledger/ledger';
import type { CheckpointStore, SignedCheckpoint } from '../../store/tlog/checkpoints';
import type { WitnessPolicy } from './cosigned';

export interface ForkLog {
  error(details: object, message: string): void;
}

/** Signers racing more often than this in one request: 503, retry. */
const SIGN_ATTEMPTS = 5;

export interface TlogCheckpoints {
  /** The C2SP verifier key (`<origin>+<key id>+<base64 key>`) of the checkpoints. */
  readonly verifierKey: string;
  readonly origin: string;
  /** The checkpoint signed now (signing one when the ledger grew), as the signed note's text. */
  current(log: ForkLog): Promise<string>;
  /** What GET /tlog/checkpoint serves: the newest witnessed checkpoint, with its cosignatures (see above). */
  served(log: ForkLog): Promise<string>;
}

export function createTlogCheckpoints(deps: {
  ledger: Ledger;
  checkpoints: CheckpointStore;
  keys: Pick<HubKeys, 'privateKey' | 'publicKeyBase64'>;
  origin: string;
  /** The witness policy (absent: no witness, the current checkpoint is served as signed). */
  witnesses?: WitnessPolicy;
}): TlogCheckpoints {
  const { ledger, checkpoints, origin } = deps;
  const publicKey = Buffer.from(deps.keys.publicKeyBase64, 'base64');
  // Ed25519 is deterministic: the same size and root always give the same note, so a stored checkpoint is served
  // re-signed (with the key the hub has now) rather than from its stored text.
  const sign = (size: number, root: string) =>
    signNote(checkpointBody(origin, size, root), origin, deps.keys.privateKey, publicKey);
  const perfect = (level: number, index: number) => ledger.perfectSubtree(level, index);

  const fork = (log: ForkLog, message: string, details: Record<string, unknown>) => {
    const fork = { origin, ...details };
    log.error({ fork }, `tlog: refusing to sign a checkpoint: ${message}`);
    return new AppError('ledger_fork', `The ledger does not extend the last signed checkpoint: ${message}`, { fork });
  };

  /** Throws ledger_fork unless the tree of `size` leaves with `root` extends `last` (see the module comment). */
  async function checkExtends(last: SignedCheckpoint | null, size: number, root: string, log: ForkLog) {
    const entry = await ledger.get(size);
    if (!entry || entry.root !== root)
      throw fork(log, `entry ${size} has root ${entry?.root ?? 'none'}, the head says ${root}`, { size, root });
    const recomputed = toHex(await rangeHash(0, size, perfect));
    if (recomputed !== root)
      throw fork(log, `the stored subtrees of the tree of ${size} hash to ${recomputed}, its stored root is ${root}`, {
        size,
        root,
        recomputed
      });
    if (!last) return;
    const before = await ledger.get(last.size);
    if (!before || before.root !== last.root)
      throw fork(
        log,
        `checkpoint ${last.size} was signed with root ${last.root}; the ledger now has ${before?.root ?? 'no entry'} there`,
        { signed_size: last.size, signed_root: last.root, stored_root: before?.root ?? null }
      );
    const proof = await consistencyProof(last.size, size, perfect);
    if (!verifyConsistency(last.size, size, fromHex(last.root), fromHex(root), proof))
      throw fork(log, `no consistency from the signed tree of ${last.size} to the tree of ${size}`, {
        signed_size: last.size,
        signed_root: last.root,
        size,
        root
      });
  }

  async function current(log: ForkLog): Promise<string> {
    const [head, hint] = await Promise.all([ledger.head(), checkpoints.hint()]);
    if (hint && head.size <= hint.size) {
      if (head.size === hint.size && head.root !== hint.root)
        throw fork(log, `checkpoint ${hint.size} was signed with root ${hint.root}; the head now says ${head.root}`, {
          signed_size: hint.size,
          signed_root: hint.root,
          head_root: head.root
        });
      return sign(hint.size, hint.root);
    }
    // The empty tree extends nothing and is extended by every tree: its checkpoint needs no record.
    if (head.size === 0) return sign(0, toHex(EMPTY_ROOT));
    for (let attempt = 0; attempt < SIGN_ATTEMPTS; attempt++) {
      const last = await checkpoints.last();
      if (last && last.size >= head.size) {
        // Another signer got further (or as far): its checkpoint must be one this ledger extends too.
        if (last.size === head.size && last.root !== head.root)
          throw fork(log, `checkpoint ${last.size} was signed with root ${last.root}; the head says ${head.root}`, {
            signed_size: last.size,
            signed_root: last.root,
            head_root: head.root
          });
        if (last.size > head.size) {
          const there = await ledger.get(last.size);
          if (there && there.root !== last.root)
            throw fork(
              log,
              `checkpoint ${last.size} was signed with root ${last.root}; entry ${last.size} has ${there.root}`,
              {
                signed_size: last.size,
                signed_root: last.root,
                stored_root: there.root
              }
            );
        }
        return sign(last.size, last.root);
      }
      await checkExtends(last, head.size, head.root, log);
      const note = sign(head.size, head.root);
      if (
        await checkpoints.append(last, {
          size: head.size,
          root: head.root,
          note,
          signed_at: new Date().toISOString()
        })
      )
        return note;
    }
    throw new AppError('unavailable', 'Checkpoint signers kept racing; retry', {}, { 'Retry-After': '1' });
  }

  return {
    origin,
    verifierKey: noteVerifierKey(origin, publicKey),
    current,
    async served(log) {
      const note = await current(log);
      const policy = deps.witnesses;
      if (!policy || policy.n === 0) return note;
      const [, sizeLine = '0', rootLine = ''] = note.split('\n', 3);
      const size = Number(sizeLine);
      const witnessed = await policy.witnessed(size);
      if (witnessed) return sign(witnessed.size, witnessed.root) + witnessed.lines.join('');
      const root = Buffer.from(rootLine, 'base64').toString('hex');
      return note + (await policy.cosignaturesOf(size, root)).join('');
    }
  };
}
