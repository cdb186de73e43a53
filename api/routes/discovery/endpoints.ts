/**
 * GET /a2a/endpoints (the full directory) and GET /a2a/endpoints/summary, both from route declarations
 * (docs/a2a.md#discovery-the-agent-card-and-the-endpoint-directory).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config, FederationConfig } from '../../../core/config.node';
import {
  AUTH_MODELS,
  AuthModel,
  ENDPOINT_GROUPS,
  ENDPOINT_GROUP_NAMES,
  QUICK_AUTH_MODELS
} from '../../../core/endpoint-groups';
import { FEDERATION_API_VERSION, SERVICE_NAME } from '../../../core/version';
import { quickStartSteps } from '../../../core/quick-start';
import type { EndpointDirectory } from '../../directory';

const authModelSchema = z.object({
  name: z.string(),
  credential: z.string(),
  description: z.string(),
  endpoints: z.number().int().describe('directory endpoints accepting this model (declared, or among auth_also)')
});
const directoryResponse = z.object({
  ok: z.literal(true),
  gateway: z.string(),
  version: z.string(),
  total: z.number().int(),
  endpoints: z.array(
    z.object({
      method: z.string(),
      path: z.string(),
      url: z.string(),
      group: z.string(),
      auth: z.string().describe('the authentication model the endpoint declares'),
      auth_also: z
        .array(z.string())
        .describe('further models the endpoint accepts: any one of auth and these authenticates (often empty)'),
      public_read: z.union([z.boolean(), z.literal('partial')]),
      summary: z.string()
    })
  ),
  auth_models: z.array(authModelSchema)
});
const summaryResponse = z.object({
  ok: z.literal(true),
  gateway: z.string(),
  summary: z.object({
    total_endpoints: z.number().int(),
    groups: z.number().int(),
    auth_models: z.number().int(),
    protocol: z.string(),
    api_version: z.string()
  }),
  quick_start: z.record(z.string(), z.string()),
  endpoint_groups: z.record(
    z.string(),
    z.object({
      count: z.number().int(),
      description: z.string(),
      public_read: z.union([z.boolean(), z.literal('partial')])
    })
  ),
  auth_models_quick: z.record(z.string(), z.string()),
  full_directory_url: z.string(),
  doc_url: z.string(),
  join_url: z.string()
});

export const endpointDirectoryRoutes: FastifyPluginAsyncZod<{
  directory: EndpointDirectory;
  config: Pick<Config, 'publicUrl' | 'hubPublicUrl'> & Pick<FederationConfig, 'NODE_OFFLINE_AFTER_S'>;
}> = async (app, { directory, config }) => {
  const base = config.publicUrl;

  const authModels = () => {
    const used = directory.countByAuth();
    return (Object.keys(AUTH_MODELS) as AuthModel[]).map((name) => ({
      name,
      ...AUTH_MODELS[name],
      endpoints: used.get(name) ?? 0
    }));
  };

  app.get(
    '/a2a/endpoints',
    { config: { auth: 'none' }, schema: { response: { 200: directoryResponse } } },
    async () => {
      const entries = directory.entries();
      return {
        ok: true as const,
        gateway: SERVICE_NAME,
        version: FEDERATION_API_VERSION,
        total: entries.length,
        endpoints: entries.map((e) => ({
          method: e.method,
          path: e.path,
          url: `${e.listener === 'hub' ? config.hubPublicUrl : base}${e.path}`,
          group: e.group,
          auth: e.auth,
          auth_also: e.auth_also,
          public_read: e.public_read,
          summary: e.summary
        })),
        auth_models: authModels()
      };
    }
  );

  app.get(
    '/a2a/endpoints/summary',
    { config: { auth: 'none' }, schema: { response: { 200: summaryResponse } } },
    async () => {
      const counts = directory.countByGroup();
      const total = [...counts.values()].reduce((a, b) => a + b, 0);
      return {
        ok: true as const,
        gateway: SERVICE_NAME,
        summary: {
          total_endpoints: total,
          groups: ENDPOINT_GROUP_NAMES.length,
          auth_models: Object.keys(AUTH_MODELS).length,
          protocol: SERVICE_NAME,
          api_version: FEDERATION_API_VERSION
        },
        quick_start: quickStartSteps(base, config.NODE_OFFLINE_AFTER_S),
        endpoint_groups: Object.fromEntries(
          ENDPOINT_GROUP_NAMES.map((g) => [
            g,
            {
              count: counts.get(g) ?? 0,
              description: ENDPOINT_GROUPS[g].description,
              public_read: ENDPOINT_GROUPS[g].public_read
            }
          ])
        ),
        auth_models_quick: Object.fromEntries(QUICK_AUTH_MODELS.map((m) => [m, AUTH_MODELS[m].credential])),
        full_directory_url: `${base}/a2a/endpoints`,
        doc_url: `${base}/docs`,
        join_url: `${base}/a2a/join/`
      };
    }
  );
};
