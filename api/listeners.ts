/**
 * The service's listeners and what each serves. All share one ServiceContext.
 *   main (PORT)              everything public: federation, truth ledger, OAuth, admin, docs
 *   backup (BACKUP_PORT)     the truth write and the short status form
 *   hub (HUB_PORT)           the hub gateway: task submission (POST /a2a/task, GET /a2a/task/:id)
 *   commercial (COMMERCIAL_PORT, base /api/v1)   the commercial gateway
 *   memory (MEMORY_PORT)     the memory gateway the commercial gateway proxies to
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
import { truthReportRoutes } from './routes/truth/report';
import { backupStatusRoutes, truthReadRoutes } from './routes/truth/read';
import { subscriptionRoutes } from './routes/truth/subscription';
import { approvalRoutes } from './routes/truth/approvals';
import { statusDataRoutes } from './routes/truth/status-data';
import { daemonStatusRoutes } from './routes/daemon/status';
import { registerRoutes } from './routes/federation/register';
import { heartbeatRoutes } from './routes/federation/heartbeat';
import { nodeDirectoryRoutes } from './routes/federation/nodes';
import { peerRoutes } from './routes/federation/peers';
import { queueStatsRoutes, taskSubmissionRoutes } from './routes/federation/tasks';
import { joinPageRoutes } from './routes/federation/join';
import { reviewRoutes } from './routes/review';
import { directoryTreeRoutes } from './routes/directory-tree';

export interface Listener {
  name: ListenerName;
  app: FastifyInstance;
  host: string;
  port: number;
}

export const DAEMON_HOST = '127.0.0.1';

export async function buildListeners(ctx: ServiceContext): Promise<Listener[]> {
  const { config } = ctx;
  const make = (name: ListenerName) => createListenerApp(ctx, name);

  const main = make('main');
  await registerOpenApi(main, config.publicUrl);
  await main.register(healthRoutes, { ctx, listener: 'main' });
  await main.register(agentCardRoutes, { ctx });
  await main.register(endpointDirectoryRoutes, { ctx });
  await main.register(oauthRoutes, { ctx });
  await main.register(adminRoutes, { ctx });
  await main.register(truthReportRoutes, { ctx });
  await main.register(truthReadRoutes, { ledger: ctx.ledger, config, keys: ctx.keys });
  await main.register(subscriptionRoutes, { ctx });
  await main.register(approvalRoutes, { ctx });
  await main.register(statusDataRoutes, { ctx });
  await main.register(registerRoutes, { ctx });
  await main.register(heartbeatRoutes, { ctx });
  await main.register(nodeDirectoryRoutes, { ctx });
  await main.register(peerRoutes, { ctx });
  await main.register(queueStatsRoutes, { ctx });
  await main.register(joinPageRoutes, { ctx });
  await main.register(reviewRoutes, { ctx });
  await main.register(directoryTreeRoutes, { ctx });

  const backup = make('backup');
  await backup.register(healthRoutes, { ctx, listener: 'backup' });
  await backup.register(truthReportRoutes, { ctx });
  await backup.register(backupStatusRoutes, { ledger: ctx.ledger });

  const hub = make('hub');
  await hub.register(healthRoutes, { ctx, listener: 'hub' });
  await hub.register(taskSubmissionRoutes, { ctx });

  const commercial = make('commercial');
  await commercial.register(healthRoutes, { ctx, listener: 'commercial', prefix: '/api/v1' });

  const memory = make('memory');
  await memory.register(healthRoutes, { ctx, listener: 'memory' });

  const daemon = make('daemon');
  await daemon.register(healthRoutes, { ctx, listener: 'daemon' });
  await daemon.register(daemonStatusRoutes, { ctx });

  const listeners: Listener[] = [
    { name: 'main', app: main, host: config.HOST, port: config.PORT },
    { name: 'backup', app: backup, host: config.HOST, port: config.BACKUP_PORT },
    { name: 'hub', app: hub, host: config.HOST, port: config.HUB_PORT },
    { name: 'commercial', app: commercial, host: config.HOST, port: config.COMMERCIAL_PORT },
    { name: 'memory', app: memory, host: config.HOST, port: config.MEMORY_PORT },
    { name: 'daemon', app: daemon, host: DAEMON_HOST, port: config.DAEMON_PORT }
  ];
  await Promise.all(listeners.map((l) => l.app.ready()));
  return listeners;
}
