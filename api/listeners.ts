/**
 * The service's listeners and what each serves. All share one ServiceContext.
 *   main (PORT)              everything public: federation, truth ledger, OAuth, admin, docs
 *   backup (BACKUP_PORT)     the truth write and the short status form
 *   hub (HUB_PORT)           the hub gateway: task submission (POST /a2a/task, GET /a2a/task/:id)
 *   commercial (COMMERCIAL_PORT, base /api/v1)   the commercial gateway
 *   memory (MEMORY_PORT)     the memory gateway the commercial gateway proxies to, bound to MEMORY_HOST (127.0.0.1)
 *   daemon (DAEMON_PORT)     the local daemon, bound to 127.0.0.1 whatever HOST says
 */
import { FastifyInstance } from 'fastify';
import type { ServiceContext } from './context';
import type { ListenerName } from './directory';
import { createListenerApp } from './app';
import { registerOpenApi } from './openapi';
import { healthRoutes } from './routes/health';
import { agentCardRoutes } from './routes/discovery/agent-card';
import { endpointDirectoryRoutes } from './routes/discovery/endpoints';
import { adminRoutes } from './routes/admin';
import { oauthRoutes } from './routes/oauth';
import { handshakeRoutes } from './routes/compute/handshake';
import { groupRoutes } from './routes/compute/group';
import { gpuRoutes } from './routes/compute/gpu';
import { webSocketRoutes } from './routes/compute/ws';
import { kunlunRoutes } from './routes/partner/kunlun';
import { partnerAdminRoutes } from './routes/admin/partners';
import { ledgerWriterRoutes } from './routes/ledger/writer';
import { truthReportRoutes } from './routes/ledger/report';
import { backupStatusRoutes, truthReadRoutes } from './routes/ledger/read';
import { subscriptionRoutes } from './routes/ledger/subscription';
import { approvalRoutes } from './routes/ledger/approvals';
import { statusDataRoutes } from './routes/ledger/status-data';
import { tlogRoutes } from './routes/tlog/tlog';
import { tlogWitnessRoutes } from './routes/tlog/witness';
import { daemonStatusRoutes } from './routes/daemon/status';
import { daemonDispatchRoutes } from './routes/daemon/dispatch';
import { daemonAdminRoutes } from './routes/daemon/admin';
import { registerRoutes } from './routes/federation/register';
import { heartbeatRoutes } from './routes/federation/heartbeat';
import { nodeDirectoryRoutes } from './routes/federation/nodes';
import { peerRoutes } from './routes/federation/peers';
import { queueStatsRoutes, taskSubmissionRoutes } from './routes/federation/tasks';
import { workDistributionRoutes } from './routes/federation/work';
import { joinPageRoutes } from './routes/federation/join';
import { reviewRoutes } from './routes/federation/review';
import { directoryTreeRoutes } from './routes/federation/directory-tree';
import {
  commercialHealthRoutes,
  COMMERCIAL_PREFIX,
  decisionRoutes,
  memoryProxyRoutes,
  productRoutes
} from './routes/commercial/gateway';
import { memoryGatewayRoutes } from './routes/memory/truth';
import { loadProductMatrix } from '../core/commercial/products.node';
import { memoryGatewayUrl } from '../core/config.node';
import { chatGatewayRoutes } from './routes/chat/gateway';
import { chatAdminRoutes } from './routes/chat/admin';
import { localModelChatRoutes } from './routes/chat/local-model';
import { trialChatRoutes } from './routes/chat/trial';
import { knowledgeAdminRoutes } from './routes/chat/knowledge';
import { deployRoutes } from './routes/deploy/dal';

export interface Listener {
  name: ListenerName;
  app: FastifyInstance;
  host: string;
  port: number;
}

export const DAEMON_HOST = '127.0.0.1';

export async function buildListeners(ctx: ServiceContext): Promise<Listener[]> {
  const { config } = ctx;
  const make = (name: ListenerName, options?: Parameters<typeof createListenerApp>[2]) =>
    createListenerApp(ctx, name, options);

  const { truthWrites } = ctx;

  const main = make('main');
  await registerOpenApi(main, config.publicUrl);
  await main.register(healthRoutes, {
    db: ctx.mongo.db,
    listener: 'main',
    upstreams: () => ctx.chat.upstreamHealth(),
    ledgerWriter: ledgerWriterHealth(ctx)
  });
  await main.register(agentCardRoutes, {
    config,
    directory: ctx.directory,
    keys: ctx.keys,
    tasks: ctx.tasks,
    nodes: ctx.nodes
  });
  await main.register(endpointDirectoryRoutes, { directory: ctx.directory, config });
  await main.register(oauthRoutes, { config, keys: ctx.keys, credentials: ctx.credentials });
  await main.register(handshakeRoutes, { config, keys: ctx.keys, credentials: ctx.credentials });
  await main.register(groupRoutes, {
    config,
    temporal: ctx.temporal,
    groups: ctx.slimGroups,
    credentials: ctx.credentials
  });
  await main.register(gpuRoutes, { gpus: ctx.gpus, nodes: ctx.nodes, presence: ctx.presence });
  await main.register(webSocketRoutes, { ledger: ctx.ledger, config, keys: ctx.keys, credentials: ctx.credentials });
  await main.register(kunlunRoutes, {
    config,
    keys: ctx.keys,
    ledger: ctx.ledger,
    partners: ctx.partners
  });
  await main.register(partnerAdminRoutes, { partners: ctx.partners, ledger: ctx.ledger, config });
  await main.register(adminRoutes, { credentials: ctx.credentials, ledger: ctx.ledger, config });
  await main.register(daemonAdminRoutes, {
    credentials: ctx.credentials,
    ledger: ctx.ledger,
    temporal: ctx.temporal,
    config
  });
  await main.register(truthReportRoutes, { truthWrites, config });
  await main.register(ledgerWriterRoutes, {
    ledger: ctx.ledger,
    quota: ctx.quota,
    truthWrites,
    config,
    counts: ctx.forwarding,
    released: () => ctx.ledgerWriter?.released() ?? false
  });
  await main.register(truthReadRoutes, {
    ledger: ctx.ledger,
    config,
    keys: ctx.keys,
    tlog: ctx.tlog,
    witness: ctx.witness,
    logWitnesses: ctx.logWitnesses
  });
  await main.register(tlogRoutes, { tiles: ctx.tlogTiles, checkpoints: ctx.tlog });
  await main.register(tlogWitnessRoutes, { witness: ctx.witness });
  await main.register(subscriptionRoutes, { ledger: ctx.ledger });
  await main.register(approvalRoutes, { temporal: ctx.temporal, config });
  await main.register(statusDataRoutes, {
    db: ctx.mongo.db,
    ledger: ctx.ledger,
    nodes: ctx.nodes,
    presence: ctx.presence,
    workOrders: ctx.workOrders,
    config
  });
  await main.register(registerRoutes, {
    nodes: ctx.nodes,
    didRegistry: ctx.didRegistry,
    temporal: ctx.temporal,
    directory: ctx.directory,
    config
  });
  await main.register(heartbeatRoutes, {
    presenceRecorder: ctx.presenceRecorder,
    nodeCache: ctx.nodeCache,
    temporal: ctx.temporal,
    config
  });
  await main.register(nodeDirectoryRoutes, {
    nodes: ctx.nodes,
    presence: ctx.presence,
    heartbeatHistory: ctx.heartbeatHistory,
    config
  });
  await main.register(peerRoutes, { peers: ctx.peers });
  await main.register(queueStatsRoutes, { tasks: ctx.tasks });
  await main.register(workDistributionRoutes, {
    tasks: ctx.tasks,
    nodes: ctx.nodes,
    presence: ctx.presence,
    temporal: ctx.temporal,
    config
  });
  await main.register(joinPageRoutes, { config });
  await main.register(reviewRoutes, { nodes: ctx.nodes, temporal: ctx.temporal });
  await main.register(directoryTreeRoutes, { tree: ctx.tree, nodes: ctx.nodes, temporal: ctx.temporal, config });
  await main.register(chatGatewayRoutes, { chat: ctx.chat, oauthPlan: config.CHAT_OAUTH_PLAN });
  await main.register(chatAdminRoutes, {
    chat: ctx.chat,
    credentials: ctx.credentials,
    keyGroups: ctx.keyGroups,
    ledger: ctx.ledger,
    config
  });
  await main.register(localModelChatRoutes, { chat: ctx.chat, config });
  await main.register(trialChatRoutes, { chat: ctx.chat, knowledge: ctx.knowledge, config });
  await main.register(knowledgeAdminRoutes, { knowledge: ctx.knowledge });
  await main.register(deployRoutes, {
    temporal: ctx.temporal,
    config,
    ports: ctx.ports,
    registry: ctx.didRegistry,
    ledger: ctx.ledger,
    adminTokenHash: ctx.adminTokenHash,
    orders: ctx.workOrders,
    nodeAuth: ctx
  });

  const backup = make('backup');
  await backup.register(healthRoutes, { db: ctx.mongo.db, listener: 'backup' });
  await backup.register(truthReportRoutes, { truthWrites, config });
  await backup.register(backupStatusRoutes, { ledger: ctx.ledger });

  const hub = make('hub');
  await hub.register(healthRoutes, { db: ctx.mongo.db, listener: 'hub' });
  await hub.register(taskSubmissionRoutes, { tasks: ctx.tasks, config });

  // The commercial gateway proxies memory calls over HTTP to the memory gateway (docs/gateways.md).
  // Every answer of the commercial gateway, 404s and errors included, names the hub (docs/gateways.md).
  const commercial = make('commercial', { responseHeaders: { 'X-DID': config.SERVICE_DID } });
  await commercial.register(commercialHealthRoutes, {
    db: ctx.mongo.db,
    config,
    memoryGatewayUrl: memoryGatewayUrl(config),
    prefix: COMMERCIAL_PREFIX
  });
  await commercial.register(decisionRoutes, {
    ledger: ctx.ledger,
    quota: ctx.quota,
    credentials: ctx.credentials,
    config,
    prefix: COMMERCIAL_PREFIX
  });
  await commercial.register(memoryProxyRoutes, { memoryGateway: ctx.memoryGateway, prefix: COMMERCIAL_PREFIX });
  await commercial.register(productRoutes, {
    products: loadProductMatrix(config.PRODUCTS_FILE),
    prefix: COMMERCIAL_PREFIX
  });

  const memory = make('memory');
  await memory.register(healthRoutes, { db: ctx.mongo.db, listener: 'memory' });
  await memory.register(memoryGatewayRoutes, { truthWrites, memory: ctx.memory, config });

  const daemon = make('daemon');
  await daemon.register(healthRoutes, { db: ctx.mongo.db, listener: 'daemon' });
  await daemon.register(daemonStatusRoutes, { config, temporal: ctx.temporal });
  await daemon.register(daemonDispatchRoutes, { config, temporal: ctx.temporal, catalog: ctx.chat.catalog });

  const listeners: Listener[] = [
    { name: 'main', app: main, host: config.HOST, port: config.PORT },
    { name: 'backup', app: backup, host: config.HOST, port: config.BACKUP_PORT },
    { name: 'hub', app: hub, host: config.HOST, port: config.HUB_PORT },
    { name: 'commercial', app: commercial, host: config.HOST, port: config.COMMERCIAL_PORT },
    { name: 'memory', app: memory, host: config.MEMORY_HOST, port: config.MEMORY_PORT },
    { name: 'daemon', app: daemon, host: DAEMON_HOST, port: config.DAEMON_PORT }
  ];
  await Promise.all(listeners.map((l) => l.app.ready()));
  return listeners;
}

/** GET /health's `ledger_writer` (main listener): undefined when forwarding is off. */
function ledgerWriterHealth(ctx: Pick<ServiceContext, 'config' | 'ledgerWriter' | 'forwarding'>) {
  return () => {
    if (!ctx.config.LEDGER_FORWARD_SECRET) return undefined;
    const lease = ctx.ledgerWriter?.lease();
    return {
      holds_lease: lease ? lease.holds : null,
      writer_url: lease ? lease.writer_url : null,
      forwarded: ctx.forwarding.sent,
      forward_requests: ctx.forwarding.requests,
      served: ctx.forwarding.served
    };
  };
}
