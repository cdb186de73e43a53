/**
 * Administration (Bearer ADMIN_TOKEN): issues the first credentials so a new user can call protected routes at
 * once. Each secret is answered once and stored only as a digest. Every issue and revoke is recorded in the
 * ledger (without the secret) so it stays traceable (services/admin/credential-admin.ts).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { usedDidSchema } from '../../../core/identifiers';
import { createCredentialAdmin, type CredentialAdminDeps } from '../../../services/admin/credential-admin';
import { ERROR_BODY } from '../../response-docs';
import {
  apiKeyBody,
  apiKeyIssued,
  assetIssued,
  daemonAssetBody,
  didBody,
  didResponse,
  homologousTokenBody,
  homologousTokenIssued,
  keyParams,
  oauthClientBody,
  oauthClientIssued,
  regenerated,
  revokedKey,
  revokedResponse
} from './index.schema';

export const adminRoutes: FastifyPluginAsyncZod<CredentialAdminDeps> = async (app, deps) => {
  const admin = { auth: 'admin' as const };
  const issue = createCredentialAdmin(deps);

  app.post(
    '/admin/dids',
    {
      config: admin,
      schema: {
        body: didBody,
        response: {
          200: didResponse.describe('Already registered'),
          201: didResponse.describe('Registered'),
          409: ERROR_BODY.describe('The DID was revoked')
        }
      }
    },
    async (request, reply) => {
      const answer = await issue.registerDid(request.body.did, request.body.label ?? null);
      return reply.code(answer.created ? 201 : 200).send(answer);
    }
  );

  app.post(
    '/admin/dids/:did/revoke',
    { config: admin, schema: { params: z.object({ did: usedDidSchema }), response: { 200: revokedResponse('did') } } },
    async (request) => issue.revokeDid(request.params.did)
  );

  app.post(
    '/admin/homologous-tokens',
    { config: admin, schema: { body: homologousTokenBody, response: { 201: homologousTokenIssued } } },
    async (request, reply) =>
      reply.code(201).send(await issue.issueHomologousToken(request.body.label ?? null, request.body.did ?? null))
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
    async (request) => issue.revokeHomologousToken(request.params.token_id)
  );

  app.post(
    '/admin/api-keys',
    { config: admin, schema: { body: apiKeyBody, response: { 201: apiKeyIssued } } },
    async (request, reply) =>
      reply.code(201).send(await issue.issueApiKey(request.body.label ?? null, request.body.plan))
  );

  app.post(
    '/admin/api-keys/:key_id/revoke',
    { config: admin, schema: { ...keyParams, response: { 200: revokedKey } } },
    async (request) => issue.revokeApiKey(request.params.key_id)
  );

  app.post(
    '/admin/api-keys/:key_id/regenerate',
    { config: admin, schema: { ...keyParams, response: { 200: regenerated } } },
    async (request) => issue.regenerateApiKey(request.params.key_id)
  );

  app.post(
    '/admin/oauth-clients',
    { config: admin, schema: { body: oauthClientBody, response: { 201: oauthClientIssued } } },
    async (request, reply) =>
      reply.code(201).send(await issue.issueOAuthClient(request.body.label ?? null, request.body.scopes))
  );

  app.post(
    '/admin/daemon-assets',
    { config: admin, schema: { body: daemonAssetBody, response: { 201: assetIssued.describe('Issued') } } },
    async (request, reply) => reply.code(201).send(await issue.issueDaemonAsset(request.body.label ?? null))
  );
};
