/**
 * Which logs this hub witnesses and which witnesses its own log has, in every API process: the settings
 * (TLOG_WITNESSED_LOGS, TLOG_WITNESSES, TLOG_WITNESS_QUORUM) together with the keys administrators pinned in the peer
 * registry (POST /admin/peers, store/federation/peers.ts). add-checkpoint (services/tlog/witness.ts), the witness
 * policy served by GET /tlog/checkpoint and /api/status (services/tlog/cosigned.ts) and the checkpoint publisher's
 * signals (services/tlog/publisher.ts) all read the sets from here, synchronously, from a copy of the registry that
 * is read whole again every REFRESH_MS (peers are few) and at once by the process that changed it. Replicas
 * therefore agree within REFRESH_MS (plus one read) of a change. A failed read keeps the last copy (logged at most
 * once a minute): a database outage never empties the sets, which would retire every peer's witness workflow.
 *
 * The union: the settings first; a peer's checkpoint key adds a key to its origin (keys of one origin are all
 * trusted, as in the setting); a peer's witness key adds a witness at the peer's log prefix, unless a witness of
 * that name is there already (the registry refuses such a pin: services/federation/peers.ts; this is the tie-break
 * for a pin made meanwhile). This hub's own origin and witness name are never taken from the registry.
 * k is TLOG_WITNESS_QUORUM counted over the union, or, unset, all the witnesses of the union at the time.
 */
import type { Logger } from 'pino';
import {
  checkpointKeyProblem,
  submissionPrefixProblem,
  witnessKeyProblem,
  type LogWitness,
  type WitnessedLog
} from '../../core/config/tlog.node';
import type { PeerDocument } from '../../store/federation/peers';

/** Registry changes reach every API process within this (plus the time of one read). */
export const PEER_WITNESSES_REFRESH_MS = 5_000;
const WARN_EVERY_MS = 60_000;

/** A witness of this hub's log, with where it is configured. */
export interface ConfiguredWitness extends LogWitness {
  /** The peer whose pinned witness key this is; null: TLOG_WITNESSES. */
  peer_id: string | null;
}

export interface TlogSettingsSets {
  witnessedLogs: WitnessedLog[];
  witnesses: LogWitness[];
  /** TLOG_WITNESS_QUORUM; null: all the witnesses configured at the time. */
  quorum: number | null;
}

export interface TlogIdentity {
  /** This hub's checkpoint origin and witness name: never witnessed, never a witness of itself. */
  origin: string;
  witnessName: string;
}

export interface TlogSets {
  witnessedLogs: WitnessedLog[];
  witnesses: ConfiguredWitness[];
}

/** The union of the settings and the registry's pins (see the module comment). Pure. */
export function mergeTlogSets(settings: TlogSettingsSets, peers: PeerDocument[], self: TlogIdentity): TlogSets {
  const logs = new Map(settings.witnessedLogs.map((l) => [l.origin, [...l.verifierKeys]]));
  const witnesses: ConfiguredWitness[] = settings.witnesses.map((w) => ({ ...w, peer_id: null }));
  for (const peer of [...peers].sort((x, y) => (x._id < y._id ? -1 : x._id > y._id ? 1 : 0))) {
    const pinned = peer.tlog;
    if (!pinned) continue;
    const logKey = pinned.verifier_key;
    if (logKey && checkpointKeyProblem(logKey) === null) {
      const origin = logKey.split('+')[0]!;
      const keys = logs.get(origin) ?? [];
      if (origin !== self.origin && !keys.includes(logKey)) logs.set(origin, [...keys, logKey]);
    }
    const witnessKey = pinned.witness_key;
    if (witnessKey && witnessKeyProblem(witnessKey) === null && submissionPrefixProblem(pinned.url) === null) {
      const name = witnessKey.split('+')[0]!;
      if (name !== self.witnessName && !witnesses.some((w) => w.name === name))
        witnesses.push({ name, verifierKey: witnessKey, url: pinned.url.replace(/\/+$/, ''), peer_id: peer._id });
    }
  }
  return { witnessedLogs: [...logs].map(([origin, verifierKeys]) => ({ origin, verifierKeys })), witnesses };
}

export interface PeerWitnesses {
  /** The logs this hub witnesses now. */
  witnessedLogs(): WitnessedLog[];
  /** The witnesses of this hub's log now, TLOG_WITNESSES first. */
  witnesses(): ConfiguredWitness[];
  /** k for `n` witnesses: TLOG_WITNESS_QUORUM, or n. */
  quorum(n: number): number;
  /** Reads the registry now (throws when it cannot: the sets stay as they were). */
  refresh(): Promise<void>;
  /** Reads it every PEER_WITNESSES_REFRESH_MS until the returned function is called. */
  start(): () => void;
}

export function createPeerWitnesses(deps: {
  peers: { list(): Promise<PeerDocument[]> };
  settings: TlogSettingsSets;
  self: TlogIdentity;
  logger: Pick<Logger, 'warn'>;
  refreshMs?: number;
}): PeerWitnesses {
  let sets = mergeTlogSets(deps.settings, [], deps.self);
  let warnedAt = 0;
  const refresh = async () => {
    sets = mergeTlogSets(deps.settings, await deps.peers.list(), deps.self);
  };
  return {
    witnessedLogs: () => sets.witnessedLogs,
    witnesses: () => sets.witnesses,
    quorum: (n) => deps.settings.quorum ?? n,
    refresh,
    start() {
      const timer = setInterval(() => {
        refresh().catch((err: unknown) => {
          if (Date.now() - warnedAt < WARN_EVERY_MS) return;
          warnedAt = Date.now();
          deps.logger.warn({ err }, 'tlog: could not read the peer registry; its transparency keys stay as last read');
        });
      }, deps.refreshMs ?? PEER_WITNESSES_REFRESH_MS);
      timer.unref();
      return () => clearInterval(timer);
    }
  };
}
