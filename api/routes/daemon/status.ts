/**
 * The local daemon's status (loopback listener only): 200 for a caller that passes the two-factor identity check
 * (X-Asset-Id + X-Order-Root of the current protocol version), 403 otherwise. GET /health stays public.
 */
import { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../context';

export async function daemonStatusRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const started = new Date().toISOString();
  app.get('/status', { config: { auth: 'daemon' } }, async (request) => ({
    ok: true,
    status: 'up',
    asset_id: request.principal!.id,
    protocol_version: opts.ctx.config.DAEMON_PROTOCOL_VERSION,
    started_at: started
  }));
}
