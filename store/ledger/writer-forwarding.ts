/**
 * A replica's side of the writer lease (store/ledger/writer-lease.ts): its appends and its daily-quota claims go
 * over HTTP to the replica holding the lease, with `Authorization: Bearer <LEDGER_FORWARD_SECRET>`
 * (api/routes/ledger/writer.ts; the shapes in core/ledger/forwarded-writes.ts). One process then appends and counts
 * for every replica, as the cluster primary does for the processes of one host (ledger-forwarding.ts): apart, two
 * replicas writing one DID claimed the same quota slots, refused each other's inserts and re-read the DID's slots
 * of the day after every few refusals (bench:ledger, one DID at concurrency 16, FerretDB at a full core).
 *
 * What the caller gets, as for an append or a claim made here:
 *   - the entry (or the earlier one its Idempotency-Key matched); the slot (or a refusal past the limit);
 *   - AppendWithdrawn when the holder withdrew an append at the caller's deadline before its batch began (nothing
 *     written; the caller gives its quota slot back). The request itself is not cut at the deadline: the answer,
 *     which the holder sends by then at the latest for a write not begun, says what happened;
 *   - ForwardNotDelivered (appends; claims are then made here directly) when nothing reached the holder (connection
 *     refused, name not resolved, no connection within 2 s), or the holder refused the secret or does not serve the
 *     route: the ledger appends here instead, and the holder is skipped for a lease period. Safe: the holder did
 *     nothing;
 *   - 503 (retry with the same Idempotency-Key) when the request was sent and no answer came, or the holder failed:
 *     the write may or may not have landed (a claimed slot may stay spent), as after a timeout of a direct append.
 */
import { Agent, errors as undiciErrors, request } from 'undici';
import type { z } from 'zod';
import { AppError } from '../../core/errors';
import { canonicalJson } from '../../core/ledger/canonical-json';
import {
  forwardedAppendAnswer,
  ForwardedAppendBody,
  forwardedConsumeAnswer,
  forwardedRefundAnswer,
  WRITER_APPENDS_PATH,
  WRITER_QUOTA_CONSUME_PATH,
  WRITER_QUOTA_REFUND_PATH
} from '../../core/ledger/forwarded-writes';
import type { AppendInput, AppendResult } from './ledger';
import { AppendWithdrawn, ForwardNotDelivered } from './ledger';
import type { ForwardAppend } from './ledger-forwarding';
import type { DailyQuota } from './quota';
import type { LedgerWriterLease } from './writer-lease';

const CONNECT_TIMEOUT_MS = 2000;
/** How long a request without a deadline (a quota claim, the hub's own events) waits for the holder's answer. */
const NO_DEADLINE_WAIT_MS = 30_000;
/** Beyond the withdrawal time: the holder's batch under way and the answer on its way back. */
const ANSWER_GRACE_MS = 10_000;

/** Errors raised before the request could have reached the holder. */
const NOT_DELIVERED_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function notDelivered(err: unknown): boolean {
  if (err instanceof undiciErrors.ConnectTimeoutError) return true;
  const code = (err as { code?: unknown; cause?: { code?: unknown } }).code ?? (err as { cause?: { code?: unknown } }).cause?.code;
  return typeof code === 'string' && NOT_DELIVERED_CODES.has(code);
}

const unknownOutcome = (what: string) => new AppError('unavailable', `${what}; retry with the same Idempotency-Key`, {}, { 'Retry-After': '5' });

export interface WriterForwarding {
  /** The Ledger's `forward`: to the holder when another process holds the lease, else null (append here). */
  forward: ForwardAppend;
  /** `local`'s claims and refunds, made by the holder when another process holds the lease. */
  quota(local: DailyQuota): DailyQuota;
  close(): Promise<void>;
}

/** Forwards appends and quota claims to the lease holder when it is another process; `onError` hears of holders that refused us. */
export function forwardToWriter(lease: LedgerWriterLease, secret: string, onError: (err: unknown) => void): WriterForwarding {
  const agent = new Agent({ connect: { timeout: CONNECT_TIMEOUT_MS }, keepAliveTimeout: 30_000 });

  /** POSTs `body` to the holder at `url` and parses its 200 answer with `answer`; see the module comment for failures. */
  const post = async <T>(url: string, path: string, body: unknown, waitMs: number, answer: z.ZodType<T>): Promise<T> => {
    let status: number;
    let text: string;
    try {
      const res = await request(`${url}${path}`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        headersTimeout: waitMs,
        bodyTimeout: waitMs
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      lease.skip(url);
      if (notDelivered(err)) throw new ForwardNotDelivered(`the ledger writer at ${url} cannot be reached`);
      throw unknownOutcome('The ledger writer did not answer');
    }
    if (status === 401 || status === 404) {
      // Refused before anything was done: a different LEDGER_FORWARD_SECRET there, or a version without the route.
      lease.skip(url);
      onError(new Error(`the ledger writer at ${url} answered ${status} to ${path} (is LEDGER_FORWARD_SECRET the same on every replica?); appending here for a lease period`));
      throw new ForwardNotDelivered(`the ledger writer at ${url} refused ${path} (${status})`);
    }
    if (status !== 200) throw unknownOutcome(`The ledger writer answered ${status}`);
    const parsed = answer.safeParse(safeJson(text));
    if (!parsed.success) throw unknownOutcome(`The ledger writer's answer to ${path} is not one`);
    return parsed.data;
  };

  const append = async (url: string, input: AppendInput, deadline: number | null): Promise<AppendResult> => {
    const body: ForwardedAppendBody = {
      kind: input.kind,
      key: input.key,
      value_json: canonicalJson(input.value),
      truth_type: input.truth_type ?? null,
      did: input.did ?? null,
      idempotency_key: input.idempotencyKey ?? null,
      ...(deadline === null ? {} : { withdraw_after_ms: Math.max(0, deadline - Date.now()) })
    };
    const answer = await post(url, WRITER_APPENDS_PATH, body, (body.withdraw_after_ms ?? NO_DEADLINE_WAIT_MS) + ANSWER_GRACE_MS, forwardedAppendAnswer);
    if (answer.withdrawn) throw new AppendWithdrawn();
    return { entry: answer.entry, duplicate: answer.duplicate };
  };

  /** `remote` at the holder when there is one elsewhere; `here` when there is none or nothing reached it. */
  const atHolder = async <T>(direct: boolean | undefined, remote: (url: string) => Promise<T>, here: () => Promise<T>): Promise<T> => {
    const url = direct ? null : lease.writerElsewhere();
    if (!url) return here();
    try {
      return await remote(url);
    } catch (err) {
      if (err instanceof ForwardNotDelivered) return here();
      throw err;
    }
  };

  return {
    forward: (input, signal, how) => {
      if (how.direct) return null;
      const url = lease.writerElsewhere();
      if (!url) return null;
      if (signal?.aborted) return Promise.reject(new AppendWithdrawn());
      return append(url, input, how.deadline);
    },
    quota: (local) => ({
      consume: (scope, day, limit, how) =>
        atHolder(
          how?.direct,
          (url) => post(url, WRITER_QUOTA_CONSUME_PATH, { scope, day, limit }, NO_DEADLINE_WAIT_MS, forwardedConsumeAnswer),
          () => local.consume(scope, day, limit, how)
        ),
      // A slot refunded where it was not taken is still a slot of the day given back: whoever holds the counter
      // hands it out again or deletes it (QuotaStore.refund).
      refund: (scope, day, n, how) =>
        atHolder(
          how?.direct,
          async (url) => {
            await post(url, WRITER_QUOTA_REFUND_PATH, { scope, day, n }, NO_DEADLINE_WAIT_MS, forwardedRefundAnswer);
          },
          () => local.refund(scope, day, n, how)
        )
    }),
    close: () => agent.close()
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
