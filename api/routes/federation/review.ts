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
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { humanText, queryInt } from '../../../core/identifiers';
import { notFound } from '../../../core/errors';
import { NODE_STATES, nodeIdParam } from '../../../core/federation/vocabulary';
import type { NodeStore } from '../../../store/federation/nodes';
import { reviewNode } from '../../../workflows/federation/node-lifecycle.client';
import { ERROR_BODY } from '../../response-docs';
import { publicNodeSchema } from './nodes.schema';

const decisionBody = z.object({ node_id: nodeIdParam, reason: humanText(2000, { multiline: true }) }).strict();

const queueResponse = z.object({
  ok: z.literal(true),
  total: z.number().int(),
  count: z.number().int(),
  nodes: z.array(publicNodeSchema)
});
/** The node workflow's view after the decision (contracts/federation/node-lifecycle.contract.ts NodeStatus). */
const nodeStatusSchema = z.object({
  node_id: z.string(),
  state: z.enum(NODE_STATES),
  state_since: z.string(),
  last_seen_at: z.string().nullable(),
  transitions: z.number().int(),
  runs: z.number().int().describe('how many times the workflow continued as new'),
  review: z
    .object({ decision: z.enum(['approved', 'rejected']), reviewer: z.string(), reason: z.string(), at: z.string() })
    .nullable()
});
const decisionResponse = z.object({
  ok: z.literal(true),
  node_id: z.string(),
  decision: z.enum(['approve', 'reject']),
  state: z.enum(NODE_STATES).describe("the node's state after the decision"),
  node: nodeStatusSchema
});

export const reviewRoutes: FastifyPluginAsyncZod<{ nodes: NodeStore; temporal: Client }> = async (
  app,
  { nodes, temporal }
) => {
  const group = (summary: string) => ({
    auth: 'homologous' as const,
    directory: { group: 'review_admin' as const, summary }
  });

  app.get(
    '/a2a/review/queue',
    {
      config: group('Nodes waiting for review'),
      schema: {
        querystring: z.object({ limit: queryInt(1, 200).default(50), offset: queryInt(0).default(0) }),
        response: { 200: queueResponse }
      }
    },
    async (request) => {
      const { total, nodes: pending } = await nodes.list({ state: 'pending_review' }, request.query);
      return { ok: true as const, total, count: pending.length, nodes: pending };
    }
  );

  for (const decision of ['approve', 'reject'] as const) {
    app.post(
      `/a2a/review/${decision}`,
      {
        config: group(decision === 'approve' ? 'Approve a pending node' : 'Reject a node'),
        schema: {
          body: decisionBody,
          response: {
            200: decisionResponse,
            409: ERROR_BODY.describe("The decision does not apply to the node's state")
          }
        }
      },
      async (request) => {
        const { node_id, reason } = request.body;
        const reviewer = request.principal!.did ?? request.principal!.id;
        if (!(await nodes.findPublic(node_id))) throw notFound(`No node ${node_id}`);
        const status = await reviewNode(temporal, node_id, { decision, reviewer, reason });
        return { ok: true as const, node_id, decision, state: status.state, node: status };
      }
    );
  }
};
