/**
 * The writer lease holder's routes (main listener; store/ledger/writer-lease.ts, the client is
 * store/ledger/writer-forwarding.ts), what another API replica forwards to this one:
 *   POST /internal/ledger/appends   an append;
 *   POST /internal/ledger/counted-appends
 *                                   a truth write's append with its daily-quota slot, taken here first (one request
 *                                   where a claim and an append would be two): `over_quota` when none is left; the
 *                                   slot is given back here when the write is withdrawn or is a retry (duplicate);
 *   POST /internal/ledger/counted-append-batches
 *                                   several of those in one request ({ writes } → { answers }, in order; `failed` for
 *                                   one the holder failed on, whose outcome is then unknown): what a replica's writes
 *                                   waiting while its earlier ones were on their way send;
 *   POST /internal/quota/consume    a block of daily-quota slots ({ scope, day, limit, count } → { slots }), which
 *                                   the sender hands out to its writes itself;
 *   POST /internal/quota/refund     slots it did not use ({ scope, day, slots } → { refunded }).
 *
 *   - `Authorization: Bearer <LEDGER_FORWARD_SECRET>`, the secret every replica shares: missing or different 401
 *     before the body is read; 401 too when this process has no secret (forwarding is off here). It is not one of
 *     the directory's 13 authentication models (SPEC §5), and nodes never call it: the route is left out of the
 *     OpenAPI document and of the endpoint directory.
 *   - Body and answer: core/ledger/forwarded-writes.ts. The value comes as canonical JSON text and is refused 400
 *     unless it is exactly that (an object).
 *   - The entry is appended and the slot counted here (within this host: a cluster process hands them to its
 *     primary), never forwarded again, so two replicas that each believe the other holds the lease cannot pass a
 *     write back and forth.
 *   - `withdraw_after_ms`: if the write's batch has not begun by then it is withdrawn, nothing is written, and the
 *     answer says `withdrawn: true` (the sender gives its caller's quota slot back).
 */
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
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
  type ForwardedCountedAppendBatchAnswer,
  forwardedCountedAppendBatchBody,
  forwardedCountedAppendBody,
  type ForwardedCountedAppendAnswer,
  type ForwardedCountedAppendBody,
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
import { AppendWithdrawn } from '../../../store/ledger/append';
import type { Ledger } from '../../../store/ledger/ledger';
import { LEASE_SHARE, MAX_LEASE, type DailyQuota } from '../../../store/ledger/quota';
import type { ForwardingCounts } from '../../../store/ledger/writer/lease-holder';
import { bearer } from '../../plugins/auth/principal';

/** `released`: this process gave the lease up (it is stopping): 421 before anything is done, and the sender does it itself. */
type WriterDeps = {
  ledger: Ledger;
  quota: DailyQuota;
  config: Config;
  counts: ForwardingCounts;
  released: () => boolean;
};

export const ledgerWriterRoutes: FastifyPluginAsyncZod<WriterDeps> = async (
  app,
  { ledger, quota, config, counts, released }
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

  /** The caller's deadline: withdrawn if its batch has not begun by then. */
  const withdrawalSignal = (body: ForwardedAppendBody) =>
    body.withdraw_after_ms === undefined ? undefined : AbortSignal.timeout(body.withdraw_after_ms);
  /** Appended here (never forwarded again), counted as served. */
  const appendHere = async (
    body: ForwardedAppendBody,
    value: { [key: string]: JsonValue },
    signal: AbortSignal | undefined
  ) => {
    const result = await ledger.append(
      {
        kind: body.kind,
        key: body.key,
        value,
        truth_type: body.truth_type,
        did: body.did,
        idempotencyKey: body.idempotency_key
      },
      { direct: true, ...(signal ? { signal } : {}) }
    );
    counts.served++;
    return result;
  };

  app.post(
    WRITER_APPENDS_PATH,
    {
      ...replicaRoute,
      bodyLimit: writeBodyLimit,
      schema: { hide: true, body: forwardedAppendBody, response: { 200: forwardedAppendAnswer } }
    },
    async (request) => {
      const value = parseCanonicalObject(request.body.value_json);
      try {
        const { entry, duplicate } = await appendHere(request.body, value, withdrawalSignal(request.body));
        return { withdrawn: false as const, entry, duplicate };
      } catch (err) {
        if (err instanceof AppendWithdrawn) return { withdrawn: true as const };
        throw err;
      }
    }
  );

  /**
   * A counted append as POST /api/report/truth makes it: the slot first, the append with the caller's deadline, the
   * slot back if the write was withdrawn or is a retry of one already appended (which spent its own).
   */
  const countedAppend = async (
    body: ForwardedCountedAppendBody,
    value: { [key: string]: JsonValue },
    log: FastifyBaseLogger
  ): Promise<ForwardedCountedAppendAnswer> => {
    const signal = withdrawalSignal(body);
    const { scope, day, limit } = body.quota;
    if (signal?.aborted) return { outcome: 'withdrawn' };
    const allowance = await quota.consume(scope, day, limit, { direct: true });
    if (!allowance.allowed) return { outcome: 'over_quota' };
    const giveBack = () =>
      quota
        .refund(scope, day, allowance.count, { direct: true })
        .catch((err: unknown) => log.warn({ err }, 'quota refund failed'));
    try {
      const { entry, duplicate } = await appendHere(body, value, signal);
      if (duplicate) await giveBack();
      return { outcome: 'appended', entry, duplicate };
    } catch (err) {
      if (!(err instanceof AppendWithdrawn)) throw err; // (the slot stays spent, as for a write answered 503 here)
      await giveBack();
      return { outcome: 'withdrawn' };
    }
  };

  app.post(
    WRITER_COUNTED_APPENDS_PATH,
    {
      ...replicaRoute,
      bodyLimit: writeBodyLimit,
      schema: { hide: true, body: forwardedCountedAppendBody, response: { 200: forwardedCountedAppendAnswer } }
    },
    async (request) => countedAppend(request.body, parseCanonicalObject(request.body.value_json), request.log)
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
    async (request): Promise<ForwardedCountedAppendBatchAnswer> => {
      const { writes } = request.body;
      // Every value is checked before anything is done: a 400 means nothing was, and the sender does it all itself.
      const values = writes.map((w, i) => parseCanonicalObject(w.value_json, `body.writes.${i}.value_json`));
      // Together, so they join the same batches of the ledger (and of the quota's slot inserts).
      const answers = await Promise.all(
        writes.map((w, i) =>
          countedAppend(w, values[i]!, request.log).catch((err: unknown) => {
            request.log.error({ err }, 'a forwarded counted append failed');
            return {
              outcome: 'failed' as const,
              message: err instanceof AppError ? err.message : 'the ledger writer failed'
            };
          })
        )
      );
      return { answers };
    }
  );

  app.post(
    WRITER_QUOTA_CONSUME_PATH,
    { ...replicaRoute, schema: { hide: true, body: forwardedConsumeBody, response: { 200: forwardedConsumeAnswer } } },
    async (request) => {
      // A block for the sender to hand out itself: the first slot, then as many more as asked, at most MAX_LEASE and
      // at most 1/LEASE_SHARE of the slots above the first (near the limit, one at a time; a first slot given back
      // earlier, a low number, lets the block take what is left: README "One writer across hosts").
      const { scope, day, limit, count } = request.body;
      const first = await quota.consume(scope, day, limit, { direct: true });
      if (!first.allowed) return { slots: [] };
      const more = Math.min(count, MAX_LEASE, Math.max(1, Math.floor((limit - first.count) / LEASE_SHARE))) - 1;
      // A claim that fails after the first only shortens the block (those taken still go to the sender).
      const rest = await Promise.allSettled(
        Array.from({ length: Math.max(0, more) }, () => quota.consume(scope, day, limit, { direct: true }))
      );
      return {
        slots: [
          first.count,
          ...rest.flatMap((r) => (r.status === 'fulfilled' && r.value.allowed ? [r.value.count] : []))
        ]
      };
    }
  );

  app.post(
    WRITER_QUOTA_REFUND_PATH,
    { ...replicaRoute, schema: { hide: true, body: forwardedRefundBody, response: { 200: forwardedRefundAnswer } } },
    async (request) => {
      const { scope, day, slots } = request.body;
      for (const n of slots) await quota.refund(scope, day, n, { direct: true });
      return { refunded: slots.length };
    }
  );
};

function parseCanonicalObject(text: string, field = 'body.value_json'): { [key: string]: JsonValue } {
  const invalid = () =>
    new AppError('invalid_request', 'value_json must be a JSON object in canonical form', {
      fields: [{ field, message: 'not canonical JSON of an object' }]
    });
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalid();
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) || canonicalJson(value) !== text)
    throw invalid();
  return value as { [key: string]: JsonValue };
}
