/**
 * The writer lease holder's routes (main listener; store/ledger/writer/lease.ts, the client is
 * store/ledger/writer/lease-holder-client.ts), what another API replica forwards to this one:
 *   POST /internal/ledger/appends   an append;
 *   POST /internal/ledger/counted-appends
 *                                   a truth write's append with its daily-quota slot, both made here as for
 *                                   POST /api/report/truth (services/ledger/write-truth.ts): `over_quota` when none is
 *                                   left; the slot given back when the write is withdrawn or is a retry (duplicate);
 *   POST /internal/ledger/counted-append-batches
 *                                   several of those in one request ({ writes } → { answers }, in order; `failed` for
 *                                   one the holder failed on, whose outcome is then unknown);
 *   POST /internal/quota/consume    a block of slots the sender hands out itself (services/ledger/lend-quota-slots.ts);
 *   POST /internal/quota/refund     slots it did not use ({ scope, day, slots } → { refunded }).
 *
 *   - `Authorization: Bearer <LEDGER_FORWARD_SECRET>`, the secret every replica shares: missing or different 401
 *     before the body is read; 401 too when this process has no secret (forwarding is off here). It is not one of
 *     the directory's 13 authentication models (docs/http-api.md#authentication-models), and nodes never call it:
 *     the route is left out of the OpenAPI document and of the endpoint directory.
 *   - Body and answer: core/ledger/forwarded-writes.ts. The value comes as canonical JSON text and is refused 400
 *     unless it is exactly that (an object).
 *   - The entry is appended and the slot counted here (within this host: a cluster process hands them to its
 *     primary), never forwarded again, so two replicas that each believe the other holds the lease cannot pass a
 *     write back and forth.
 *   - `withdraw_after_ms`: if the write's batch has not begun by then it is withdrawn, nothing is written, and the
 *     answer says `withdrawn: true` (the sender gives its caller's quota slot back).
 */
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Config } from '../../../core/config.node';
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import { AppError, unauthorized } from '../../../core/errors';
import { canonicalJson, JsonValue } from '../../../core/ledger/canonical-json';
import {
  MAX_VALUE_JSON,
  forwardedAppendAnswer,
  forwardedAppendBody,
  ForwardedAppendBody,
  forwardedCountedAppendAnswer,
  forwardedCountedAppendBatchAnswer,
  forwardedCountedAppendBatchBody,
  forwardedCountedAppendBody,
  forwardedConsumeAnswer,
  forwardedConsumeBody,
  forwardedRefundAnswer,
  forwardedRefundBody,
  WRITER_APPENDS_PATH,
  WRITER_COUNTED_APPEND_BATCHES_PATH,
  WRITER_COUNTED_APPENDS_PATH,
  WRITER_QUOTA_CONSUME_PATH,
  WRITER_QUOTA_REFUND_PATH
} from '../../../core/ledger/forwarded-writes';
import { AppendWithdrawn, type QuotaClaim } from '../../../store/ledger/append';
import type { Ledger } from '../../../store/ledger/ledger';
import type { DailyQuota } from '../../../store/ledger/daily-quota';
import type { ForwardingCounts } from '../../../store/ledger/writer/lease-holder';
import { lendQuotaSlots, takeBackQuotaSlots } from '../../../services/ledger/lend-quota-slots';
import type { TruthWrites, WriteLog } from '../../../services/ledger/write-truth';
import { bearer } from '../../plugins/auth/principal';

/** `released`: this process gave the lease up (it is stopping): 421 before anything is done, and the sender does it itself. */
type WriterDeps = {
  ledger: Ledger;
  quota: DailyQuota;
  truthWrites: TruthWrites;
  config: Pick<Config, 'LEDGER_FORWARD_SECRET'>;
  counts: ForwardingCounts;
  released: () => boolean;
};

export const ledgerWriterRoutes: FastifyPluginAsyncZod<WriterDeps> = async (
  app,
  { ledger, quota, truthWrites, config, counts, released }
) => {
  const secretHash = config.LEDGER_FORWARD_SECRET ? hashSecret(config.LEDGER_FORWARD_SECRET) : null;
  // The replicas' shared secret, checked before the body is read.
  const replicasOnly = async (request: FastifyRequest) => {
    const token = bearer(request);
    if (!secretHash) throw unauthorized('Ledger forwarding is not enabled on this replica (LEDGER_FORWARD_SECRET)');
    if (!token || !digestsEqual(secretHash, hashSecret(token)))
      throw unauthorized("The replicas' ledger forwarding secret is required");
    if (released())
      throw new AppError(
        'misdirected',
        'This replica no longer holds the ledger writer lease; append and count yourself until another takes it'
      );
  };

  /** What every route here shares: the replicas' secret checked first (not an auth model of the directory: `none` there). */
  const replicaRoute = { config: { auth: 'none' as const }, onRequest: replicasOnly };
  /** The body of a forwarded write: its value at the largest a truth write takes, and the rest of the write. */
  const writeBodyLimit = MAX_VALUE_JSON + 64 * 1024;

  /** A forwarded write as the ledger takes it, and its caller's deadline (withdrawn if its batch has not begun). */
  const forwardedWrite = (body: ForwardedAppendBody, field?: string) => ({
    input: {
      kind: body.kind,
      key: body.key,
      value: parseCanonicalObject(body.value_json, field),
      truth_type: body.truth_type,
      did: body.did,
      idempotencyKey: body.idempotency_key
    },
    signal: body.withdraw_after_ms === undefined ? undefined : AbortSignal.timeout(body.withdraw_after_ms)
  });

  app.post(
    WRITER_APPENDS_PATH,
    {
      ...replicaRoute,
      bodyLimit: writeBodyLimit,
      schema: { hide: true, body: forwardedAppendBody, response: { 200: forwardedAppendAnswer } }
    },
    async (request) => {
      const { input, signal } = forwardedWrite(request.body);
      try {
        // Appended here, never forwarded again (the sender claimed any quota slot itself).
        const { entry, duplicate } = await ledger.append(input, { direct: true, signal });
        counts.served++;
        return { withdrawn: false as const, entry, duplicate };
      } catch (err) {
        if (err instanceof AppendWithdrawn) return { withdrawn: true as const };
        throw err;
      }
    }
  );

  /** A truth write's counted append, made here as POST /api/report/truth makes it (services/ledger/write-truth.ts). */
  const countedAppend = async (claim: QuotaClaim, write: ReturnType<typeof forwardedWrite>, log: WriteLog) => {
    const answer = await truthWrites.appendCountedHere(write.input, claim, write.signal, log);
    if (answer.outcome === 'appended') counts.served++;
    return answer;
  };

  app.post(
    WRITER_COUNTED_APPENDS_PATH,
    {
      ...replicaRoute,
      bodyLimit: writeBodyLimit,
      schema: { hide: true, body: forwardedCountedAppendBody, response: { 200: forwardedCountedAppendAnswer } }
    },
    async (request) => countedAppend(request.body.quota, forwardedWrite(request.body), request.log)
  );

  app.post(
    WRITER_COUNTED_APPEND_BATCHES_PATH,
    // A sender puts a write larger than FORWARD_BATCH_BYTES in a batch of its own.
    {
      ...replicaRoute,
      bodyLimit: writeBodyLimit,
      schema: {
        hide: true,
        body: forwardedCountedAppendBatchBody,
        response: { 200: forwardedCountedAppendBatchAnswer }
      }
    },
    async (request) => {
      const { writes } = request.body;
      // Every value is checked before anything is done: a 400 means nothing was, and the sender does it all itself.
      const forwarded = writes.map((w, i) => forwardedWrite(w, `body.writes.${i}.value_json`));
      // Together, so they join the same batches of the ledger (and of the quota's slot inserts).
      const answers = await Promise.all(
        writes.map((w, i) =>
          countedAppend(w.quota, forwarded[i]!, request.log).catch((err: unknown) => {
            request.log.error({ err }, 'a forwarded counted append failed');
            const message = err instanceof AppError ? err.message : 'the ledger writer failed';
            return { outcome: 'failed' as const, message };
          })
        )
      );
      return { answers };
    }
  );

  app.post(
    WRITER_QUOTA_CONSUME_PATH,
    { ...replicaRoute, schema: { hide: true, body: forwardedConsumeBody, response: { 200: forwardedConsumeAnswer } } },
    async (request) => ({ slots: await lendQuotaSlots(quota, request.body) })
  );

  app.post(
    WRITER_QUOTA_REFUND_PATH,
    { ...replicaRoute, schema: { hide: true, body: forwardedRefundBody, response: { 200: forwardedRefundAnswer } } },
    async (request) => ({ refunded: await takeBackQuotaSlots(quota, request.body) })
  );
};

/** A forwarded value: canonical JSON of an object, exactly (400 otherwise). */
function parseCanonicalObject(text: string, field = 'body.value_json'): { [key: string]: JsonValue } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // not JSON at all: refused below
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && canonicalJson(value) === text)
    return value as { [key: string]: JsonValue };
  throw new AppError('invalid_request', 'value_json must be a JSON object in canonical form', {
    fields: [{ field, message: 'not canonical JSON of an object' }]
  });
}
