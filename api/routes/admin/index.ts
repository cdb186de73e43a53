/**
 * Administration (Bearer ADMIN_TOKEN): issues the first credentials so a new user can call protected routes at
 * once. Each secret is answered once and stored only as a digest. Every issue and revoke is recorded in the
 * ledger (without the secret) so it stays traceable.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { didSchema, humanText, usedDidSchema } from '../../../core/identifiers';
import { notFound, AppError } from '../../../core/errors';
import type { CredentialStore } from '../../../store/credentials';
import type { Ledger } from '../../../store/ledger/ledger';
import { ERROR_BODY } from '../../response-docs';

const label = humanText(200).optional();
const nullableLabel = z.string().nullable();
const didResponse = z.object({
  ok: z.literal(true),
  did: z.string(),
  label: nullableLabel,
  created: z.boolean(),
  created_at: z.string()
});
const revokedResponse = (idName: string) =>
  z.object({ ok: z.literal(true), [idName]: z.string(), revoked: z.literal(true) });
const shownOnce = (what: string) => `${what}: shown once; only its digest is stored`;

export const adminRoutes: FastifyPluginAsyncZod<{
  credentials: CredentialStore;
  ledger: Ledger;
  config: Config;
}> = async (app, { credentials, ledger, config }) => {
  const admin = { auth: 'admin' as const };

  const record = (action: string, value: Record<string, string | number | boolean | null>) =>
    ledger.append({ kind: 'event', key: `hub.admin.${action}`, value, did: config.SERVICE_DID, truth_type: 'config' });

  app.post(
    '/admin/dids',
    {
      config: admin,
      schema: {
        body: z.object({
          did: didSchema.optional(),
          label
        }),
        response: {
          200: didResponse.describe('Already registered'),
          201: didResponse.describe('Registered'),
          409: ERROR_BODY.describe('The DID was revoked')
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      const did = body.did ?? `did:zhongshu:${randomBytes(10).toString('hex')}`;
      const { did: doc, created } = await credentials.registerDid(did, body.label ?? null);
      if (doc.revoked_at) throw new AppError('conflict', `DID ${did} was revoked; register a new one`);
      if (created) await record('did_registered', { did, label: doc.label ?? null });
      return reply
        .code(created ? 201 : 200)
        .send({ ok: true as const, did, label: doc.label ?? null, created, created_at: doc.created_at });
    }
  );

  app.post(
    '/admin/dids/:did/revoke',
    { config: admin, schema: { params: z.object({ did: usedDidSchema }), response: { 200: revokedResponse('did') } } },
    async (request) => {
      const { did } = request.params;
      if (!(await credentials.revokeDid(did))) throw notFound(`No active DID ${did}`);
      await record('did_revoked', { did });
      return { ok: true as const, did, revoked: true as const };
    }
  );

  app.post(
    '/admin/homologous-tokens',
    {
      config: admin,
      schema: {
        body: z.object({ label, did: didSchema.optional() }),
        response: {
          201: z
            .object({
              ok: z.literal(true),
              token_id: z.string(),
              token: z.string().describe(shownOnce('the token')),
              did: z.string().nullable(),
              usage: z.string(),
              note: z.string()
            })
            .describe('Issued')
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      if (body.did && !(await credentials.activeDid(body.did))) {
        throw new AppError('invalid_request', `DID ${body.did} is not registered; POST /admin/dids first`, {
          fields: [{ field: 'body.did', message: 'not a registered DID' }]
        });
      }
      const { token, doc } = await credentials.issueHomologousToken(body.label ?? null, body.did ?? null);
      await record('homologous_token_issued', { token_id: doc.token_id, did: doc.did, label: doc.label });
      return reply.code(201).send({
        ok: true as const,
        token_id: doc.token_id,
        token,
        did: doc.did,
        usage: doc.did ? 'headers X-DID and X-Capture-Token' : 'header X-ZR-Token',
        note: 'Shown once; only its digest is stored.'
      });
    }
  );

  app.post(
    '/admin/homologous-tokens/:token_id/revoke',
    {
      config: admin,
      schema: {
        params: z.object({ token_id: z.string().min(1).max(100) }),
        response: { 200: revokedResponse('token_id') }
      }
    },
    async (request) => {
      const { token_id } = request.params;
      if (!(await credentials.revokeHomologousToken(token_id)))
        throw notFound(`No active homologous token ${token_id}`);
      await record('homologous_token_revoked', { token_id });
      return { ok: true as const, token_id, revoked: true as const };
    }
  );

  app.post(
    '/admin/api-keys',
    {
      config: admin,
      schema: {
        body: z.object({
          label,
          plan: z
            .string()
            .regex(/^[A-Za-z0-9_-]{1,20}$/)
            .default('S1')
        }),
        response: {
          201: z
            .object({
              ok: z.literal(true),
              key_id: z.string(),
              api_key: z.string().describe(shownOnce('the key')),
              plan: z.string(),
              note: z.string()
            })
            .describe('Issued')
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      const { apiKey, doc } = await credentials.issueApiKey(body.label ?? null, body.plan);
      await record('api_key_issued', { key_id: doc._id, plan: doc.plan, label: doc.label });
      return reply.code(201).send({
        ok: true as const,
        key_id: doc._id,
        api_key: apiKey,
        plan: doc.plan,
        note: 'Shown once; only its digest is stored. Server-side use only.'
      });
    }
  );

  const keyParams = { params: z.object({ key_id: z.string().regex(/^[a-f0-9]{16}$/, 'a 16-hex-digit key id') }) };

  const revokedKey = z.object({
    ok: z.literal(true),
    key_id: z.string(),
    revoked: z.literal(true),
    revoked_at: z.string().nullable()
  });
  app.post(
    '/admin/api-keys/:key_id/revoke',
    { config: admin, schema: { ...keyParams, response: { 200: revokedKey } } },
    async (request) => {
      const { key_id } = request.params;
      const doc = await credentials.revokeApiKey(key_id);
      if (!doc) throw notFound(`No API key ${key_id}`);
      await record('api_key_revoked', { key_id });
      return { ok: true as const, key_id, revoked: true as const, revoked_at: doc.revoked_at };
    }
  );

  const regenerated = z.object({
    ok: z.literal(true),
    key_id: z.string(),
    api_key: z.string().describe(shownOnce('the new key')),
    note: z.string()
  });
  app.post(
    '/admin/api-keys/:key_id/regenerate',
    { config: admin, schema: { ...keyParams, response: { 200: regenerated } } },
    async (request) => {
      const { key_id } = request.params;
      const res = await credentials.regenerateApiKey(key_id);
      if (!res) throw notFound(`No API key ${key_id}`);
      await record('api_key_regenerated', { key_id });
      return { ok: true as const, key_id, api_key: res.apiKey, note: 'The previous secret no longer works.' };
    }
  );

  app.post(
    '/admin/oauth-clients',
    {
      config: admin,
      schema: {
        body: z.object({
          label,
          scopes: z
            .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/))
            .max(20)
            .default([])
        }),
        response: {
          201: z
            .object({
              ok: z.literal(true),
              client_id: z.string(),
              client_secret: z.string().describe(shownOnce('the secret')),
              scopes: z.array(z.string()),
              token_endpoint: z.string()
            })
            .describe('Issued')
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      const { clientSecret, doc } = await credentials.issueOAuthClient(body.label ?? null, body.scopes);
      await record('oauth_client_issued', { client_id: doc._id, label: doc.label });
      return reply.code(201).send({
        ok: true as const,
        client_id: doc._id,
        client_secret: clientSecret,
        scopes: doc.scopes,
        token_endpoint: `${config.publicUrl}/v1/oauth/token`
      });
    }
  );

  const assetIssued = z.object({
    ok: z.literal(true),
    asset_id: z.string(),
    order_root: z.string().describe(shownOnce('the order root')),
    version: z.number().int(),
    usage: z.string()
  });
  app.post(
    '/admin/daemon-assets',
    { config: admin, schema: { body: z.object({ label }), response: { 201: assetIssued.describe('Issued') } } },
    async (request, reply) => {
      const body = request.body;
      const { orderRoot, doc } = await credentials.issueDaemonAsset(body.label ?? null, config.DAEMON_PROTOCOL_VERSION);
      await record('daemon_asset_issued', { asset_id: doc._id, version: doc.version });
      return reply.code(201).send({
        ok: true as const,
        asset_id: doc._id,
        order_root: orderRoot,
        version: doc.version,
        usage: 'headers X-Asset-Id and X-Order-Root on the daemon'
      });
    }
  );
};
