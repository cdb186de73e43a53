/** GET /a2a/endpoints (the full directory) and GET /a2a/endpoints/summary (SPEC §2.4), both from route declarations. */
import { FastifyInstance } from 'fastify';
import { AUTH_MODELS, AuthModel, ENDPOINT_GROUPS, ENDPOINT_GROUP_NAMES, QUICK_AUTH_MODELS } from '../../../core/endpoint-groups';
import { FEDERATION_API_VERSION, SERVICE_NAME } from '../../../core/version';
import { quickStartSteps } from '../../../core/quick-start';
import type { ServiceContext } from '../../context';

export async function endpointDirectoryRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  const base = ctx.config.publicUrl;

  const authModels = () => {
    const used = ctx.directory.countByAuth();
    return (Object.keys(AUTH_MODELS) as AuthModel[]).map((name) => ({ name, ...AUTH_MODELS[name], endpoints: used.get(name) ?? 0 }));
  };

  app.get('/a2a/endpoints', { config: { auth: 'none' } }, async () => {
    const entries = ctx.directory.entries();
    return {
      ok: true,
      gateway: SERVICE_NAME,
      version: FEDERATION_API_VERSION,
      total: entries.length,
      endpoints: entries.map((e) => ({
        method: e.method,
        path: e.path,
        url: `${e.listener === 'hub' ? ctx.config.hubPublicUrl : base}${e.path}`,
        group: e.group,
        auth: e.auth,
        public_read: e.public_read,
        summary: e.summary
      })),
      auth_models: authModels()
    };
  });

  app.get('/a2a/endpoints/summary', { config: { auth: 'none' } }, async () => {
    const counts = ctx.directory.countByGroup();
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    return {
      ok: true,
      gateway: SERVICE_NAME,
      summary: {
        total_endpoints: total,
        groups: ENDPOINT_GROUP_NAMES.length,
        auth_models: Object.keys(AUTH_MODELS).length,
        protocol: SERVICE_NAME,
        api_version: FEDERATION_API_VERSION
      },
      quick_start: quickStartSteps(base, ctx.config.NODE_OFFLINE_AFTER_S),
      endpoint_groups: Object.fromEntries(
        ENDPOINT_GROUP_NAMES.map((g) => [g, { count: counts.get(g) ?? 0, description: ENDPOINT_GROUPS[g].description, public_read: ENDPOINT_GROUPS[g].public_read }])
      ),
      auth_models_quick: Object.fromEntries(QUICK_AUTH_MODELS.map((m) => [m, AUTH_MODELS[m].credential])),
      full_directory_url: `${base}/a2a/endpoints`,
      doc_url: `${base}/docs`,
      join_url: `${base}/a2a/join/`
    };
  });
}
