/**
 * What an append is, whichever way it reaches the ledger's writer: its input and result, the two ways it can end
 * without writing anything, and the one seam every append goes through (WriterTransport).
 *
 * A process appends through exactly one transport, chosen once at start-up (api/context.ts, api/server.ts,
 * worker/worker.ts; the implementations are in store/ledger/writer/transports.ts):
 *   here             the process's own commit engine (store/ledger/commit-engine.ts) group-commits it;
 *   cluster-primary  an API process of a cluster (API_PROCESSES > 1) hands it to the cluster primary over IPC
 *                    (writer/cluster-primary.ts), which is the host's one writer;
 *   lease-holder     with the writer lease (LEDGER_FORWARD_SECRET) the process appending for a host forwards it over
 *                    HTTP to the replica holding the lease (writer/lease-holder.ts), which appends it with its own.
 * Whatever does not reach another writer (ForwardNotDelivered) is appended here: safe, only slower, since the seq is
 * unique whoever writes.
 */
import { randomHex } from '../../core/random-hex.node';
import type { JsonValue } from '../../core/ledger/canonical-json';
import type { LedgerEntryDocument, LedgerEntryKind } from '../../core/ledger/ledger-entry';

export interface AppendInput {
  kind: LedgerEntryKind;
  key: string;
  value: { [key: string]: JsonValue };
  truth_type?: string | null;
  did?: string | null;
  /** A retried write with the same (did, idempotency key) returns the first entry instead of a second one. */
  idempotencyKey?: string | null;
}

export interface AppendResult {
  entry: LedgerEntryDocument;
  /** True when the idempotency key matched an earlier entry and nothing new was written. */
  duplicate: boolean;
}

/**
 * How an append is made. `signal` withdraws a write that has not started (AppendWithdrawn, nothing written);
 * `deadline` (ms since the epoch) is when the caller's signal fires, for a writer elsewhere to withdraw it by then
 * itself; `direct` appends in this host even where another host holds the writer lease (an append forwarded from
 * there).
 */
export interface AppendOptions {
  signal?: AbortSignal;
  deadline?: number;
  direct?: boolean;
}

/** A daily-quota counter to take one slot of (DailyQuota.consume's arguments). */
export interface QuotaClaim {
  scope: string;
  day: string;
  limit: number;
}

/** The ways an append can reach the writer (see the module comment). */
export type WriterWay = 'here' | 'cluster-primary' | 'lease-holder';

/** How this process's appends reach the ledger's writer: one implementation per way, chosen once at start-up. */
export interface WriterTransport {
  readonly way: WriterWay;
  /** Appends one entry; resolves once it is durably inserted (or matched by its idempotency key). */
  append(input: AppendInput, options: AppendOptions): Promise<AppendResult>;
  /**
   * A truth write's append with its daily-quota slot, both made by the writer lease holder when that is another
   * host (one request instead of a claim and an append): the result, or `'over_quota'` (nothing written). `null`
   * when this transport does not carry them together: the caller claims its slot and appends as usual.
   */
  appendCounted(
    input: AppendInput,
    quota: QuotaClaim,
    options: { signal?: AbortSignal; deadline?: number }
  ): Promise<AppendResult | 'over_quota' | null>;
}

/**
 * Appends on the caller's behalf somewhere else; `null` when it cannot now (the caller then appends here). `direct`
 * and `deadline` as in AppendOptions. Rejects with ForwardNotDelivered when nothing reached the other writer.
 */
export type ForwardAppend = (
  input: AppendInput,
  signal: AbortSignal | undefined,
  how: { direct: boolean; deadline: number | null }
) => Promise<AppendResult> | null;

/**
 * A truth write's append together with its quota slot, made by the writer lease holder on another host: the result,
 * or `'over_quota'`; `null` when no other host holds the lease. Rejects with ForwardNotDelivered when nothing reached
 * the holder, with AppendWithdrawn when the holder withdrew it at `deadline` (no slot spent).
 */
export type ForwardCountedAppend = (
  input: AppendInput,
  quota: QuotaClaim,
  signal: AbortSignal | undefined,
  deadline: number | null
) => Promise<AppendResult | 'over_quota'> | null;

/** A forwarded append the writer did not take (not reached, or refused before it did anything): nothing was written there. */
export class ForwardNotDelivered extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ForwardNotDelivered';
  }
}

/** An append withdrawn (its signal aborted) before its batch began: nothing was written. */
export class AppendWithdrawn extends Error {
  constructor() {
    super('append withdrawn before it started');
    this.name = 'AppendWithdrawn';
  }
}

export function newEventId(): string {
  // Time-ordered and unique: 9 base36 chars of milliseconds, 12 hex chars of randomness.
  return `truth-${Date.now().toString(36).padStart(9, '0')}${randomHex(6)}`;
}

/** The `idem` of an entry written with a caller's Idempotency-Key: scoped to the writer's DID. */
export function callerIdempotencyScope(did: string | null, idempotencyKey: string): string {
  return `k:${did ?? ''}:${idempotencyKey}`;
}
