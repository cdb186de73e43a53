/**
 * Human approval of held (high-risk) truth writes, for homologous approvers:
 *   GET  /api/truth/approvals?state=pending|approved|rejected|expired   (from Temporal visibility, like the Web UI)
 *   GET  /api/truth/approvals/:id                                        (the workflow's own state)
 *   POST /api/truth/approvals/:id/approve | /reject  { reason }         (signals approve / reject)
 * The decision is recorded with the approver's principal id. Listing is eventually consistent (a write held a
 * moment ago may take up to a second to appear); the per-id view is exact.
 */
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { notFound } from '../../../core/errors';
import { humanText, queryInt } from '../../../core/identifiers';
import { approvalStatus, decideApproval, listApprovals } from '../../../workflows/ledger/truth-approval.client';
import { ERROR_BODY } from '../../response-docs';

const APPROVAL_STATES = ['pending', 'approved', 'rejected', 'expired'] as const;
const approvalId = z.object({
  id: z.string().regex(/^apr_[a-f0-9]{24}$/, 'an approval id such as apr_0123456789abcdef01234567')
});

const approvalStatusSchema = z.object({
  approval_id: z.string(),
  state: z.enum(APPROVAL_STATES),
  key: z.string(),
  truth_type: z.string().nullable(),
  did: z.string(),
  held_because: z.string(),
  requested_at: z.string(),
  expires_at: z.string(),
  decided_at: z.string().nullable(),
  approver: z.string().nullable(),
  reason: z.string().nullable(),
  seq: z.number().int().nullable().describe('set once the approved truth is appended'),
  event_id: z.string().nullable(),
  decision_seq: z.number().int().nullable().describe('the ledger entry recording the decision')
});
const listResponse = z.object({
  ok: z.literal(true),
  state: z.enum(APPROVAL_STATES),
  count: z.number().int(),
  approvals: z.array(
    z.object({
      approval_id: z.string(),
      workflow_id: z.string(),
      state: z.string(),
      key: z.string(),
      truth_type: z.string().nullable(),
      did: z.string().nullable(),
      held_because: z.string().nullable(),
      requested_at: z.string().nullable()
    })
  )
});
const oneResponse = z.object({ ok: z.literal(true), approval: approvalStatusSchema });
const decisionResponse = oneResponse.extend({
  final: z
    .boolean()
    .describe('false: the worker has not acted yet; the decision is stored in Temporal and applied later')
});

export const approvalRoutes: FastifyPluginAsyncZod<{ temporal: Client; config: Config }> = async (
  app,
  { temporal, config }
) => {
  app.get(
    '/api/truth/approvals',
    {
      config: { auth: 'homologous' },
      schema: {
        querystring: z.object({
          state: z.enum(APPROVAL_STATES).default('pending'),
          limit: queryInt(1, 200).default(50)
        }),
        response: { 200: listResponse }
      }
    },
    async (request) => {
      const { state, limit } = request.query;
      const approvals = await listApprovals(temporal, config.TEMPORAL_TASK_QUEUE, state, limit);
      return { ok: true as const, state, count: approvals.length, approvals };
    }
  );

  app.get(
    '/api/truth/approvals/:id',
    {
      // Approvers read any approval; the DID that wrote a held write reads its own (X-DID), as its status_url says.
      config: { auth: 'homologous', authAlso: ['did'] },
      schema: {
        params: approvalId,
        response: { 200: oneResponse, 409: ERROR_BODY.describe('The approval workflow was terminated or failed') }
      }
    },
    async (request) => {
      const approval = await approvalStatus(temporal, request.params.id);
      const { model, did } = request.principal!;
      // Another writer's approval does not exist for a DID.
      if (model === 'did' && approval.did !== did) throw notFound(`No approval ${request.params.id}`);
      return { ok: true as const, approval };
    }
  );

  for (const verdict of ['approve', 'reject'] as const) {
    app.post(
      `/api/truth/approvals/:id/${verdict}`,
      {
        config: { auth: 'homologous' },
        schema: {
          params: approvalId,
          body: z.object({ reason: humanText(2000, { multiline: true }) }),
          response: { 200: decisionResponse, 409: ERROR_BODY.describe('Already decided') }
        }
      },
      async (request) => {
        const approver = request.principal!.did ?? request.principal!.id;
        const { approval, final } = await decideApproval(temporal, request.params.id, verdict, {
          approver,
          reason: request.body.reason
        });
        return { ok: true as const, approval, final };
      }
    );
  }
};
