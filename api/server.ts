/**
 * API process entry: every listener; SIGINT/SIGTERM stop accepting, drain requests, close connections, exit.
 *
 * With API_PROCESSES=N (N > 1) this process is a cluster primary: it does the work that is done once (the hub's
 * signing keys, the administrator token, the indexes, the directory tree's first version) before forking, so no two
 * processes race for it, then runs N API processes (Node's cluster module: they share every listener's port, the
 * primary hands out connections). A worker that dies is restarted after 0.5, 1, 2, 4, 8 s (at most 10 s); after
 * 5 restarts within 120 s the primary exits with an error (the launcher's supervisor then restarts the whole API).
 * A signal to the primary is passed to every worker, which drains; the primary exits when they all have.
 * The primary is also the host's one ledger writer and quota counter: the API processes hand it their appends and
 * their daily-quota claims (store/ledger/writer/cluster-primary.ts), so they never race each other for the next seq or
 * for a DID's quota slots.
 */
import cluster, { Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { Config, loadConfig, mongoUri } from '../core/config.node';
import {
  checkReferencedConfiguration,
  exitOnInvalidConfiguration,
  isConfigurationError
} from '../core/config-check.node';
import { createLogger } from '../core/logger.node';
import { connectMongo, ensureIndexes } from '../store/mongo';
import { DirectoryTreeStore } from '../store/federation/directory-tree';
import { Ledger } from '../store/ledger/ledger';
import { serveForwardedWrites } from '../store/ledger/writer/cluster-primary';
import { QuotaStore } from '../store/ledger/quota';
import { joinWriterLease } from '../store/ledger/writer/lease-holder';
import { chooseWriter } from '../store/ledger/writer/transports';
import { loadAdminTokenHash } from './admin-token';
import { loadOrCreateHubKeys } from '../store/keys/hub-keys';
import { startApi } from './service';

async function serve(config: Config, logger: Logger): Promise<void> {
  const api = await startApi(config, logger);
  for (const l of api.listeners)
    logger.info({ listener: l.name, url: api.urls[l.name], bind: `${l.host}:${l.port}` }, 'listening');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: draining requests');
    const force = setTimeout(() => {
      logger.error('shutdown took longer than 15 s; exiting');
      process.exit(1);
    }, 15_000);
    force.unref();
    await api.close();
    logger.info('stopped');
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

/** Restart delays of a dead API process (as scripts/stack/supervisor.ts does for the stack's processes). */
const RESTART_DELAYS_MS = [500, 1000, 2000, 4000, 8000];
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 120_000;

async function runPrimary(config: Config, logger: Logger, processes: number): Promise<void> {
  // First-start work, once, before any API process exists.
  loadOrCreateHubKeys(config.dataDir);
  loadAdminTokenHash(config.dataDir, config.ADMIN_TOKEN, (msg) => logger.warn(msg));
  const mongo = await connectMongo({ uri: mongoUri(config), dbName: config.MONGODB_DB });
  try {
    await ensureIndexes(mongo.db);
    await new DirectoryTreeStore(mongo.db).ensureInitialVersion();
  } catch (err) {
    await mongo.close();
    throw err;
  }
  // The host's writer also takes part in the writer lease across hosts (LEDGER_FORWARD_SECRET): appends from this
  // host go to the holder when that is another replica.
  const writer = await joinWriterLease(mongo.db, config, logger).catch(async (err: unknown) => {
    await mongo.close();
    throw err;
  });
  const ledger = new Ledger(mongo.db, { writer: chooseWriter({ leaseMember: writer }) });
  const quota = new QuotaStore(mongo.db, (err) => logger.warn({ err }, 'quota prune or lease give-back failed'));
  // The host's quota counter; its claims made by the writer lease holder when that is another replica.
  const hostQuota = writer?.quota(quota) ?? quota;
  let exiting = false;
  const exit = async (code: number) => {
    if (exiting) return;
    exiting = true;
    // The head record of the last appends and the unused leased quota slots, then the connection (bounded: the
    // database may be what failed).
    const closing = Promise.all([ledger.headPublished(), quota.close(), writer?.close()]).then(() => mongo.close());
    await Promise.race([closing, new Promise((r) => setTimeout(r, 5000).unref())]).catch(() => undefined);
    process.exit(code);
  };
  let stopping = false;
  const restarts: number[] = [];
  const slots = new Map<Worker, number>();
  const fork = (slot: number) => {
    const worker = cluster.fork({ API_PROCESS_INDEX: String(slot) });
    slots.set(worker, slot);
    serveForwardedWrites({ ledger, quota: hostQuota }, worker, (err) =>
      logger.warn({ err, slot }, 'a forwarded ledger append or quota claim failed')
    );
  };
  cluster.on('exit', (worker, code, signal) => {
    const slot = slots.get(worker) ?? 0;
    slots.delete(worker);
    if (stopping) {
      if (slots.size === 0) {
        logger.info('every API process stopped');
        void exit(0);
      }
      return;
    }
    const now = Date.now();
    while (restarts.length > 0 && now - restarts[0]! > RESTART_WINDOW_MS) restarts.shift();
    if (restarts.length >= MAX_RESTARTS) {
      logger.error(
        { slot, code, signal },
        `API process ${slot} died ${MAX_RESTARTS + 1} times within ${RESTART_WINDOW_MS / 1000} s; stopping`
      );
      stopping = true;
      for (const w of slots.keys()) w.process.kill('SIGTERM');
      void exit(1); // (the head record and the unused leased quota slots first, at most 5 s)
      return;
    }
    const delay = RESTART_DELAYS_MS[Math.min(restarts.length, RESTART_DELAYS_MS.length - 1)]!;
    restarts.push(now);
    logger.warn(
      { slot, pid: worker.process.pid, code, signal },
      `API process ${slot} died (${signal ? `killed by ${signal}` : `exit code ${code}`}); restarting it in ${delay / 1000} s`
    );
    setTimeout(() => {
      if (!stopping) fork(slot);
    }, delay);
  });
  for (let i = 0; i < processes; i++) fork(i);
  logger.info({ processes }, `running ${processes} API processes`);
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping the API processes');
    // The writer lease first (store/ledger/writer/lease-holder.ts): the other replicas stop forwarding here before the processes drain.
    void (writer ? writer.release() : Promise.resolve()).then(() => {
      if (slots.size === 0) void exit(0);
      for (const w of slots.keys()) w.process.kill(signal);
    });
    setTimeout(() => {
      logger.error('API processes took longer than 20 s to stop; exiting');
      void exit(1);
    }, 20_000).unref();
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

async function main(): Promise<void> {
  const config = loadConfig();
  // Before anything connects: an invalid setting stops the process with exit code 78 and its one message.
  checkReferencedConfiguration(config);
  const logger = createLogger(config, 'zhongshu-hub');
  if (config.API_PROCESSES > 1 && cluster.isPrimary) await runPrimary(config, logger, config.API_PROCESSES);
  else
    await serve(
      config,
      cluster.isPrimary ? logger : logger.child({ api_process: Number(process.env.API_PROCESS_INDEX ?? 0) })
    );
}

main().catch((err) => {
  if (isConfigurationError(err)) exitOnInvalidConfiguration('api', err);
  process.stderr.write(`api failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
