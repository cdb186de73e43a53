/** GET /health on every listener: the listener is up and can reach MongoDB. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Db } from 'mongodb';
import { z } from 'zod';
import type { ListenerName } from '../directory';
import { HUB_VERSION, SERVICE_NAME } from '../../core/version';

export const healthResponse = z.object({
  ok: z.boolean(),
  status: z.enum(['up', 'degraded']),
  service: z.string(),
  listener: z.string(),
  version: z.string(),
  mongo: z.enum(['up', 'down'])
});

export const healthRoutes: FastifyPluginAsyncZod<{ db: Db; listener: ListenerName }> = async (app, { db, listener }) => {
  app.get('/health', { config: { auth: 'none' }, schema: { response: { 200: healthResponse } } }, async () => {
    const mongo = await db
      .command({ ping: 1 }, { timeoutMS: 1000 })
      .then(() => 'up' as const)
      .catch(() => 'down' as const);
    return { ok: mongo === 'up', status: mongo === 'up' ? ('up' as const) : ('degraded' as const), service: SERVICE_NAME, listener, version: HUB_VERSION, mongo };
  });
};
