/**
 * With witnesses configured (TLOG_WITNESSES), each API process signs a checkpoint every TLOG_CHECKPOINT_INTERVAL_MS
 * when the ledger grew (otherwise only GET /tlog/checkpoint would, and a log nobody reads would never be witnessed),
 * and hands the witness workflows (witness/<queue>/<name>) the news: signal-with-start of `configure`, at a new
 * size and at least every RESIGNAL_MS (which also starts them at the process's start, and passes changed settings).
 * Off every request's path: Temporal or a witness being down delays only the cosignatures; a failed signal is sent
 * again at the next tick. Several processes sign at once safely (store/tlog/checkpoints.ts); a refused fork, and a
 * failure to sign or signal, is logged at most once a minute here (GET /tlog/checkpoint answers a fork every time).
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { LogWitness } from '../../core/config/tlog.node';
import { signalWitnesses } from '../../workflows/tlog/witness.client';
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
  if (witnesses.length === 0) return () => undefined;
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
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), deps.intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
