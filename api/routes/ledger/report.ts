/**
 * POST /api/report/truth (main and backup listeners): a node reports a truth record.
 *   - X-DID must be a registered DID (401 otherwise); the body per core/ledger/truth-record.ts (400 with the codes of
 *     docs/ledger.md#writing);
 *     a value over TRUTH_MAX_VALUE_BYTES gives 413.
 *   - Idempotency-Key: a retry returns the first result (the appended entry, or the same pending approval).
 *   - Quota: TRUTH_DAILY_QUOTA writes per DID per UTC day; past it 429 with Retry-After.
 *   - High-risk writes start truth-approval/<id> and answer 202; the rest are appended at once (200).
 *   - If MongoDB (or, for held writes, Temporal) cannot be reached within TRUTH_WRITE_TIMEOUT_MS the answer is 503
 *     and nothing was acknowledged: retry with the same Idempotency-Key, which can never produce a second entry.
 *   - Overload: at most TRUTH_MAX_IN_FLIGHT writes per process; one more is 503 overloaded with Retry-After before
 *     anything else happens (api/plugins/admission.ts).
 * The write itself (quota, idempotency, deadline, hold, outages) is services/ledger/write-truth.ts.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { idempotencyKeyHeaders } from '../../../core/idempotency';
import { AppError } from '../../../core/errors';
import { truthReportBody } from '../../../core/ledger/truth-record';
import type { TruthWrites } from '../../../services/ledger/write-truth';

export const SUCCESS_MESSAGE = 'truth recorded';

const writtenResponse = z.object({
  ok: z.literal(true),
  message: z.string(),
  truth_count: z.number().int(),
  seq: z.number().int(),
  event_id: z.string(),
  duplicate: z.boolean()
});
const pendingResponse = z.object({
  ok: z.literal(true),
  pending: z.literal(true),
  approval_id: z.string(),
  workflow_id: z.string(),
  message: z.string(),
  status_url: z.string()
});

type ReportDeps = { truthWrites: TruthWrites; config: Pick<Config, 'TRUTH_MAX_VALUE_BYTES' | 'publicUrl'> };

export const truthReportRoutes: FastifyPluginAsyncZod<ReportDeps> = async (app, { truthWrites, config }) => {
  app.post(
    '/api/report/truth',
    {
      config: {
        auth: 'did',
        didRecentlyActive: true,
        admission: 'truth_write',
        directory: {
          group: 'zhongshu_truth_api',
          summary: 'Write a truth record (append-only); high-risk writes wait for approval',
          publicRead: true
        }
      },
      bodyLimit: config.TRUTH_MAX_VALUE_BYTES + 16 * 1024,
      schema: {
        body: truthReportBody,
        headers: idempotencyKeyHeaders,
        response: { 200: writtenResponse, 202: pendingResponse }
      }
    },
    async (request, reply) => {
      const did = request.principal!.did!;
      const body = request.body;
      if (body.did !== undefined && body.did !== did) {
        throw new AppError('invalid_request', 'did in the body must equal the X-DID header', {
          fields: [{ field: 'body.did', message: 'differs from X-DID' }]
        });
      }
      const outcome = await truthWrites.writeTruth(
        {
          did,
          key: body.key,
          value: body.value,
          truthType: body.truth_type ?? null,
          idempotencyKey: request.headers['idempotency-key'] ?? null
        },
        request.log
      );

      if (outcome.kind === 'held') {
        return reply.code(202).send({
          ok: true as const,
          pending: true as const,
          approval_id: outcome.approvalId,
          workflow_id: outcome.workflowId,
          message: `held for approval: ${outcome.held}`,
          status_url: `${config.publicUrl}/api/truth/approvals/${outcome.approvalId}`
        });
      }
      // The seq of an entry is the ledger's size when it was appended: truth_count as of this write.
      return reply.code(200).send({
        ok: true as const,
        message: SUCCESS_MESSAGE,
        truth_count: outcome.seq,
        seq: outcome.seq,
        event_id: outcome.event_id,
        duplicate: outcome.duplicate
      });
    }
  );
};
