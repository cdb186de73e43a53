/**
 * The chat gateway's key administration: a key's usage, an OAuth client's usage on POST /v1/chat/stream, plan
 * changes, and key groups (created under an account's own key on a plan that has them; each key issued into a
 * group has limits and usage of its own). Every change is recorded in the ledger as a `hub.admin.<action>` event.
 */
import type { ChatConfig, ServiceConfig } from '../../core/config.node';
import { AppError, notFound } from '../../core/errors';
import type { KeyGroupStore } from '../../store/chat/key-groups';
import type { CredentialStore } from '../../store/credentials';
import type { Ledger } from '../../store/ledger/ledger';
import type { ChatServices } from './chat-services';
import { usageReport } from './usage-report';

export type ChatKeyAdmin = ReturnType<typeof createChatKeyAdmin>;

export function createChatKeyAdmin(deps: {
  chat: Pick<ChatServices, 'planOf' | 'usage'>;
  credentials: Pick<CredentialStore, 'findApiKey' | 'findOAuthClient' | 'issueApiKey'>;
  keyGroups: KeyGroupStore;
  ledger: Pick<Ledger, 'append'>;
  config: Pick<ServiceConfig, 'SERVICE_DID'> & Pick<ChatConfig, 'CHAT_OAUTH_PLAN'>;
}) {
  const { chat, credentials, keyGroups, ledger, config } = deps;
  const record = (action: string, value: Record<string, string | number | boolean | null>) =>
    ledger.append({ kind: 'event', key: `hub.admin.${action}`, value, did: config.SERVICE_DID, truth_type: 'config' });
  const keyOrThrow = async (keyId: string) => {
    const key = await credentials.findApiKey(keyId);
    if (!key) throw notFound(`No API key ${keyId}`);
    return key;
  };

  return {
    /** A key's usage over the last `days` days under its plan. */
    async keyUsage(keyId: string, days: number) {
      const key = await keyOrThrow(keyId);
      return usageReport(chat, key._id, key.plan, days);
    },

    /** An OAuth client's usage on POST /v1/chat/stream (as `oauth:<client_id>`, under CHAT_OAUTH_PLAN). */
    async oauthClientUsage(clientId: string, days: number) {
      const usage = await usageReport(chat, `oauth:${clientId}`, config.CHAT_OAUTH_PLAN, days);
      // A revoked client's usage is still shown; a client id never issued (and never counted) is not found.
      if (usage.days.length === 0 && !(await credentials.findOAuthClient(clientId)))
        throw notFound(`No OAuth client ${clientId} (or it is revoked and used nothing in these days)`);
      return usage;
    },

    async changePlan(keyId: string, plan: string) {
      const key = await keyOrThrow(keyId);
      await keyGroups.setPlan(key._id, plan);
      await record('api_key_plan_changed', { key_id: key._id, from: key.plan, to: plan });
      return { key_id: key._id, plan, previous_plan: key.plan };
    },

    /** A key group under an account's own key (409 when revoked, itself in a group, or its plan has none). */
    async createGroup(keyId: string, label: string | null) {
      const key = await keyOrThrow(keyId);
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
      const doc = await keyGroups.create(key._id, label);
      await record('key_group_created', { group_id: doc._id, owner_key_id: key._id, label: doc.label });
      return { group_id: doc._id, owner_key_id: doc.owner_key_id, label: doc.label, created_at: doc.created_at };
    },

    /** The groups under a key, each with its keys. */
    async listGroups(keyId: string) {
      const key = await keyOrThrow(keyId);
      const groups = await keyGroups.listOf(key._id);
      return Promise.all(
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
      );
    },

    /** Issues a key into a group (the owner's plan unless another is named); the secret is returned once. */
    async issueGroupKey(groupId: string, label: string | null, plan: string | undefined) {
      const g = await keyGroups.find(groupId);
      if (!g) throw notFound(`No key group ${groupId}`);
      const owner = await keyOrThrow(g.owner_key_id);
      if (owner.revoked_at) throw new AppError('conflict', `The group's owning key ${owner._id} is revoked`);
      if (!chat.planOf(owner.plan).key_groups)
        throw new AppError('conflict', `The owning key's plan ${owner.plan} has no key groups`);
      const keyPlan = plan ?? owner.plan;
      const { apiKey, doc } = await credentials.issueApiKey(label, keyPlan);
      await keyGroups.attach(doc._id, g);
      await record('api_key_issued', { key_id: doc._id, plan: keyPlan, label: doc.label, group_id: g._id });
      return { key_id: doc._id, api_key: apiKey, group_id: g._id, plan: keyPlan };
    }
  };
}
