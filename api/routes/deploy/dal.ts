/**
 * Deployment arbitration (docs/deploy.md).
 *   GET  /dal/health   (public) ok, service, version "V2.0", port (the deploy web port), 锚定, and the web server's state
 *   POST /dal/deploy   (X-DID) { action, … }: one endpoint, dispatched by action to its group's module under
 *                      actions/: release.ts (deploy, rollback), config.ts, ports.ts, registry.ts, inbox.ts;
 *                      an unknown action is 400 listing the actions
 *   GET  /dal/ports    (X-DID, deploy channel) the port pool's holders
 * Actions that need nginx answer 503 naming the package to install when DEPLOY_WEB=off or nginx is missing.
 */
import type { Client } from '@temporalio/client';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { AppError } from '../../../core/errors';
import { queryInt } from '../../../core/identifiers';
import { SERVICE_NAME } from '../../../core/version';
import type { PortPoolStore } from '../../../store/deploy/ports';
import type { DidRegistryStore } from '../../../store/deploy/registry';
import type { WorkOrderStore } from '../../../store/deploy/work-orders';
import type { Ledger } from '../../../store/ledger/ledger';
import type { AuthDeps } from '../../plugins/auth/principal';
import { createDeployAccess } from './access';
import { DEPLOY_ACTIONS, type DeployAction } from './actions/action';
import { configAnswer, configBody, configFailed, createConfigAction } from './actions/config';
import { createInboxActions, inboxAckAnswer, inboxAckBody, inboxPushAnswer, inboxPushBody } from './actions/inbox';
import { createPortActions, portAllocBody, portAnswer, portRegisterBody, portReleaseBody } from './actions/ports';
import { createRegistryActions, didRegisterBody, didRevokeBody, registryAnswer } from './actions/registry';
import { createReleaseActions, deployAnswer, deployBody, failedAnswer, rollbackBody } from './actions/release';
import { deployWeb } from './web';

export const DAL_VERSION = 'V2.0' as const;
export const DAL_ANCHOR = 'zhongshu-hub deployment arbitration: releases are atomic, every outcome is in the ledger';

const dalBody = z.discriminatedUnion(
  'action',
  [
    deployBody,
    rollbackBody,
    configBody,
    portAllocBody,
    portReleaseBody,
    portRegisterBody,
    didRegisterBody,
    didRevokeBody,
    inboxPushBody,
    inboxAckBody
  ],
  {
    error: () => `action must be one of: ${DEPLOY_ACTIONS.join(', ')}`
  }
);
const answered = z.union([deployAnswer, configAnswer, portAnswer, registryAnswer, inboxAckAnswer]);
const compensated = z.union([failedAnswer, configFailed]);
const errorShape = z
  .object({ ok: z.literal(false), error: z.string(), message: z.string(), trace_id: z.string() })
  .passthrough();

type DalBody = z.infer<typeof dalBody>;
type BodyOf<A extends DeployAction> = Extract<DalBody, { action: A }>;
type DalAnswer =
  | { status: 200; body: z.input<typeof answered> }
  | { status: 202; body: z.input<typeof inboxPushAnswer> }
  | { status: 502; body: z.input<typeof compensated> };
/** One handler per action; each checks the caller's access itself (did_* need an arbitrator, inbox_ack the node). */
type DeployHandlers = { [A in DeployAction]: (body: BodyOf<A>, request: FastifyRequest) => Promise<DalAnswer> };

export const deployRoutes: FastifyPluginAsyncZod<{
  temporal: Client;
  config: Config;
  ports: PortPoolStore;
  registry: DidRegistryStore;
  ledger: Ledger;
  adminTokenHash: string;
  orders: WorkOrderStore;
  /** What checking a node's key beside X-DID needs (did_register with the node's key). */
  nodeAuth: AuthDeps;
}> = async (app, { temporal, config, ports, registry, ledger, adminTokenHash, orders, nodeAuth }) => {
  const access = createDeployAccess({
    registry,
    adminTokenHash,
    arbitratorLevel: config.DEPLOY_ARBITRATOR_LEVEL,
    nodeAuth
  });
  const web = deployWeb(config);
  const handlers: DeployHandlers = {
    ...createReleaseActions({ temporal, config, access, web }),
    config: createConfigAction({ temporal, config, access, web }),
    ...createPortActions({ ports, access }),
    ...createRegistryActions({ registry, ledger, config, access }),
    ...createInboxActions({ temporal, orders, registry, ledger, config, access })
  };
  // Generic in the action, so each handler is called with its own body type and no cast.
  const dispatch = <A extends DeployAction>(action: A, body: BodyOf<A>, request: FastifyRequest) =>
    handlers[action](body, request);

  app.get(
    '/dal/health',
    {
      config: { auth: 'none' },
      schema: {
        response: {
          200: z.object({
            ok: z.boolean(),
            service: z.string(),
            version: z.literal(DAL_VERSION),
            port: z.number().int().describe('the deploy web server port (DEPLOY_WEB_PORT)'),
            锚定: z.string(),
            web: z
              .enum(['up', 'down', 'off', 'not_installed'])
              .describe('the hub nginx: answering, not answering, DEPLOY_WEB=off, or not installed'),
            web_detail: z.string().nullable()
          })
        }
      }
    },
    async () => {
      const why = web.unavailable();
      let state: 'up' | 'down' | 'off' | 'not_installed' =
        config.DEPLOY_WEB === 'off' ? 'off' : why ? 'not_installed' : 'down';
      if (!why) {
        state = await fetch(`${web.url}/`, { signal: AbortSignal.timeout(1000) }).then(
          (r) => (r.ok ? 'up' : 'down'),
          () => 'down'
        );
      }
      return {
        ok: true,
        service: `${SERVICE_NAME}-dal`,
        version: DAL_VERSION,
        port: config.DEPLOY_WEB_PORT,
        锚定: DAL_ANCHOR,
        web: state,
        web_detail: why
      };
    }
  );

  app.post(
    '/dal/deploy',
    {
      config: { auth: 'did' },
      // docs/deploy.md#actions: Content-Type application/json or 415 (Fastify would parse text/plain and answer 400).
      preValidation: async (request) => {
        const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (type !== 'application/json')
          throw new AppError('unsupported_media_type', 'POST /dal/deploy takes Content-Type: application/json');
      },
      schema: {
        body: dalBody,
        response: {
          200: answered,
          202: inboxPushAnswer.describe('inbox_push: the order is held for approval'),
          403: errorShape.describe(
            'The DID lacks the deploy channel (or, for did_register/did_revoke, the arbitrator level; with a node key, did_register asked for more than linking the calling DID to that node, or the node was rejected)'
          ),
          404: errorShape,
          409: errorShape,
          502: compensated
        }
      }
    },
    async (request, reply) => {
      const result = await dispatch(request.body.action, request.body, request);
      if (result.status === 202) return reply.code(202).send(result.body);
      if (result.status === 502) return reply.code(502).send(result.body);
      return result.body;
    }
  );

  app.get(
    '/dal/ports',
    {
      config: { auth: 'did' },
      schema: {
        querystring: z.object({ limit: queryInt(1, 1000).default(200), offset: queryInt(0, 100_000).default(0) }),
        response: {
          403: errorShape.describe('The DID lacks the deploy channel'),
          200: z.object({
            ok: z.literal(true),
            pool: z.object({ first: z.number().int(), last: z.number().int() }),
            total: z.number().int(),
            ports: z.array(
              z.object({
                port: z.number().int(),
                app: z.string(),
                kind: z.enum(['pool', 'registered']),
                at: z.string()
              })
            )
          })
        }
      }
    },
    async (request) => {
      await access.allow(request, 'deploy');
      const { total, ports: list } = await ports.list(request.query.limit, request.query.offset);
      return {
        ok: true as const,
        pool: config.PORT_POOL,
        total,
        ports: list.map(({ _id, ...rest }) => ({ port: _id, ...rest }))
      };
    }
  );
};
