/**
 * POST /api/report/truth (main and backup listeners): a node reports a truth record.
 *   - X-DID must be a registered DID (401 otherwise); the body per core/ledger/truth-record.ts (400 with the spec codes);
 *     a value over TRUTH_MAX_VALUE_BYTES gives 413.
 *   - Idempotency-Key: a retry returns the first result (the appended entry, or the same pending approval). The key
 *     is not looked up before an append (the ledger's unique key refuses a second entry): a retry holds a quota slot
 *     while its append runs and gives it back when answered as a duplicate (to this process's lease), so a DID at
 *     its very limit can see a concurrent new write refused 429 meanwhile.
 *   - Quota: TRUTH_DAILY_QUOTA writes per DID per UTC day; past it 429 with Retry-After.
 *   - High-risk writes start truth-approval/<id> and answer 202; the rest are appended at once (200).
 *   - If MongoDB (or, for held writes, Temporal) cannot be reached within TRUTH_WRITE_TIMEOUT_MS the answer is 503
 *     and nothing was acknowledged: retry with the same Idempotency-Key, which can never produce a second entry.
 *     What had not started by then is withdrawn and its quota slot given back.
 *   - Overload: at most TRUTH_MAX_IN_FLIGHT writes per process; one more is 503 overloaded with Retry-After before
 *     anything else happens (api/plugins/admission.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { MongoError } from 'mongodb';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { canonicalJson } from '../../../core/ledger/canonical-json';
import { idempotencyKeyHeaders } from '../../../core/idempotency';
import { AppError } from '../../../core/errors';
import { heldBecause, TruthReportBody, truthReportBody } from '../../../core/ledger/truth-record';
import { holdTruthForApproval } from '../../../workflows/ledger/truth-approval.client';
import { TruthApprovalInput, truthApprovalWorkflowId } from '../../../contracts/ledger/truth-approval.contract';
import { AppendWithdrawn } from '../../../store/ledger/append';
import type { Ledger } from '../../../store/ledger/ledger';
import type { DailyQuota } from '../../../store/ledger/quota';
import { isMongoUnavailable } from '../../plugins/errors';

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

type ReportDeps = { ledger: Ledger; quota: DailyQuota; temporal: Client; config: Config };

export const truthReportRoutes: FastifyPluginAsyncZod<ReportDeps> = async (app, deps) => {
  const { ledger, quota, config } = deps;

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
      const idempotencyKey = request.headers['idempotency-key'] ?? null;
      if (body.did !== undefined && body.did !== did) {
        throw new AppError('invalid_request', 'did in the body must equal the X-DID header', {
          fields: [{ field: 'body.did', message: 'differs from X-DID' }]
        });
      }
      const valueJson = canonicalJson(body.value);
      if (Buffer.byteLength(valueJson) > config.TRUTH_MAX_VALUE_BYTES) {
        throw new AppError(
          'payload_too_large',
          `value is ${Buffer.byteLength(valueJson)} bytes as canonical JSON; the limit is ${config.TRUTH_MAX_VALUE_BYTES}`
        );
      }

      // Past the deadline the caller gets 503 and whatever has not started is withdrawn: a quota slot taken for a
      // write that is then withdrawn is given back, so an abandoned write neither spends quota nor runs later.
      const outcome = await withDeadline(config.TRUTH_WRITE_TIMEOUT_MS, async (signal, deadline) => {
        // A retried write returns what the first one got, without spending quota. A write that is appended learns
        // that from the append itself (the ledger's unique key refuses a second entry, and its quota slot is given
        // back), so the key is looked up beforehand only where no append follows: a held write, and a write refused
        // for quota. (On FerretDB/SQLite a lookup scans the idempotency records: one before every keyed write made
        // those writes slower the longer the ledger.)
        const written = (entry: { seq: number; event_id: string }) => ({
          kind: 'written' as const,
          seq: entry.seq,
          event_id: entry.event_id,
          duplicate: true
        });
        const alreadyWritten = async () =>
          idempotencyKey ? await ledger.findByIdempotencyKey(did, idempotencyKey) : null;
        const held = heldBecause(body.key, body.truth_type, {
          highRiskTypes: config.TRUTH_HIGH_RISK_TYPES,
          highRiskKeyPrefixes: config.TRUTH_HIGH_RISK_KEY_PREFIXES
        });
        if (held) {
          const existing = await alreadyWritten();
          if (existing) return written(existing);
        }
        signal.throwIfAborted();
        const day = new Date().toISOString().slice(0, 10);
        const scope = `truth:${did}`;
        const overQuota = async () => {
          const existing = held ? null : await alreadyWritten(); // (a held write was looked up above)
          if (existing) return written(existing);
          throw new AppError(
            'quota_exceeded',
            `Daily quota of ${config.TRUTH_DAILY_QUOTA} truth writes for ${did} is used up`,
            { limit: config.TRUTH_DAILY_QUOTA },
            { 'Retry-After': String(secondsUntilUtcMidnight()) }
          );
        };
        const input = {
          kind: 'truth' as const,
          key: body.key,
          value: body.value,
          truth_type: body.truth_type ?? null,
          did,
          idempotencyKey
        };
        if (!held) {
          // Where another host holds the ledger writer lease, it takes the slot with the append: one request (null:
          // nobody else holds it, or it was not reached; then as below, here). Withdrawn there: no slot spent.
          const counted = await ledger.appendCounted(
            input,
            { scope, day, limit: config.TRUTH_DAILY_QUOTA },
            { signal, deadline }
          );
          if (counted === 'over_quota') return overQuota();
          if (counted)
            return {
              kind: 'written' as const,
              seq: counted.entry.seq,
              event_id: counted.entry.event_id,
              duplicate: counted.duplicate
            };
        }
        const allowance = await quota.consume(scope, day, config.TRUTH_DAILY_QUOTA);
        if (!allowance.allowed) return overQuota();
        const giveBack = () =>
          quota.refund(scope, day, allowance.count).catch((err) => request.log.warn({ err }, 'quota refund failed'));
        const refund = async (reason: unknown) => {
          await giveBack();
          throw reason;
        };
        if (signal.aborted) return refund(signal.reason);
        if (held)
          return {
            kind: 'held' as const,
            ...(await holdForApproval(deps, { did, body, valueJson, idempotencyKey, held }))
          };
        const appended = await ledger
          .append(input, { signal, deadline })
          .catch((err) => (err instanceof AppendWithdrawn ? refund(err) : Promise.reject(err)));
        // A retry: the slot taken for it is given back (the first write spent one).
        if (appended.duplicate) await giveBack();
        return {
          kind: 'written' as const,
          seq: appended.entry.seq,
          event_id: appended.entry.event_id,
          duplicate: appended.duplicate
        };
      }).catch((err: unknown) => {
        // Any other database failure of a write (FerretDB refusing a write while it stops or starts, say) is not
        // the caller's doing: 503, and a retry with the same Idempotency-Key lands the write exactly once.
        if (err instanceof MongoError && !isMongoUnavailable(err)) {
          request.log.error({ err }, 'truth write: the database failed');
          throw new AppError(
            'unavailable',
            'The ledger could not store the write; retry with the same Idempotency-Key',
            {},
            { 'Retry-After': '5' }
          );
        }
        throw err;
      });

      if (outcome.kind === 'held') {
        return reply.code(202).send({
          ok: true as const,
          pending: true as const,
          approval_id: outcome.approvalId,
          workflow_id: truthApprovalWorkflowId(outcome.approvalId),
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

async function holdForApproval(
  { temporal, config }: Pick<ReportDeps, 'temporal' | 'config'>,
  w: { did: string; body: TruthReportBody; valueJson: string; idempotencyKey: string | null; held: string }
): Promise<{ approvalId: string; held: string }> {
  // With an Idempotency-Key the approval id is derived from it, so a retried write finds the same workflow.
  const approvalId = w.idempotencyKey
    ? `apr_${createHash('sha256').update(`${w.did}\n${w.idempotencyKey}`).digest('hex').slice(0, 24)}`
    : `apr_${randomBytes(12).toString('hex')}`;
  const input: TruthApprovalInput = {
    version: 1,
    approval_id: approvalId,
    truth: {
      key: w.body.key,
      value_json: w.valueJson,
      truth_type: w.body.truth_type ?? null,
      did: w.did,
      idempotency_key: w.idempotencyKey
    },
    held_because: w.held,
    requested_at: new Date().toISOString(),
    timeout_seconds: config.TRUTH_APPROVAL_TIMEOUT_S,
    hub_did: config.SERVICE_DID
  };
  await holdTruthForApproval(temporal, config.TEMPORAL_TASK_QUEUE, input);
  return { approvalId, held: w.held };
}

/**
 * Bounds a write: past `ms` (at `deadline`), 503 (the caller retries with its Idempotency-Key) and `work`'s signal
 * is aborted, so the steps it has not started are withdrawn. Database and Temporal outages are mapped to 503 by the app's error
 * handler, like everywhere else.
 */
async function withDeadline<T>(ms: number, work: (signal: AbortSignal, deadline: number) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const deadline = Date.now() + ms;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new AppError(
        'unavailable',
        `The ledger did not answer within ${ms} ms; retry with the same Idempotency-Key`,
        {},
        { 'Retry-After': '5' }
      );
      controller.abort(error);
      reject(error);
    }, ms);
  });
  try {
    return await Promise.race([work(controller.signal, deadline), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

function secondsUntilUtcMidnight(): number {
  const now = new Date();
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((midnight - now.getTime()) / 1000));
}
