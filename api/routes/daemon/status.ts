/**
 * The local daemon's status (loopback listener only): 200 for a caller that passes the two-factor identity check
 * (X-Asset-Id + X-Order-Root of the current protocol version), 403 otherwise. GET /health stays public.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';

const statusResponse = z.object({ ok: z.literal(true), status: z.literal('up'), asset_id: z.string(), protocol_version: z.number().int(), started_at: z.string() });

export const daemonStatusRoutes: FastifyPluginAsyncZod<{ config: Config }> = async (app, { config }) => {
  const started = new Date().toISOString();
  app.get('/status', { config: { auth: 'daemon' }, schema: { response: { 200: statusResponse } } }, async (request) => ({
    ok: true as const,
    status: 'up' as const,
    asset_id: request.principal!.id,
    protocol_version: config.DAEMON_PROTOCOL_VERSION,
    started_at: started
  }));
};
