/**
 * Chat gateway administration (Bearer ADMIN_TOKEN, the one error shape of /admin): a key's usage, an OAuth client's
 * usage on POST /v1/chat/stream, plan changes and key groups. Issue, revoke and regenerate are in api/routes/admin/.
 * Every change is recorded in the ledger.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { PLAN_NAMES } from '../../../core/chat/plans';
import { AppError, notFound } from '../../../core/errors';
import { humanText, queryInt } from '../../../core/identifiers';
import type { CredentialStore } from '../../../store/credentials';
import type { KeyGroupStore } from '../../../store/chat/key-groups';
import type { Ledger } from '../../../store/ledger/ledger';
import type { ChatServices } from '../../../services/chat/chat-services';
import { ERROR_BODY } from '../../response-docs';
import { usageReport } from '../../../services/chat/usage-report';
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
  config: Config;
}> = async (app, { chat, credentials, keyGroups, ledger, config }) => {
  const admin = { auth: 'admin' as const };
  const record = (action: string, value: Record<string, string | number | boolean | null>) =>
    ledger.append({ kind: 'event', key: `hub.admin.${action}`, value, did: config.SERVICE_DID, truth_type: 'config' });
  const keyOrThrow = async (keyId: string) => {
    const key = await credentials.findApiKey(keyId);
    if (!key) throw notFound(`No API key ${keyId}`);
    return key;
  };

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
    async (request) => {
      const key = await keyOrThrow(request.params.key_id);
      return { ok: true as const, usage: await usageReport(chat, key._id, key.plan, request.query.days ?? 7) };
    }
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
    async (request) => {
      const clientId = request.params.client_id;
      const usage = await usageReport(chat, `oauth:${clientId}`, config.CHAT_OAUTH_PLAN, request.query.days ?? 7);
      // A revoked client's usage is still shown; a client id never issued (and never counted) is not found.
      if (usage.days.length === 0 && !(await credentials.findOAuthClient(clientId)))
        throw notFound(`No OAuth client ${clientId} (or it is revoked and used nothing in these days)`);
      return { ok: true as const, usage };
    }
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
    async (request) => {
      const key = await keyOrThrow(request.params.key_id);
      await keyGroups.setPlan(key._id, request.body.plan);
      await record('api_key_plan_changed', { key_id: key._id, from: key.plan, to: request.body.plan });
      return { ok: true as const, key_id: key._id, plan: request.body.plan, previous_plan: key.plan };
    }
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
    async (request, reply) => {
      const key = await keyOrThrow(request.params.key_id);
      if (key.revoked_at) throw new AppError('conflict', `API key ${key._id} is revoked`);
      if ((key as { group_id?: string }).group_id)
        throw new AppError(
          'conflict',
          `API key ${key._id} belongs to a group; groups are created under the account's own key`
        );
      if (!chat.planOf(key.plan).key_groups)
        throw new AppError(
          'conflict',
          `Plan ${key.plan} has no key groups (S4 and above have them); POST /admin/api-keys/${key._id}/plan first`
        );
      const doc = await keyGroups.create(key._id, request.body.label ?? null);
      await record('key_group_created', { group_id: doc._id, owner_key_id: key._id, label: doc.label });
      return reply.code(201).send({
        ok: true as const,
        group: { group_id: doc._id, owner_key_id: doc.owner_key_id, label: doc.label, created_at: doc.created_at }
      });
    }
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
    async (request) => {
      const key = await keyOrThrow(request.params.key_id);
      const groups = await keyGroups.listOf(key._id);
      return {
        ok: true as const,
        groups: await Promise.all(
          groups.map(async (g) => ({
            group_id: g._id,
            owner_key_id: g.owner_key_id,
            label: g.label,
            created_at: g.created_at,
            keys: (await keyGroups.members(g._id)).map((k) => ({
              key_id: k._id,
              plan: k.plan,
              label: k.label,
              created_at: k.created_at,
              revoked: k.revoked_at !== null
            }))
          }))
        )
      };
    }
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
      const g = await keyGroups.find(request.params.group_id);
      if (!g) throw notFound(`No key group ${request.params.group_id}`);
      const owner = await keyOrThrow(g.owner_key_id);
      if (owner.revoked_at) throw new AppError('conflict', `The group's owning key ${owner._id} is revoked`);
      if (!chat.planOf(owner.plan).key_groups)
        throw new AppError('conflict', `The owning key's plan ${owner.plan} has no key groups`);
      const plan = request.body.plan ?? owner.plan;
      const { apiKey, doc } = await credentials.issueApiKey(request.body.label ?? null, plan);
      await keyGroups.attach(doc._id, g);
      await record('api_key_issued', { key_id: doc._id, plan, label: doc.label, group_id: g._id });
      return reply.code(201).send({
        ok: true as const,
        key_id: doc._id,
        api_key: apiKey,
        group_id: g._id,
        plan,
        note: 'Shown once; only its digest is stored. Its limits and usage are its own.'
      });
    }
  );
};
