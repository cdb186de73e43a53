/**
 * Human approval of held (high-risk) truth writes, for homologous approvers:
 *   GET  /api/truth/approvals?state=pending|approved|rejected|expired   (from Temporal visibility, like the Web UI)
 *   GET  /api/truth/approvals/:id                                        (the workflow's own state)
 *   POST /api/truth/approvals/:id/approve | /reject  { reason }         (signals approve / reject)
 * The decision is recorded with the approver's principal id. Listing is eventually consistent (a write held a
 * moment ago may take up to a second to appear); the per-id view is exact.
 */
import { FastifyInstance } from 'fastify';
import { WorkflowNotFoundError } from '@temporalio/client';
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { AppError, notFound } from '../../../core/errors';
import { approvalStatusQuery, approveSignal, pendingApprovalStatus, rejectSignal, TruthApprovalStatus, truthApprovalWorkflowId } from '../../../workflows/truth-approval.contract';
import { ApprovalStateAttr, TruthKeyAttr, TruthTypeAttr } from '../../../workflows/search-attributes';
import type { ServiceContext } from '../../context';

const approvalId = z.object({ id: z.string().regex(/^apr_[a-f0-9]{24}$/, 'an approval id such as apr_0123456789abcdef01234567') });
const DECISION_WAIT_MS = 10_000;
const QUERY_WAIT_MS = 2_000;

export async function approvalRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  const handleFor = (id: string) => ctx.temporal.workflow.getHandle(truthApprovalWorkflowId(id));

  /**
   * The exact state: the query while running, the result once closed. A query needs a worker; when none answers
   * within QUERY_WAIT_MS the state comes from the workflow's search attributes and memo (what the Web UI shows).
   */
  async function statusOf(id: string): Promise<TruthApprovalStatus> {
    const handle = handleFor(id);
    try {
      const description = await handle.describe();
      if (description.status.name === 'RUNNING') {
        const answered = await Promise.race([
          handle.query(approvalStatusQuery).catch(() => null),
          new Promise<null>((r) => setTimeout(() => r(null), QUERY_WAIT_MS))
        ]);
        if (answered) return answered;
        const memo = (description.memo ?? {}) as Record<string, string | null>;
        return pendingApprovalStatus({
          approval_id: id,
          key: String(memo.key ?? description.typedSearchAttributes.get(TruthKeyAttr) ?? ''),
          truth_type: memo.truth_type ?? null,
          did: String(memo.did ?? ''),
          held_because: String(memo.held_because ?? ''),
          requested_at: String(memo.requested_at ?? description.startTime.toISOString()),
          expires_at: String(memo.expires_at ?? '')
        });
      }
      if (description.status.name === 'COMPLETED') return (await handle.result()) as TruthApprovalStatus;
      throw new AppError('conflict', `approval workflow is ${description.status.name.toLowerCase()}; see the Temporal Web UI`);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw notFound(`No approval ${id}`);
      throw err;
    }
  }

  app.get(
    '/api/truth/approvals',
    { config: { auth: 'homologous' }, schema: { querystring: z.object({ state: z.enum(['pending', 'approved', 'rejected', 'expired']).default('pending'), limit: z.coerce.number().int().min(1).max(200).default(50) }) } },
    async (request) => {
      const { state, limit } = request.query as { state: string; limit: number };
      const running = state === 'pending' ? " AND ExecutionStatus = 'Running'" : '';
      const query = `WorkflowType = 'truthApprovalWorkflow' AND ApprovalState = '${state}'${running} AND TaskQueue = '${ctx.config.TEMPORAL_TASK_QUEUE}'`;
      const approvals = [];
      for await (const wf of ctx.temporal.workflow.list({ query, pageSize: limit })) {
        const memo = (wf.memo ?? {}) as Record<string, unknown>;
        approvals.push({
          approval_id: wf.workflowId.replace(/^truth-approval\//, ''),
          workflow_id: wf.workflowId,
          state: wf.typedSearchAttributes.get(ApprovalStateAttr) ?? state,
          key: wf.typedSearchAttributes.get(TruthKeyAttr) ?? memo.key,
          truth_type: wf.typedSearchAttributes.get(TruthTypeAttr) ?? memo.truth_type,
          did: memo.did,
          held_because: memo.held_because,
          requested_at: memo.requested_at
        });
        if (approvals.length >= limit) break;
      }
      return { ok: true, state, count: approvals.length, approvals };
    }
  );

  app.get('/api/truth/approvals/:id', { config: { auth: 'homologous' }, schema: { params: approvalId } }, async (request) => {
    const { id } = request.params as { id: string };
    return { ok: true, approval: await statusOf(id) };
  });

  for (const verdict of ['approve', 'reject'] as const) {
    app.post(
      `/api/truth/approvals/:id/${verdict}`,
      { config: { auth: 'homologous' }, schema: { params: approvalId, body: z.object({ reason: humanText(2000, { multiline: true }) }) } },
      async (request) => {
        const { id } = request.params as { id: string };
        const { reason } = request.body as { reason: string };
        const current = await statusOf(id);
        if (current.state !== 'pending') throw new AppError('conflict', `approval ${id} is already ${current.state}`, { approval: current });
        const approver = request.principal!.did ?? request.principal!.id;
        await handleFor(id).signal(verdict === 'approve' ? approveSignal : rejectSignal, { approver, reason });
        // The workflow appends and records the decision within moments; wait for it so the answer is final.
        const final = await Promise.race([
          handleFor(id).result() as Promise<TruthApprovalStatus>,
          new Promise<null>((r) => setTimeout(() => r(null), DECISION_WAIT_MS))
        ]);
        return { ok: true, approval: final ?? { ...current, state: 'pending' }, final: final !== null };
      }
    );
  }
}
