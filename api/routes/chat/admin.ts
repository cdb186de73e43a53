/**
 * Chat gateway administration (Bearer ADMIN_TOKEN, the one error shape of /admin): a key's usage, an OAuth client's
 * usage on POST /v1/chat/stream, plan changes and key groups (services/chat/key-admin.ts). Issue, revoke and
 * regenerate are in api/routes/admin/. Every change is recorded in the ledger.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ChatConfig, ServiceConfig } from '../../../core/config.node';
import { PLAN_NAMES } from '../../../core/chat/plans';
import { humanText, queryInt } from '../../../core/identifiers';
import type { CredentialStore } from '../../../store/credentials';
import type { KeyGroupStore } from '../../../store/chat/key-groups';
import type { Ledger } from '../../../store/ledger/ledger';
import type { ChatServices } from '../../../services/chat/chat-services';
import { ERROR_BODY } from '../../response-docs';
import { createChatKeyAdmin } from '../../../services/chat/key-admin';
import { usageResponse } from './gateway.schema';

const keyParams = z.object({ key_id: z.string().regex(/^[a-f0-9]{16}$/, 'a 16-hex-digit key id') });
const groupParams = z.object({ group_id: z.string().regex(/^grp_[A-Za-z0-9_-]{1,40}$/, 'a group id grp_…') });
const group = z.object({
  group_id: z.string(),
  owner_key_id: z.string(),
  label: z.string().nullable(),
  created_at: z.string()
});
const member = z.object({
  key_id: z.string(),
  plan: z.string(),
  label: z.string().nullable(),
  created_at: z.string(),
  revoked: z.boolean()
});

export const chatAdminRoutes: FastifyPluginAsyncZod<{
  chat: ChatServices;
  credentials: CredentialStore;
  keyGroups: KeyGroupStore;
  ledger: Ledger;
  config: Pick<ServiceConfig, 'SERVICE_DID'> & Pick<ChatConfig, 'CHAT_OAUTH_PLAN'>;
}> = async (app, deps) => {
  const admin = { auth: 'admin' as const };
  const keys = createChatKeyAdmin(deps);

  app.get(
    '/admin/api-keys/:key_id/usage',
    {
      config: admin,
      schema: {
        params: keyParams,
        querystring: z.object({ days: queryInt(1, 90).optional() }),
        response: { 200: z.object({ ok: z.literal(true), usage: usageResponse }) }
      }
    },
    async (request) => ({
      ok: true as const,
      usage: await keys.keyUsage(request.params.key_id, request.query.days ?? 7)
    })
  );

  app.get(
    '/admin/oauth-clients/:client_id/chat-usage',
    {
      config: admin,
      schema: {
        params: z.object({ client_id: z.string().regex(/^client_[a-f0-9]{16}$/, 'an OAuth client id client_…') }),
        querystring: z.object({ days: queryInt(1, 90).optional() }),
        response: {
          200: z.object({
            ok: z.literal(true),
            usage: usageResponse.describe('key_id is oauth:<client_id>; plan and limits are CHAT_OAUTH_PLAN')
          })
        }
      }
    },
    async (request) => ({
      ok: true as const,
      usage: await keys.oauthClientUsage(request.params.client_id, request.query.days ?? 7)
    })
  );

  app.post(
    '/admin/api-keys/:key_id/plan',
    {
      config: admin,
      schema: {
        params: keyParams,
        body: z.object({ plan: z.enum(PLAN_NAMES) }),
        response: {
          200: z.object({ ok: z.literal(true), key_id: z.string(), plan: z.string(), previous_plan: z.string() })
        }
      }
    },
    async (request) => ({ ok: true as const, ...(await keys.changePlan(request.params.key_id, request.body.plan)) })
  );

  app.post(
    '/admin/api-keys/:key_id/groups',
    {
      config: admin,
      schema: {
        params: keyParams,
        body: z.object({ label: humanText(200).optional() }),
        response: {
          201: z.object({ ok: z.literal(true), group: group }).describe('Created'),
          409: ERROR_BODY.describe('The key is revoked, belongs to a group itself, or its plan has no key groups')
        }
      }
    },
    async (request, reply) =>
      reply.code(201).send({
        ok: true as const,
        group: await keys.createGroup(request.params.key_id, request.body.label ?? null)
      })
  );

  app.get(
    '/admin/api-keys/:key_id/groups',
    {
      config: admin,
      schema: {
        params: keyParams,
        response: { 200: z.object({ ok: z.literal(true), groups: z.array(group.extend({ keys: z.array(member) })) }) }
      }
    },
    async (request) => ({ ok: true as const, groups: await keys.listGroups(request.params.key_id) })
  );

  app.post(
    '/admin/key-groups/:group_id/keys',
    {
      config: admin,
      schema: {
        params: groupParams,
        body: z.object({ label: humanText(200).optional(), plan: z.enum(PLAN_NAMES).optional() }),
        response: {
          201: z
            .object({
              ok: z.literal(true),
              key_id: z.string(),
              api_key: z.string().describe('shown once; only its digest is stored'),
              group_id: z.string(),
              plan: z.string(),
              note: z.string()
            })
            .describe('Issued'),
          409: ERROR_BODY.describe('The owning key is revoked or its plan no longer has key groups')
        }
      }
    },
    async (request, reply) => {
      const issued = await keys.issueGroupKey(request.params.group_id, request.body.label ?? null, request.body.plan);
      return reply.code(201).send({
        ok: true as const,
        ...issued,
        note: 'Shown once; only its digest is stored. Its limits and usage are its own.'
      });
    }
  );
};
