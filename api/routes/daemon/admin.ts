/**
 * Administration of the local daemon (main listener, Bearer ADMIN_TOKEN): release an isolated asset, revoke an
 * asset, reset the circuit breaker. Each is an audit chain line and a ledger record (`hub.daemon.*`).
 * CLI: `npm run admin -- daemon-release <asset_id>`, `daemon-asset-revoke <asset_id>`, `daemon-breaker-reset`.
 */
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config, ServiceConfig, TemporalConfig } from '../../../core/config.node';
import { auditChainFor } from '../../../core/daemon/audit.node';
import { notFound } from '../../../core/errors';
import type { CredentialStore } from '../../../store/credentials';
import { ASSET_ID_PATTERN, DaemonAssets } from '../../../store/daemon/assets';
import type { Ledger } from '../../../store/ledger/ledger';
import { daemonBreakerWorkflowId } from '../../../contracts/daemon/breaker.contract';
import { resetBreaker } from '../../../workflows/daemon/dag.client';

const assetParams = z.object({ asset_id: z.string().regex(ASSET_ID_PATTERN, 'an asset id (asset_…)') });

export const daemonAdminRoutes: FastifyPluginAsyncZod<{
  credentials: CredentialStore;
  ledger: Ledger;
  temporal: Client;
  config: Pick<ServiceConfig, 'SERVICE_DID'> & Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'> & Pick<Config, 'dataDir'>;
}> = async (app, { credentials, ledger, temporal, config }) => {
  const admin = { auth: 'admin' as const };
  const assets = new DaemonAssets(credentials.daemonAssets);
  const chain = auditChainFor(config.dataDir);
  const record = async (action: string, value: Record<string, string | null>) => {
    const head = await chain.append({
      event: action === 'breaker_reset' ? 'breaker' : (action as 'released' | 'revoked'),
      actor: 'admin',
      ...value
    });
    await ledger.append({
      kind: 'event',
      key: `hub.daemon.${action}`,
      value: { ...value, audit_root: head.hash, audit_seq: head.seq },
      did: config.SERVICE_DID,
      truth_type: 'config'
    });
    return head;
  };

  const known = async (assetId: string) => {
    if (!(await assets.find(assetId))) throw notFound(`No daemon asset ${assetId}`);
  };

  app.post(
    '/admin/daemon-assets/:asset_id/release',
    {
      config: admin,
      schema: {
        params: assetParams,
        response: {
          200: z
            .object({
              ok: z.literal(true),
              asset_id: z.string(),
              released: z.boolean().describe('false: it was not isolated'),
              audit_root: z.string().nullable()
            })
            .describe('The asset may dispatch again (unless revoked)')
        }
      }
    },
    async (request) => {
      const { asset_id } = request.params;
      await known(asset_id);
      if (!(await assets.release(asset_id))) return { ok: true as const, asset_id, released: false, audit_root: null };
      const head = await record('released', { asset_id });
      return { ok: true as const, asset_id, released: true, audit_root: head.hash };
    }
  );

  app.post(
    '/admin/daemon-assets/:asset_id/revoke',
    {
      config: admin,
      schema: {
        params: assetParams,
        response: {
          200: z
            .object({
              ok: z.literal(true),
              asset_id: z.string(),
              revoked: z.literal(true),
              already_revoked: z.boolean(),
              audit_root: z.string().nullable()
            })
            .describe('Revoked for good')
        }
      }
    },
    async (request) => {
      const { asset_id } = request.params;
      await known(asset_id);
      if (!(await assets.revoke(asset_id)))
        return { ok: true as const, asset_id, revoked: true as const, already_revoked: true, audit_root: null };
      const head = await record('revoked', { asset_id });
      return { ok: true as const, asset_id, revoked: true as const, already_revoked: false, audit_root: head.hash };
    }
  );

  app.post(
    '/admin/daemon/breaker/reset',
    {
      config: admin,
      schema: {
        response: {
          200: z
            .object({ ok: z.literal(true), workflow_id: z.string(), reset: z.literal(true) })
            .describe('Reset signal sent: the breaker closes')
        }
      }
    },
    async () => {
      const workflowId = daemonBreakerWorkflowId(config.TEMPORAL_TASK_QUEUE);
      try {
        await resetBreaker(temporal, config.TEMPORAL_TASK_QUEUE, 'admin');
      } catch (err) {
        if ((err as Error).name === 'WorkflowNotFoundError')
          throw notFound(`${workflowId} is not running (no dispatch yet)`);
        throw err;
      }
      return { ok: true as const, workflow_id: workflowId, reset: true as const };
    }
  );
};
