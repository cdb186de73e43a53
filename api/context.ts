/**
 * The one place an API process builds its dependencies: config, logger, MongoDB and every store, the ledger (with
 * its way to the writer), the use-case services shared by several routes, the Temporal client, the hub's keys, the
 * clients of other services and the endpoint directory. api/listeners.ts only hands each route plugin the parts it
 * uses. The worker builds its own in worker/worker.ts, a cluster primary in api/server.ts. Closed in reverse order.
 */
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import type { Logger } from 'pino';
import { createLogger } from '../core/logger.node';
import { Config, memoryGatewayUrl, mongoUri, temporalConnectionSettings } from '../core/config.node';
import { connectMongo, ensureIndexes, Mongo } from '../store/mongo';
import cluster from 'node:cluster';
import { Ledger } from '../store/ledger/ledger';
import { forwardQuotaTo } from '../store/ledger/writer/cluster-primary';
import { chooseWriter } from '../store/ledger/writer/transports';
import { CredentialStore } from '../store/credentials';
import { NodeStore } from '../store/federation/nodes';
import type { DailyQuota } from '../store/ledger/daily-quota';
import { QuotaStore } from '../store/ledger/quota';
import { PresenceStore } from '../store/federation/presence';
import { HeartbeatHistoryStore } from '../store/federation/heartbeat-history';
import { TaskStore } from '../store/federation/tasks';
import { PeerStore } from '../store/federation/peers';
import { DirectoryTreeStore } from '../store/federation/directory-tree';
import { PresenceRecorder } from '../store/federation/presence-recorder';
import { NodeCache } from '../store/federation/node-cache';
import { EndpointDirectory } from './directory';
import { HubKeys, loadOrCreateHubKeys } from '../store/keys/hub-keys';
import { loadAdminTokenHash } from './admin-token';
import { AdmissionGates, createAdmissionGates } from './plugins/admission';
import { ChatServices, createChatServices } from '../services/chat/chat-services';
import { KeyGroupStore } from '../store/chat/key-groups';
import { ForwardingCounts, joinWriterLease, WriterLeaseMember } from '../store/ledger/writer/lease-holder';
import { SlimGroupStore } from '../store/compute/groups';
import { GpuStore } from '../store/compute/gpu';
import { PartnerStore } from '../store/partner/partners';
import { WorkOrderStore } from '../store/deploy/work-orders';
import { PortPoolStore } from '../store/deploy/ports';
import { DidRegistryStore } from '../store/deploy/registry';
import { KnowledgeStore } from '../store/chat/knowledge';
import { MemoryStore } from '../store/memory/memory';
import { MemoryGatewayClient } from '../services/commercial/memory-client';
import { createTruthWrites, type TruthWriteOptions, type TruthWrites } from '../services/ledger/write-truth';
import { createTlogCheckpoints, type TlogCheckpoints } from '../services/tlog/checkpoint';
import { createTlogTiles, type TlogTiles } from '../services/tlog/tiles';
import { TileCache } from '../store/tlog/tiles';
import { CheckpointStore } from '../store/tlog/checkpoints';
import { createTlogWitness, type TlogWitness } from '../services/tlog/witness';
import { WitnessStore } from '../store/tlog/witness';
import { CosignatureStore } from '../store/tlog/cosignatures';
import { createWitnessPolicy, type WitnessPolicy } from '../services/tlog/cosigned';
import { startCheckpointPublisher } from '../services/tlog/publisher';
import { createPeerWitnesses } from '../services/tlog/peer-witnesses';
import { createPeerRegistry, type PeerRegistry } from '../services/federation/peers';

export interface ServiceContext {
  config: Config;
  logger: Logger;
  mongo: Mongo;
  ledger: Ledger;
  credentials: CredentialStore;
  nodes: NodeStore;
  quota: DailyQuota;
  presence: PresenceStore;
  heartbeatHistory: HeartbeatHistoryStore;
  presenceRecorder: PresenceRecorder;
  nodeCache: NodeCache;
  tasks: TaskStore;
  /** The peer registry, with the transparency keys pinned for peers (services/federation/peers.ts). */
  peers: PeerRegistry;
  tree: DirectoryTreeStore;
  temporal: Client;
  keys: HubKeys;
  adminTokenHash: string;
  directory: EndpointDirectory;
  /** Per-process admission control (api/plugins/admission.ts), shared by this process's listeners. */
  admission: AdmissionGates;
  /** The chat gateway: providers, upstream clients and breakers, plans, limits, usage (services/chat/chat-services.ts). */
  chat: ChatServices;
  keyGroups: KeyGroupStore;
  /** The writer lease across API replicas (LEDGER_FORWARD_SECRET), where this process takes part in it; else null. */
  ledgerWriter: WriterLeaseMember | null;
  /** Appends this process forwarded to the lease holder and served as the holder (store/ledger/writer/lease-holder.ts). */
  forwarding: ForwardingCounts;
  /** Every truth write (report, forwarded counted appends, memory upserts): services/ledger/write-truth.ts. */
  truthWrites: TruthWrites;
  /** The ledger's C2SP checkpoints (services/tlog/checkpoint.ts). */
  tlog: TlogCheckpoints;
  /** The ledger's C2SP tiles, each kept once served (services/tlog/tiles.ts). */
  tlogTiles: TlogTiles;
  /** The hub as a C2SP tlog-witness of the logs it is configured for (services/tlog/witness.ts). */
  witness: TlogWitness;
  /** The witnesses of the hub's log and the k-of-n policy (settings and peers, services/tlog/cosigned.ts). */
  logWitnesses: WitnessPolicy;
  slimGroups: SlimGroupStore;
  gpus: GpuStore;
  /** One per process: the partner authenticator and the partner routes share its replay records' pruning. */
  partners: PartnerStore;
  workOrders: WorkOrderStore;
  ports: PortPoolStore;
  didRegistry: DidRegistryStore;
  knowledge: KnowledgeStore;
  memory: MemoryStore;
  /** The commercial gateway's client of the memory gateway (MEMORY_GATEWAY_URL, or this process's memory listener). */
  memoryGateway: MemoryGatewayClient;
  close(): Promise<void>;
}

export async function createServiceContext(
  config: Config,
  logger = createLogger(config, 'zhongshu-hub')
): Promise<ServiceContext> {
  const mongo = await connectMongo({ uri: mongoUri(config), dbName: config.MONGODB_DB });
  try {
    await ensureIndexes(mongo.db);
    // A request waits for Temporal only briefly: transient failures are retried for about a second (4 attempts
    // instead of the SDK's 10, which take some 20 s), then the error handler answers 503 with Retry-After.
    const connection = await Connection.connect({
      ...temporalConnectionSettings(config),
      interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: 4 }))]
    });
    const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
    const adminTokenHash = loadAdminTokenHash(config.dataDir, config.ADMIN_TOKEN, (msg) => logger.warn(msg));
    const nodes = new NodeStore(mongo.db);
    const presence = new PresenceStore(mongo.db);
    const heartbeatHistory = new HeartbeatHistoryStore(mongo.db, {
      intervalMs: config.HEARTBEAT_HISTORY_INTERVAL_S * 1000,
      size: config.HEARTBEAT_HISTORY_SIZE
    });
    const tree = new DirectoryTreeStore(mongo.db);
    await tree.ensureInitialVersion();
    const nodeCache = new NodeCache(nodes, config.NODE_CACHE_TTL_MS, (err) =>
      logger.warn({ err }, 'node change log read failed; node cache entries are read again after NODE_CACHE_TTL_MS')
    );
    nodeCache.start();
    const chat = createChatServices(config, mongo.db, logger);
    const quota = new QuotaStore(mongo.db, (err) => logger.warn({ err }, 'quota prune or lease give-back failed'));
    const presenceRecorder = new PresenceRecorder(
      presence,
      heartbeatHistory,
      {
        // Long enough for any offline judgement (deadline + grace) to still find the entry.
        retentionMs: Math.max(2 * config.NODE_OFFLINE_AFTER_S * 1000, 120_000),
        flushIntervalMs: config.PRESENCE_FLUSH_MS,
        ackLagMs: config.PRESENCE_ACK_LAG_MS
      },
      logger
    );
    presenceRecorder.startClock();
    const tasks = new TaskStore(mongo.db, { maxAttempts: config.TASK_MAX_ATTEMPTS });
    // After an upgrade, one process builds the task reads for the tasks stored before; until then the reads are
    // the full ones of the version before (store/federation/task-reads-build.ts). Nothing to do once built.
    const stopTaskReadsBuild = tasks.readsBuild.start({
      onError: (err) => logger.warn({ err }, 'task reads build failed; tried again in 30 s'),
      onBuilt: () => logger.info('task reads built: lists and counters cover every task')
    });
    // Across hosts: the writer lease (LEDGER_FORWARD_SECRET), taken part in by the process that appends for this host.
    const forwarding = new ForwardingCounts();
    const writer = cluster.isWorker ? null : await joinWriterLease(mongo.db, config, logger, { counts: forwarding });
    // One writer per host: an API process of a cluster (API_PROCESSES > 1) hands its appends to the primary
    // (api/server.ts); the process appending for a host forwards to the lease holder when that is another host.
    // (A truth write's quota slot travels with its append to the lease holder: one request, appendCounted.)
    const ledger = new Ledger(mongo.db, {
      writer: chooseWriter({ clusterPrimary: cluster.isWorker ? process : null, leaseMember: writer })
    });
    // Key-prefix reads come from the key tree, which one API process (a lease) keeps up with the ledger, from seq 1
    // after an upgrade (store/ledger/key-tree-indexer.ts).
    const stopKeyTree = ledger.keyTreeIndexer().start({
      onError: (err) => logger.warn({ err }, 'key tree indexer failed; tried again from its #indexed:edges')
    });
    // With API_PROCESSES > 1 the primary's QuotaStore leases every DID's slots for the host (api/server.ts).
    // Across hosts, the writer lease holder counts for every replica (store/ledger/writer/lease-holder.ts).
    const hostQuota = cluster.isWorker ? forwardQuotaTo(process, quota) : (writer?.quota(quota) ?? quota);
    const credentials = new CredentialStore(mongo.db);
    const memoryGateway = new MemoryGatewayClient(memoryGatewayUrl(config), config.MEMORY_GATEWAY_TIMEOUT_MS);
    const keys = loadOrCreateHubKeys(config.dataDir);
    // The witnessed logs and the witnesses: the settings and the peer registry's pins, read before anything uses
    // them (an empty first copy would make the publisher retire the peers' witness workflows).
    const peerStore = new PeerStore(mongo.db);
    const tlogIdentity = { origin: config.tlogOrigin, witnessName: config.tlogWitnessName };
    const peerWitnesses = createPeerWitnesses({
      peers: peerStore,
      settings: {
        witnessedLogs: config.TLOG_WITNESSED_LOGS ?? [],
        witnesses: config.TLOG_WITNESSES ?? [],
        quorum: config.tlogWitnessQuorum
      },
      self: tlogIdentity,
      logger
    });
    await peerWitnesses.refresh();
    const stopPeerWitnesses = peerWitnesses.start();
    const logWitnesses = createWitnessPolicy({
      store: new CosignatureStore(mongo.db, config.tlogOrigin),
      witnesses: peerWitnesses.witnesses,
      quorum: peerWitnesses.quorum
    });
    const tlog = createTlogCheckpoints({
      ledger,
      keys,
      origin: config.tlogOrigin,
      checkpoints: new CheckpointStore(mongo.db, config.tlogOrigin),
      witnesses: logWitnesses
    });
    const stopPublisher = startCheckpointPublisher({
      tlog,
      temporal,
      coreQueue: config.TEMPORAL_TASK_QUEUE,
      witnesses: peerWitnesses.witnesses,
      refreshWitnesses: peerWitnesses.refresh,
      intervalMs: config.TLOG_CHECKPOINT_INTERVAL_MS,
      logger
    });
    return {
      config,
      logger,
      mongo,
      ledger,
      credentials,
      nodes,
      quota: hostQuota,
      presence,
      heartbeatHistory,
      presenceRecorder,
      nodeCache,
      tasks,
      peers: createPeerRegistry({
        peers: peerStore,
        self: tlogIdentity,
        settingsWitnesses: config.TLOG_WITNESSES ?? [],
        refreshTlog: peerWitnesses.refresh
      }),
      tree,
      temporal,
      keys,
      adminTokenHash,
      directory: new EndpointDirectory(),
      admission: createAdmissionGates({ truth_write: config.TRUTH_MAX_IN_FLIGHT }),
      chat,
      keyGroups: new KeyGroupStore(mongo.db),
      ledgerWriter: writer,
      forwarding,
      truthWrites: createTruthWrites({ ledger, quota: hostQuota, temporal }, truthWriteOptions(config)),
      tlog,
      tlogTiles: createTlogTiles({ ledger, cache: new TileCache(mongo.db), logger }),
      logWitnesses,
      witness: createTlogWitness({
        store: new WitnessStore(mongo.db),
        keys,
        name: config.tlogWitnessName,
        logs: peerWitnesses.witnessedLogs
      }),
      slimGroups: new SlimGroupStore(mongo.db),
      gpus: new GpuStore(mongo.db),
      partners: new PartnerStore(mongo.db),
      workOrders: new WorkOrderStore(mongo.db),
      ports: new PortPoolStore(mongo.db, config.PORT_POOL),
      didRegistry: new DidRegistryStore(mongo.db, credentials.activeDids),
      knowledge: new KnowledgeStore(mongo.db),
      memory: new MemoryStore(mongo.db, ledger),
      memoryGateway,
      close: async () => {
        stopPublisher();
        stopPeerWitnesses();
        nodeCache.stop();
        stopTaskReadsBuild();
        stopKeyTree();
        // Heartbeats acknowledged before their write are stored before the process ends (at most 5 s).
        if (!(await presenceRecorder.drain(5000)))
          logger.warn(
            'presence writes still pending at shutdown; heartbeats acknowledged in the last second may not be stored'
          );
        await presenceRecorder.stopClock();
        await chat
          .close()
          .catch((err: unknown) =>
            logger.warn({ err }, 'chat limit leases, usage records or tallies could not be written back')
          );
        await quota
          .close()
          .catch((err: unknown) => logger.warn({ err }, 'unused leased quota slots could not be given back')); // store/ledger/quota.ts
        await writer
          ?.close()
          .catch((err: unknown) => logger.warn({ err }, 'the ledger writer lease could not be closed cleanly'));
        await memoryGateway.close().catch(() => undefined);
        await connection.close().catch(() => undefined);
        await mongo.close();
      }
    };
  } catch (err) {
    await mongo.close();
    throw err;
  }
}

/** The settings of the truth writes (services/ledger/write-truth.ts), and only those. */
function truthWriteOptions(config: Config): TruthWriteOptions {
  return {
    dailyQuota: config.TRUTH_DAILY_QUOTA,
    maxValueBytes: config.TRUTH_MAX_VALUE_BYTES,
    writeTimeoutMs: config.TRUTH_WRITE_TIMEOUT_MS,
    risk: { highRiskTypes: config.TRUTH_HIGH_RISK_TYPES, highRiskKeyPrefixes: config.TRUTH_HIGH_RISK_KEY_PREFIXES },
    approval: {
      timeoutSeconds: config.TRUTH_APPROVAL_TIMEOUT_S,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      hubDid: config.SERVICE_DID
    }
  };
}
