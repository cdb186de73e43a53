/**
 * Human approval of held (high-risk) truth writes, for homologous approvers:
 *   GET  /api/truth/approvals?state=pending|approved|rejected|expired   (from Temporal visibility, like the Web UI)
 *   GET  /api/truth/approvals/:id                                        (the workflow's own state)
 *   POST /api/truth/approvals/:id/approve | /reject  { reason }         (signals approve / reject)
 * The decision is recorded with the approver's principal id. Listing is eventually consistent (a write held a
 * moment ago may take up to a second to appear); the per-id view is exact.
 */
import { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { approvalStatus, decideApproval, listApprovals } from '../../../workflows/truth-approval.client';
import type { ServiceContext } from '../../context';

const approvalId = z.object({ id: z.string().regex(/^apr_[a-f0-9]{24}$/, 'an approval id such as apr_0123456789abcdef01234567') });

export async function approvalRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;

  app.get(
    '/api/truth/approvals',
    { config: { auth: 'homologous' }, schema: { querystring: z.object({ state: z.enum(['pending', 'approved', 'rejected', 'expired']).default('pending'), limit: z.coerce.number().int().min(1).max(200).default(50) }) } },
    async (request) => {
      const { state, limit } = request.query as { state: 'pending' | 'approved' | 'rejected' | 'expired'; limit: number };
      const approvals = await listApprovals(ctx.temporal, ctx.config.TEMPORAL_TASK_QUEUE, state, limit);
      return { ok: true, state, count: approvals.length, approvals };
    }
  );

  app.get('/api/truth/approvals/:id', { config: { auth: 'homologous' }, schema: { params: approvalId } }, async (request) => {
    const { id } = request.params as { id: string };
    return { ok: true, approval: await approvalStatus(ctx.temporal, id) };
  });

  for (const verdict of ['approve', 'reject'] as const) {
    app.post(
      `/api/truth/approvals/:id/${verdict}`,
      { config: { auth: 'homologous' }, schema: { params: approvalId, body: z.object({ reason: humanText(2000, { multiline: true }) }) } },
      async (request) => {
        const { id } = request.params as { id: string };
        const { reason } = request.body as { reason: string };
        const approver = request.principal!.did ?? request.principal!.id;
        const { approval, final } = await decideApproval(ctx.temporal, id, verdict, { approver, reason });
        return { ok: true, approval, final };
      }
    );
  }
}
