/**
 * The activity of witness/<queue>/<name> (workflows/tlog/witness.ts): one submission of the hub's newest signed
 * checkpoint to one witness, as C2SP tlog-witness requires (core/tlog/submission.node.ts for the wire format).
 *
 * The checkpoint is the last one the API signed (store/tlog/checkpoints.ts keeps its signed note; the worker holds
 * no key and signs nothing). `old` is the size the witness last cosigned for this log, as far as the hub knows;
 * the consistency proof from it is computed from the ledger's stored subtrees. A 409 names the witness's size: the
 * request is sent again from it (at most MAX_CONFLICTS times in one round). A 200 counts only with a cosignature of
 * the configured key that verifies over the checkpoint; it is then stored (store/tlog/cosignatures.ts). Refusals
 * (403, 404, 422, other 4xx, a cosignature that does not verify) and a witness that cannot be reached (no answer in
 * REQUEST_TIMEOUT_MS, 5xx) are outcomes for the workflow's backoff, recorded with their reason; only this hub's own
 * failures (MongoDB) throw, for Temporal's retries.
 */
import { consistencyProof } from '../../core/ledger/merkle.node';
import { addCheckpointBody, parseConflictSize, verifiedCosignature } from '../../core/tlog/submission.node';
import type { TlogWitnessSettings, WitnessRound } from '../../contracts/tlog/witness.contract';
import type { Ledger } from '../../store/ledger/ledger';
import { CheckpointStore } from '../../store/tlog/checkpoints';
import { CosignatureStore, type WitnessProgress } from '../../store/tlog/cosignatures';
import type { Db } from 'mongodb';

const REQUEST_TIMEOUT_MS = 10_000;
/** 409s followed in one round (the witness's size moving under us, e.g. another log instance of the same origin). */
const MAX_CONFLICTS = 3;
/** At most this much of a refusal's body is kept as its reason. */
const REASON_BYTES = 300;

export function createTlogWitnessActivities(deps: { db: Db; ledger: Ledger }) {
  const perfect = (level: number, index: number) => deps.ledger.perfectSubtree(level, index);

  return {
    async submitToWitness(input: TlogWitnessSettings): Promise<WitnessRound> {
      const checkpoints = new CheckpointStore(deps.db, input.origin);
      const store = new CosignatureStore(deps.db, input.origin);
      let progress = await store.progress(input.name, input.verifier_key);
      const last = await checkpoints.last();
      const round = (outcome: WitnessRound['outcome'], p: WitnessProgress): WitnessRound => ({
        outcome,
        hub_size: last?.size ?? 0,
        cosigned_size: p.cosigned_size,
        reason: p.reason
      });
      if (!last) return round('idle', progress);
      if (progress.sizes.includes(last.size)) return round('idle', progress);

      // Where the witness is: what it told us last, else what it cosigned for us, else nothing (0).
      let old = progress.witness_size ?? progress.cosigned_size;
      for (let conflicts = 0; ; conflicts++) {
        if (old > last.size) {
          progress = await store.recordOutcome(progress, {
            state: 'refused',
            witness_size: old,
            reason: `the witness has cosigned a checkpoint of ${old} entries for this log, more than the ${last.size} this hub signed last (another instance of this log, or a ledger restored from an older backup)`
          });
          return round('refused', progress);
        }
        const proof = old === 0 || old === last.size ? [] : await consistencyProof(old, last.size, perfect);
        let res: Response;
        let text: string;
        try {
          res = await fetch(`${input.url}/add-checkpoint`, {
            method: 'POST',
            headers: { 'content-type': 'text/plain' },
            body: addCheckpointBody(old, proof, last.note),
            signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
          });
          text = await res.text();
        } catch (err) {
          progress = await store.recordOutcome(progress, {
            state: 'unreachable',
            reason: `no answer from ${input.url}/add-checkpoint: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}`
          });
          return round('unreachable', progress);
        }
        if (res.status === 409) {
          const size = parseConflictSize(text);
          if (size === null || conflicts >= MAX_CONFLICTS) {
            progress = await store.recordOutcome(progress, {
              state: 'refused',
              ...(size !== null ? { witness_size: size } : {}),
              reason: size === null ? `409 with a body that is not a size: ${clip(text)}` : `409 again (${size})`
            });
            return round('refused', progress);
          }
          old = size;
          continue;
        }
        if (res.status === 200) {
          const verified = verifiedCosignature(last.note, text, input.verifier_key);
          if ('refused' in verified) {
            progress = await store.recordOutcome(progress, {
              state: 'refused',
              witness_size: last.size,
              reason: verified.refused
            });
            return round('refused', progress);
          }
          progress = await store.recordCosignature(progress, {
            size: last.size,
            root: last.root,
            line: verified.line,
            timestamp: verified.timestamp,
            verifier_key: input.verifier_key,
            stored_at: new Date().toISOString()
          });
          return round('cosigned', progress);
        }
        const refused = res.status >= 400 && res.status < 500;
        progress = await store.recordOutcome(progress, {
          state: refused ? 'refused' : 'unreachable',
          reason: `${res.status} from ${input.url}/add-checkpoint: ${clip(text)}`
        });
        return round(refused ? 'refused' : 'unreachable', progress);
      }
    }
  };
}

function clip(text: string): string {
  const t = text.trim();
  return t.length > REASON_BYTES ? `${t.slice(0, REASON_BYTES)}…` : t;
}
