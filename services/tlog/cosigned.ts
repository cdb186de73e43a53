/**
 * The witness policy of this hub's log: k of the n witnesses (TLOG_WITNESSES and the peer registry's pinned witness
 * keys, as services/tlog/peer-witnesses.ts has them at the time; k is TLOG_WITNESS_QUORUM, by default all of them)
 * must cosign a checkpoint for it to count as witnessed. Reads what the witness workflows stored
 * (store/tlog/cosignatures.ts): only cosignatures checked with the key configured now count, and only of the
 * witnesses configured now (a witness removed from the registry no longer counts). Each call takes the sets once.
 *   witnessed(max)   the newest checkpoint of at most `max` entries with k or more cosignatures, with their lines;
 *   cosignaturesOf   the cosignature lines a given checkpoint has (fewer than k, before the first witnessed one),
 *                    of the witnesses whose progress lists it (what /api/status counts);
 *   progress()       the policy and each witness's progress, for /api/status.
 * n + (a few) `_id` reads each.
 */
import type { LogWitness } from '../../core/config/tlog.node';
import type { ConfiguredWitness } from './peer-witnesses';
import type { CosignatureStore, WitnessProgress } from '../../store/tlog/cosignatures';

export interface WitnessedCheckpoint {
  size: number;
  root: string;
  /** Its cosignature lines (each with its newline), in the order of the witnesses (TLOG_WITNESSES first). */
  lines: string[];
}

export interface WitnessPolicyStatus {
  k: number;
  n: number;
  /** The size of the newest checkpoint cosigned by k witnesses (null: none yet, or no witness configured). */
  witnessed_size: number | null;
  witnesses: (Omit<WitnessProgress, 'sizes'> & { url: string; peer_id: string | null })[];
}

export interface WitnessPolicy {
  /** The number of witnesses configured now. */
  readonly n: number;
  witnessed(maxSize: number): Promise<WitnessedCheckpoint | null>;
  cosignaturesOf(size: number, root: string): Promise<string[]>;
  progress(): Promise<WitnessPolicyStatus>;
}

export function createWitnessPolicy(deps: {
  store: CosignatureStore;
  /** The witnesses configured now (services/tlog/peer-witnesses.ts). */
  witnesses: () => ConfiguredWitness[];
  /** k for n witnesses. */
  quorum: (n: number) => number;
}): WitnessPolicy {
  const { store } = deps;
  const progresses = (witnesses: LogWitness[]) =>
    Promise.all(witnesses.map((w) => store.progress(w.name, w.verifierKey)));

  /** The cosignatures of the checkpoint of `size` (with `root` when given) checked with the configured keys. */
  async function linesAt(holders: LogWitness[], size: number, root?: string) {
    const found = await Promise.all(holders.map((w) => store.cosignature(w.name, size)));
    const valid = found.filter(
      (c, i) =>
        c !== null && c.size === size && c.verifier_key === holders[i]!.verifierKey && (!root || c.root === root)
    );
    // Every cosignature of one size is on the checkpoint this hub signed at that size: one root.
    const first = valid[0]?.root;
    return { root: first, lines: valid.filter((c) => c!.root === first).map((c) => c!.line) };
  }

  async function witnessedIn(
    witnesses: LogWitness[],
    all: WitnessProgress[],
    maxSize: number
  ): Promise<WitnessedCheckpoint | null> {
    const k = deps.quorum(witnesses.length);
    if (k === 0 || witnesses.length === 0) return null;
    const candidates = [...new Set(all.flatMap((p) => p.sizes))].filter((s) => s <= maxSize).sort((x, y) => y - x);
    for (const size of candidates) {
      const holders = witnesses.filter((_, i) => all[i]!.sizes.includes(size));
      if (holders.length < k) continue;
      const { root, lines } = await linesAt(holders, size);
      if (root && lines.length >= k) return { size, root, lines };
    }
    return null;
  }

  return {
    get n() {
      return deps.witnesses().length;
    },
    async witnessed(maxSize) {
      const witnesses = deps.witnesses();
      return witnessedIn(witnesses, await progresses(witnesses), maxSize);
    },
    async cosignaturesOf(size, root) {
      const witnesses = deps.witnesses();
      if (witnesses.length === 0) return [];
      // Only the witnesses whose progress lists the size: a cosignature is stored a moment before the progress that
      // lists it, and a checkpoint served with it must not precede /api/status saying it was cosigned.
      const all = await progresses(witnesses);
      const holders = witnesses.filter((_, i) => all[i]!.sizes.includes(size));
      if (holders.length === 0) return [];
      return (await linesAt(holders, size, root)).lines;
    },
    async progress() {
      const witnesses = deps.witnesses();
      const all = await progresses(witnesses);
      const best = await witnessedIn(witnesses, all, Number.MAX_SAFE_INTEGER);
      return {
        k: deps.quorum(witnesses.length),
        n: witnesses.length,
        witnessed_size: best?.size ?? null,
        witnesses: all.map(({ sizes, ...p }, i) => {
          void sizes;
          return { ...p, url: witnesses[i]!.url, peer_id: witnesses[i]!.peer_id };
        })
      };
    }
  };
}
