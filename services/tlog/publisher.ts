/**
 * With witnesses of this hub's log (TLOG_WITNESSES and the peer registry's, as services/tlog/peer-witnesses.ts has
 * them at the time), each API process signs a checkpoint every TLOG_CHECKPOINT_INTERVAL_MS when the ledger grew
 * (otherwise only GET /tlog/checkpoint would, and a log nobody reads would never be witnessed), and hands the witness
 * workflows (witness/<queue>/<name>) the news: signal-with-start of `configure`, at a new size, when the witnesses
 * changed, and at least every RESIGNAL_MS (which also starts them at the process's start, and passes changed
 * settings). Off every request's path: Temporal or a witness being down delays only the cosignatures; a failed signal
 * is sent again at the next tick. At its start, when the witnesses changed, and every RESIGNAL_MS it also retires the
 * workflows of witnesses no longer configured (retireRemovedWitnesses), even with none configured, after reading the
 * registry afresh (a replica whose copy is a few seconds old must not retire a witness just pinned). Several
 * processes sign at once safely (store/tlog/checkpoints.ts); a refused fork, and a failure to sign or signal, is
 * logged at most once a minute here (GET /tlog/checkpoint answers a fork every time).
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { LogWitness } from '../../core/config/tlog.node';
import { retireRemovedWitnesses, signalWitnesses } from '../../workflows/tlog/witness.client';
import type { TlogCheckpoints } from './checkpoint';

const RESIGNAL_MS = 10 * 60_000;
const LOG_EVERY_MS = 60_000;

const setKey = (witnesses: LogWitness[]) => witnesses.map((w) => `${w.name} ${w.verifierKey} ${w.url}`).join('\n');

export function startCheckpointPublisher(deps: {
  tlog: Pick<TlogCheckpoints, 'current' | 'origin'>;
  temporal: Client;
  coreQueue: string;
  /** The witnesses configured now. */
  witnesses: () => LogWitness[];
  /** Reads the witnesses afresh (the peer registry), before retiring workflows; throws when it cannot. */
  refreshWitnesses: () => Promise<void>;
  intervalMs: number;
  logger: Logger;
}): () => void {
  const { tlog, logger } = deps;
  /** The witnesses the last retiring round was for, and when the next one is due regardless. */
  let retiredSet: string | null = null;
  let nextRetireAt = 0;
  let retireWarnedAt = 0;
  let retiring = false;
  // Off the signing path: listing workflows can be slow on a loaded Temporal, and must never delay a checkpoint.
  const retire = async (set: string) => {
    if (retiring || (set === retiredSet && Date.now() < nextRetireAt)) return;
    retiring = true;
    retiredSet = set;
    try {
      await deps.refreshWitnesses();
      const names = await retireRemovedWitnesses(deps.temporal, deps.coreQueue, deps.witnesses());
      nextRetireAt = Date.now() + RESIGNAL_MS;
      if (names.length > 0) logger.info({ witnesses: names }, 'tlog: retired the workflows of removed witnesses');
    } catch (err) {
      nextRetireAt = Date.now() + LOG_EVERY_MS; // again in a minute (or at the next change)
      if (Date.now() - retireWarnedAt >= LOG_EVERY_MS) {
        retireWarnedAt = Date.now();
        logger.warn({ err }, 'tlog: could not retire the workflows of removed witnesses; trying again');
      }
    } finally {
      retiring = false;
    }
  };
  /** The witnesses last signalled (null: none yet), to notice a change. */
  let signalledSet: string | null = null;
  let signalledSize = -1;
  let signalledAt = 0;
  let forkLoggedAt = 0;
  let warnedAt = 0;
  let busy = false;
  const forkLog = {
    error(details: object, message: string) {
      if (Date.now() - forkLoggedAt < LOG_EVERY_MS) return;
      forkLoggedAt = Date.now();
      logger.error(details, message);
    }
  };
  const tick = async () => {
    if (busy) return;
    busy = true;
    const witnesses = deps.witnesses();
    const set = setKey(witnesses);
    const changed = set !== signalledSet;
    try {
      // Nothing to sign on a timer without witnesses: only the workflows of removed witnesses to end.
      if (witnesses.length > 0) {
        const note = await tlog.current(forkLog);
        const size = Number(note.split('\n', 2)[1]);
        if (!changed && size === signalledSize && Date.now() - signalledAt < RESIGNAL_MS) return;
        await signalWitnesses(deps.temporal, deps.coreQueue, tlog.origin, witnesses);
        signalledSize = size;
        signalledAt = Date.now();
      }
      signalledSet = set;
    } catch (err) {
      if ((err as { code?: string }).code !== 'ledger_fork' && Date.now() - warnedAt >= LOG_EVERY_MS) {
        warnedAt = Date.now();
        logger.warn({ err }, 'tlog: could not sign a checkpoint or tell the witness workflows; trying again');
      }
    } finally {
      busy = false;
      void retire(set);
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), deps.intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
