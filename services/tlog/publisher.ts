/**
 * With witnesses configured (TLOG_WITNESSES), each API process signs a checkpoint every TLOG_CHECKPOINT_INTERVAL_MS
 * when the ledger grew (otherwise only GET /tlog/checkpoint would, and a log nobody reads would never be witnessed),
 * and hands the witness workflows (witness/<queue>/<name>) the news: signal-with-start of `configure`, at a new
 * size and at least every RESIGNAL_MS (which also starts them at the process's start, and passes changed settings).
 * Off every request's path: Temporal or a witness being down delays only the cosignatures; a failed signal is sent
 * again at the next tick. At its start and every RESIGNAL_MS it also retires the workflows of witnesses no longer
 * configured (retireRemovedWitnesses), even with none configured. Several processes sign at once safely
 * (store/tlog/checkpoints.ts); a refused fork, and a failure to sign or signal, is logged at most once a minute here
 * (GET /tlog/checkpoint answers a fork every time).
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { LogWitness } from '../../core/config/tlog.node';
import { retireRemovedWitnesses, signalWitnesses } from '../../workflows/tlog/witness.client';
import type { TlogCheckpoints } from './checkpoint';

const RESIGNAL_MS = 10 * 60_000;
const LOG_EVERY_MS = 60_000;

export function startCheckpointPublisher(deps: {
  tlog: Pick<TlogCheckpoints, 'current' | 'origin'>;
  temporal: Client;
  coreQueue: string;
  witnesses: LogWitness[];
  intervalMs: number;
  logger: Logger;
}): () => void {
  const { tlog, witnesses, logger } = deps;
  let retiredAt = 0;
  let retireWarnedAt = 0;
  let retiring = false;
  // Off the signing path: listing workflows can be slow on a loaded Temporal, and must never delay a checkpoint.
  const retire = async () => {
    if (retiring || Date.now() - retiredAt < RESIGNAL_MS) return;
    retiring = true;
    try {
      const names = await retireRemovedWitnesses(deps.temporal, deps.coreQueue, witnesses);
      retiredAt = Date.now();
      if (names.length > 0) logger.info({ witnesses: names }, 'tlog: retired the workflows of removed witnesses');
    } catch (err) {
      retiredAt = Date.now() - RESIGNAL_MS + LOG_EVERY_MS; // again in a minute
      if (Date.now() - retireWarnedAt >= LOG_EVERY_MS) {
        retireWarnedAt = Date.now();
        logger.warn({ err }, 'tlog: could not retire the workflows of removed witnesses; trying again');
      }
    } finally {
      retiring = false;
    }
  };
  if (witnesses.length === 0) {
    // Nothing to sign on a timer: only the workflows of witnesses removed from the configuration to end.
    void retire();
    const timer = setInterval(() => void retire(), RESIGNAL_MS);
    timer.unref();
    return () => clearInterval(timer);
  }
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
    try {
      const note = await tlog.current(forkLog);
      const size = Number(note.split('\n', 2)[1]);
      if (size === signalledSize && Date.now() - signalledAt < RESIGNAL_MS) return;
      await signalWitnesses(deps.temporal, deps.coreQueue, tlog.origin, witnesses);
      signalledSize = size;
      signalledAt = Date.now();
    } catch (err) {
      if ((err as { code?: string }).code !== 'ledger_fork' && Date.now() - warnedAt >= LOG_EVERY_MS) {
        warnedAt = Date.now();
        logger.warn({ err }, 'tlog: could not sign a checkpoint or tell the witness workflows; trying again');
      }
    } finally {
      busy = false;
      void retire();
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), deps.intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
