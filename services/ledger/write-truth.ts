/**
 * Writing a truth record: the use case behind POST /api/report/truth (main and backup listeners), the writer lease
 * holder's counted appends that other replicas forward to it (/internal/ledger/counted-append*), and the memory
 * gateway's POST /upsert. What a truth write must get right, whoever takes it, is decided here once:
 *   - Quota: TRUTH_DAILY_QUOTA writes per DID per UTC day. A slot is claimed before the append and given back when
 *     the append is withdrawn before it started, or turns out to be a retry of a write already appended (which
 *     spent its own slot). A failed append may still have landed, so its slot stays spent: never a use beyond the
 *     quota, at worst one slot too few.
 *   - Idempotency (report): a retry with the same Idempotency-Key returns the first result. The key is not looked
 *     up before an append (the ledger's unique key refuses a second entry): a retry holds a slot while its append
 *     runs and gives it back when answered as a duplicate, so a DID at its very limit can see a concurrent new write
 *     refused 429 meanwhile.
 *   - Deadline (report): past TRUTH_WRITE_TIMEOUT_MS the caller gets 503 and whatever has not started is withdrawn,
 *     its slot given back: an abandoned write neither spends quota nor runs later.
 *   - High-risk writes (report) start truth-approval/<id> and are answered pending; the memory gateway refuses them.
 *   - Outages: a database failure of a report is thrown as TruthWriteFailed, which api/plugins/errors.ts answers 503
 *     (nothing was acknowledged; a retry with the same Idempotency-Key lands the write exactly once).
 * Built once per process (createTruthWrites); the routes turn its plain results into replies.
 */
import { secondsUntilUtcMidnight } from '../../core/utc-day';
import { createHash, randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { MongoError } from 'mongodb';
import { AppError } from '../../core/errors';
import { canonicalJson, type JsonValue } from '../../core/ledger/canonical-json';
import { heldBecause, type RiskPolicy } from '../../core/ledger/truth-record';
import { assertFitsEntryBundle } from '../../core/tlog/tiles';
import { TruthApprovalInput, truthApprovalWorkflowId } from '../../contracts/ledger/truth-approval.contract';
import { approvalExists, holdTruthForApproval } from '../../workflows/ledger/truth-approval.client';
import { AppendWithdrawn, type AppendInput, type AppendResult, type QuotaClaim } from '../../store/ledger/append';
import type { Ledger } from '../../store/ledger/ledger';
import type { DailyQuota } from '../../store/ledger/daily-quota';

/** The settings a truth write reads, and nothing else of the configuration. */
export interface TruthWriteOptions {
  /** Truth writes per DID per UTC day (TRUTH_DAILY_QUOTA). */
  dailyQuota: number;
  /** The largest value, as canonical JSON (TRUTH_MAX_VALUE_BYTES). */
  maxValueBytes: number;
  /** How long a report may take before it is answered 503 and withdrawn (TRUTH_WRITE_TIMEOUT_MS). */
  writeTimeoutMs: number;
  /** Which writes wait for a human (TRUTH_HIGH_RISK_TYPES, TRUTH_HIGH_RISK_KEY_PREFIXES). */
  risk: RiskPolicy;
  /** truth-approval/<id>: how long it waits (TRUTH_APPROVAL_TIMEOUT_S), the core task queue, the hub's DID. */
  approval: { timeoutSeconds: number; taskQueue: string; hubDid: string };
}

export interface TruthWriteDeps {
  ledger: Ledger;
  quota: DailyQuota;
  temporal: Client;
}

/** Where a write notes what its caller need not see (a slot that could not be given back). */
export interface WriteLog {
  warn(details: object, message: string): void;
}

/** A truth record from a DID. */
export interface TruthWrite {
  did: string;
  key: string;
  value: { [key: string]: JsonValue };
  truthType: string | null;
  idempotencyKey: string | null;
}

/** A report's answer: appended (or a retry of one appended), or held for approval. */
export type TruthWriteResult =
  | { kind: 'written'; seq: number; event_id: string; duplicate: boolean }
  | { kind: 'held'; approvalId: string; workflowId: string; held: string };

/** A counted append's answer; `withdrawn`: its deadline passed before it started (no slot spent, nothing written). */
export type CountedAppend =
  ({ outcome: 'appended' } & AppendResult) | { outcome: 'over_quota' } | { outcome: 'withdrawn' };

/**
 * The database failed a report in a way that is not an outage (FerretDB refusing a write while it stops or starts,
 * say). Nothing was acknowledged, which is not the caller's doing: api/plugins/errors.ts answers 503.
 */
export class TruthWriteFailed extends Error {
  constructor(override readonly cause: MongoError) {
    super(`truth write failed: ${cause.message}`);
    this.name = 'TruthWriteFailed';
  }
}

export interface TruthWrites {
  /** POST /api/report/truth: quota, idempotency, deadline, high-risk hold, and the lease holder's counted append. */
  writeTruth(write: TruthWrite, log: WriteLog): Promise<TruthWriteResult>;
  /**
   * A counted append forwarded to this process as the writer lease holder: the slot and the append made here
   * (`direct`: never forwarded again), withdrawn if `signal` (the sender's deadline) fires before it starts.
   */
  appendCountedHere(
    input: AppendInput,
    claim: QuotaClaim,
    signal: AbortSignal | undefined,
    log: WriteLog
  ): Promise<CountedAppend>;
  /** The memory gateway's upsert: a new version of `key`, no Idempotency-Key, no deadline; high-risk keys refused. */
  upsertMemoryTruth(write: Omit<TruthWrite, 'truthType' | 'idempotencyKey'>, log: WriteLog): Promise<AppendResult>;
}

export function createTruthWrites(
  { ledger, quota, temporal }: TruthWriteDeps,
  options: TruthWriteOptions
): TruthWrites {
  const claimOf = (did: string): QuotaClaim => ({
    scope: `truth:${did}`,
    day: new Date().toISOString().slice(0, 10),
    limit: options.dailyQuota
  });
  const quotaExceeded = (did: string) =>
    new AppError(
      'quota_exceeded',
      `Daily quota of ${options.dailyQuota} truth writes for ${did} is used up`,
      { limit: options.dailyQuota },
      { 'Retry-After': String(secondsUntilUtcMidnight()) }
    );
  /** The value as canonical JSON (what the leaf hash covers), 413 past the limit; `field` as the caller named it. */
  const canonicalValue = (value: TruthWrite['value'], field: string) => {
    const json = canonicalJson(value);
    const bytes = Buffer.byteLength(json);
    if (bytes > options.maxValueBytes)
      throw new AppError(
        'payload_too_large',
        `${field} is ${bytes} bytes as canonical JSON; the limit is ${options.maxValueBytes}`
      );
    return json;
  };

  /** One slot of the claim's counter, or null when none is left; the function gives it back. */
  const claimSlot = async (claim: QuotaClaim, direct: boolean, log: WriteLog) => {
    const allowance = await quota.consume(claim.scope, claim.day, claim.limit, { direct });
    if (!allowance.allowed) return null;
    return () =>
      quota
        .refund(claim.scope, claim.day, allowance.count, { direct })
        .catch((err: unknown) => log.warn({ err }, 'quota refund failed'));
  };

  /** The slot, then the append; the slot back if the append was withdrawn or is a retry (which spent its own). */
  const countedAppend = async (
    input: AppendInput,
    claim: QuotaClaim,
    how: { signal?: AbortSignal; deadline?: number; direct: boolean },
    log: WriteLog
  ): Promise<CountedAppend> => {
    if (how.signal?.aborted) return { outcome: 'withdrawn' };
    const giveBack = await claimSlot(claim, how.direct, log);
    if (!giveBack) return { outcome: 'over_quota' };
    try {
      const appended = await ledger.append(input, how);
      if (appended.duplicate) await giveBack();
      return { outcome: 'appended', entry: appended.entry, duplicate: appended.duplicate };
    } catch (err) {
      if (!(err instanceof AppendWithdrawn)) throw err; // (the slot stays spent: the append may have landed)
      await giveBack();
      return { outcome: 'withdrawn' };
    }
  };

  /** A retried write answers what the first one got: the entry its Idempotency-Key found. */
  const alreadyWritten = async (w: TruthWrite): Promise<TruthWriteResult | null> => {
    const entry = w.idempotencyKey ? await ledger.findByIdempotencyKey(w.did, w.idempotencyKey) : null;
    return entry ? { kind: 'written', seq: entry.seq, event_id: entry.event_id, duplicate: true } : null;
  };

  const hold = async (w: TruthWrite, valueJson: string, held: string, signal: AbortSignal, log: WriteLog) => {
    // The key is looked up beforehand only where no append follows to find the first write (a held write, and a
    // write refused for quota): an append finds it itself, so a lookup before every keyed write would be a round
    // trip for nothing.
    const existing = await alreadyWritten(w);
    if (existing) return existing;
    // A retry of a held write answers its first hold (pending or decided) and spends no second slot.
    const approvalId = approvalIdOf(w);
    if (w.idempotencyKey && (await approvalExists(temporal, approvalId))) return heldResult(approvalId, held);
    signal.throwIfAborted();
    const giveBack = await claimSlot(claimOf(w.did), false, log);
    if (!giveBack) throw quotaExceeded(w.did);
    if (signal.aborted) {
      await giveBack();
      throw signal.reason;
    }
    const { started } = await startApproval(temporal, options.approval, w, valueJson, held, approvalId);
    // Two retries at once: the one that did not start the hold gives its slot back.
    if (!started) await giveBack();
    return heldResult(approvalId, held);
  };

  const append = async (w: TruthWrite, signal: AbortSignal, deadline: number, log: WriteLog) => {
    signal.throwIfAborted();
    const input: AppendInput = {
      kind: 'truth',
      key: w.key,
      value: w.value,
      truth_type: w.truthType,
      did: w.did,
      idempotencyKey: w.idempotencyKey
    };
    const claim = claimOf(w.did);
    // Where another host holds the writer lease, it takes the slot with the append: one request (null: nobody else
    // holds it, or it was not reached; then both are made here). Withdrawn there: no slot spent.
    const forwarded = await ledger.appendCounted(input, claim, { signal, deadline });
    const counted: CountedAppend =
      forwarded === 'over_quota'
        ? { outcome: 'over_quota' }
        : forwarded
          ? { outcome: 'appended', entry: forwarded.entry, duplicate: forwarded.duplicate }
          : await countedAppend(input, claim, { signal, deadline, direct: false }, log);
    if (counted.outcome === 'withdrawn') throw signal.reason;
    if (counted.outcome === 'over_quota') {
      // A retry of a write appended earlier today is answered, not refused.
      const existing = await alreadyWritten(w);
      if (existing) return existing;
      throw quotaExceeded(w.did);
    }
    const { entry, duplicate } = counted;
    return { kind: 'written' as const, seq: entry.seq, event_id: entry.event_id, duplicate };
  };

  return {
    async writeTruth(w, log) {
      const valueJson = canonicalValue(w.value, 'value');
      assertFitsEntryBundle({ kind: 'truth', key: w.key, truth_type: w.truthType ?? null, did: w.did }, valueJson);
      const held = heldBecause(w.key, w.truthType ?? undefined, options.risk);
      try {
        return await withDeadline(options.writeTimeoutMs, (signal, deadline) =>
          held ? hold(w, valueJson, held, signal, log) : append(w, signal, deadline, log)
        );
      } catch (err) {
        if (err instanceof MongoError) throw new TruthWriteFailed(err);
        throw err;
      }
    },

    appendCountedHere: (input, claim, signal, log) => countedAppend(input, claim, { signal, direct: true }, log),

    async upsertMemoryTruth({ did, key, value }, log) {
      const held = heldBecause(key, undefined, options.risk);
      if (held)
        throw new AppError(
          'forbidden',
          `${held}: such writes wait for a human approver; send it to POST /api/report/truth on the main listener`
        );
      assertFitsEntryBundle({ kind: 'truth', key, truth_type: null, did }, canonicalValue(value, 'truth_value'));
      // No signal: nothing withdraws it, so its slot is given back only for a duplicate, which needs a key it has not.
      const input: AppendInput = { kind: 'truth', key, value, truth_type: null, did };
      const counted = await countedAppend(input, claimOf(did), { direct: false }, log);
      if (counted.outcome !== 'appended') throw quotaExceeded(did);
      return { entry: counted.entry, duplicate: counted.duplicate };
    }
  };
}

/** A held write's approval id: from (did, Idempotency-Key) when it has one, so that a retry finds its hold. */
function approvalIdOf(w: TruthWrite): string {
  return w.idempotencyKey
    ? `apr_${createHash('sha256').update(`${w.did}\n${w.idempotencyKey}`).digest('hex').slice(0, 24)}`
    : `apr_${randomBytes(12).toString('hex')}`;
}

function heldResult(approvalId: string, held: string): TruthWriteResult {
  return { kind: 'held', approvalId, workflowId: truthApprovalWorkflowId(approvalId), held };
}

/** Starts truth-approval/<id> for a held write; `started` false when a retry found it started. */
async function startApproval(
  temporal: Client,
  approval: TruthWriteOptions['approval'],
  w: TruthWrite,
  valueJson: string,
  held: string,
  approvalId: string
): Promise<{ started: boolean }> {
  const input: TruthApprovalInput = {
    version: 1,
    approval_id: approvalId,
    truth: {
      key: w.key,
      value_json: valueJson,
      truth_type: w.truthType,
      did: w.did,
      idempotency_key: w.idempotencyKey
    },
    held_because: held,
    requested_at: new Date().toISOString(),
    timeout_seconds: approval.timeoutSeconds,
    hub_did: approval.hubDid
  };
  const { started } = await holdTruthForApproval(temporal, approval.taskQueue, input);
  return { started };
}

/**
 * Bounds a write: past `ms` (at `deadline`), 503 (the caller retries with its Idempotency-Key) and `work`'s signal
 * is aborted, so the steps it has not started are withdrawn.
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
