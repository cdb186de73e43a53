/**
 * Node review (group review_admin, homologous auth):
 *   GET  /a2a/review/queue                       nodes in pending_review, oldest first
 *   POST /a2a/review/approve  { node_id, reason } approve: the node becomes online (heartbeat seen within
 *                                                 NODE_OFFLINE_AFTER_S) or offline
 *   POST /a2a/review/reject   { node_id, reason } reject: terminal; the node's key stops working
 * Both send the `review` update to node/<node_id>; the answer carries the node's resulting state. The decision is
 * recorded (ledger event hub.node.state_changed and the node document) with the reviewer's principal id and reason.
 * 404 for an unknown node, 409 when the node is not in a state the decision applies to.
 */
import { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { AppError, notFound } from '../../../core/errors';
import { nodeIdParam } from '../../../core/federation';
import { reviewNode } from '../../../workflows/node-lifecycle.client';
import type { ServiceContext } from '../../context';

const decisionBody = z.object({ node_id: nodeIdParam, reason: humanText(2000, { multiline: true }) }).strict();

export async function reviewRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  const group = (summary: string) => ({ auth: 'homologous' as const, directory: { group: 'review_admin' as const, summary } });

  app.get(
    '/a2a/review/queue',
    { config: group('Nodes waiting for review'), schema: { querystring: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), offset: z.coerce.number().int().min(0).default(0) }) } },
    async (request) => {
      const page = request.query as { limit: number; offset: number };
      const { total, nodes } = await ctx.nodes.list({ state: 'pending_review' }, page);
      return { ok: true, total, count: nodes.length, nodes };
    }
  );

  for (const decision of ['approve', 'reject'] as const) {
    app.post(`/a2a/review/${decision}`, { config: group(decision === 'approve' ? 'Approve a pending node' : 'Reject a node'), schema: { body: decisionBody } }, async (request) => {
      const { node_id, reason } = request.body as z.infer<typeof decisionBody>;
      const reviewer = request.principal!.did ?? request.principal!.id;
      if (!(await ctx.nodes.findPublic(node_id))) throw notFound(`No node ${node_id}`);
      const status = await reviewNode(ctx.temporal, node_id, { decision, reviewer, reason });
      return { ok: true, node_id, decision, state: status.state, node: status };
    });
  }
}
