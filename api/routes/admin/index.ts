/**
 * Administration (Bearer ADMIN_TOKEN): issues the first credentials so a new user can call protected routes at
 * once. Each secret is answered once and stored only as a digest. Every issue and revoke is recorded in the
 * ledger (without the secret) so it stays traceable.
 */
import { randomBytes } from 'node:crypto';
import { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { didSchema, humanText } from '../../../core/identifiers';
import { notFound, AppError } from '../../../core/errors';
import type { ServiceContext } from '../../context';

const label = humanText(200).optional();

export async function adminRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  const admin = { auth: 'admin' as const };

  const record = (action: string, value: Record<string, string | number | boolean | null>) =>
    ctx.ledger.append({ kind: 'event', key: `hub.admin.${action}`, value, did: ctx.config.SERVICE_DID, truth_type: 'config' });

  app.post(
    '/admin/dids',
    {
      config: admin,
      schema: {
        body: z.object({
          did: didSchema.optional(),
          label
        })
      }
    },
    async (request, reply) => {
      const body = request.body as { did?: string; label?: string };
      const did = body.did ?? `did:zhongshu:${randomBytes(10).toString('hex')}`;
      const { did: doc, created } = await ctx.credentials.registerDid(did, body.label ?? null);
      if (doc.revoked_at) throw new AppError('conflict', `DID ${did} was revoked; register a new one`);
      if (created) await record('did_registered', { did, label: doc.label });
      return reply.code(created ? 201 : 200).send({ ok: true, did, label: doc.label, created, created_at: doc.created_at });
    }
  );

  app.post('/admin/dids/:did/revoke', { config: admin, schema: { params: z.object({ did: didSchema }) } }, async (request) => {
    const { did } = request.params as { did: string };
    if (!(await ctx.credentials.revokeDid(did))) throw notFound(`No active DID ${did}`);
    await record('did_revoked', { did });
    return { ok: true, did, revoked: true };
  });

  app.post(
    '/admin/homologous-tokens',
    {
      config: admin,
      schema: { body: z.object({ label, did: didSchema.optional() }) }
    },
    async (request, reply) => {
      const body = request.body as { label?: string; did?: string };
      if (body.did && !(await ctx.credentials.activeDid(body.did))) {
        throw new AppError('invalid_request', `DID ${body.did} is not registered; POST /admin/dids first`, { fields: [{ field: 'body.did', message: 'not a registered DID' }] });
      }
      const { token, doc } = await ctx.credentials.issueHomologousToken(body.label ?? null, body.did ?? null);
      await record('homologous_token_issued', { token_id: doc.token_id, did: doc.did, label: doc.label });
      return reply.code(201).send({
        ok: true,
        token_id: doc.token_id,
        token,
        did: doc.did,
        usage: doc.did ? 'headers X-DID and X-Capture-Token' : 'header X-ZR-Token',
        note: 'Shown once; only its digest is stored.'
      });
    }
  );

  app.post('/admin/homologous-tokens/:token_id/revoke', { config: admin, schema: { params: z.object({ token_id: z.string().min(1).max(100) }) } }, async (request) => {
    const { token_id } = request.params as { token_id: string };
    if (!(await ctx.credentials.revokeHomologousToken(token_id))) throw notFound(`No active homologous token ${token_id}`);
    await record('homologous_token_revoked', { token_id });
    return { ok: true, token_id, revoked: true };
  });

  app.post(
    '/admin/api-keys',
    { config: admin, schema: { body: z.object({ label, plan: z.string().regex(/^[A-Za-z0-9_-]{1,20}$/).default('S1') }) } },
    async (request, reply) => {
      const body = request.body as { label?: string; plan: string };
      const { apiKey, doc } = await ctx.credentials.issueApiKey(body.label ?? null, body.plan);
      await record('api_key_issued', { key_id: doc._id, plan: doc.plan, label: doc.label });
      return reply.code(201).send({ ok: true, key_id: doc._id, api_key: apiKey, plan: doc.plan, note: 'Shown once; only its digest is stored. Server-side use only.' });
    }
  );

  const keyParams = { params: z.object({ key_id: z.string().regex(/^[a-f0-9]{16}$/, 'a 16-hex-digit key id') }) };

  app.post('/admin/api-keys/:key_id/revoke', { config: admin, schema: keyParams }, async (request) => {
    const { key_id } = request.params as { key_id: string };
    const doc = await ctx.credentials.revokeApiKey(key_id);
    if (!doc) throw notFound(`No API key ${key_id}`);
    await record('api_key_revoked', { key_id });
    return { ok: true, key_id, revoked: true, revoked_at: doc.revoked_at };
  });

  app.post('/admin/api-keys/:key_id/regenerate', { config: admin, schema: keyParams }, async (request) => {
    const { key_id } = request.params as { key_id: string };
    const res = await ctx.credentials.regenerateApiKey(key_id);
    if (!res) throw notFound(`No API key ${key_id}`);
    await record('api_key_regenerated', { key_id });
    return { ok: true, key_id, api_key: res.apiKey, note: 'The previous secret no longer works.' };
  });

  app.post(
    '/admin/oauth-clients',
    { config: admin, schema: { body: z.object({ label, scopes: z.array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/)).max(20).default([]) }) } },
    async (request, reply) => {
      const body = request.body as { label?: string; scopes: string[] };
      const { clientSecret, doc } = await ctx.credentials.issueOAuthClient(body.label ?? null, body.scopes);
      await record('oauth_client_issued', { client_id: doc._id, label: doc.label });
      return reply.code(201).send({ ok: true, client_id: doc._id, client_secret: clientSecret, scopes: doc.scopes, token_endpoint: `${ctx.config.publicUrl}/v1/oauth/token` });
    }
  );

  app.post('/admin/daemon-assets', { config: admin, schema: { body: z.object({ label }) } }, async (request, reply) => {
    const body = request.body as { label?: string };
    const { orderRoot, doc } = await ctx.credentials.issueDaemonAsset(body.label ?? null, ctx.config.DAEMON_PROTOCOL_VERSION);
    await record('daemon_asset_issued', { asset_id: doc._id, version: doc.version });
    return reply.code(201).send({ ok: true, asset_id: doc._id, order_root: orderRoot, version: doc.version, usage: 'headers X-Asset-Id and X-Order-Root on the daemon' });
  });
}
