/**
 * What one API replica sends the holder of the ledger writer lease, and what it answers
 * (store/ledger/writer/lease.ts, store/ledger/writer/lease-holder-client.ts, api/routes/ledger/writer.ts): appends, and the
 * daily quota's claims and refunds (store/ledger/quota.ts), so one process counts and appends for every replica.
 *
 * The value travels as its canonical JSON text, the form the ledger stores and hashes: the holder parses it back
 * and checks it is canonical, so the forwarded entry is byte for byte the one the caller's replica accepted (and a
 * value as deep as a truth body allows is not one level too deep inside the forwarded body).
 */
import { z } from 'zod';

export const WRITER_APPENDS_PATH = '/internal/ledger/appends';
export const WRITER_COUNTED_APPENDS_PATH = '/internal/ledger/counted-appends';
export const WRITER_COUNTED_APPEND_BATCHES_PATH = '/internal/ledger/counted-append-batches';
export const WRITER_QUOTA_CONSUME_PATH = '/internal/quota/consume';
export const WRITER_QUOTA_REFUND_PATH = '/internal/quota/refund';

/**
 * Canonical JSON of a value larger than the routes accept by default (bodies of at most 1 MiB; a truth write's
 * TRUTH_MAX_VALUE_BYTES). A larger one is refused 413 and the sender appends it itself.
 */
export const MAX_VALUE_JSON = 16 * 1024 * 1024;
/** The longest withdrawal delay a sender asks for (a longer deadline is sent as this: the write lands or not by then). */
export const MAX_WITHDRAW_AFTER_MS = 600_000;

export const forwardedAppendBody = z.strictObject({
  kind: z.enum(['truth', 'event']),
  key: z.string().min(1).max(1024),
  value_json: z.string().min(2).max(MAX_VALUE_JSON).describe('the value as canonical JSON text (an object)'),
  truth_type: z.string().max(256).nullable(),
  did: z.string().max(2048).nullable(),
  idempotency_key: z.string().max(256).nullable(),
  /** Withdraw the write if its batch has not begun this many ms after it arrived (the caller's deadline); absent: never. */
  withdraw_after_ms: z.number().int().min(0).max(MAX_WITHDRAW_AFTER_MS).optional()
});
export type ForwardedAppendBody = z.infer<typeof forwardedAppendBody>;

export const ledgerEntrySchema = z.object({
  _id: z.number().int(),
  seq: z.number().int(),
  event_id: z.string(),
  kind: z.enum(['truth', 'event']),
  key: z.string(),
  truth_type: z.string().nullable(),
  did: z.string().nullable(),
  created_at: z.string(),
  value_json: z.string(),
  idem: z.string(),
  leaf_hash: z.string(),
  completed: z.array(z.string()),
  // On an entry just appended (the holder answers what it built); not on one read back (a duplicate of a newer
  // version's entry), which a sender of an earlier version, needing it, answers 503 (retry) while versions mix.
  frontier: z.array(z.string()).optional(),
  root: z.string(),
  tally: z.record(z.string(), z.number()).optional()
});

export const forwardedAppendAnswer = z.discriminatedUnion('withdrawn', [
  z.object({ withdrawn: z.literal(false), entry: ledgerEntrySchema, duplicate: z.boolean() }),
  z
    .object({ withdrawn: z.literal(true) })
    .describe("the caller's deadline passed before its batch began: nothing was written")
]);
export type ForwardedAppendAnswer = z.infer<typeof forwardedAppendAnswer>;

const quotaCounter = {
  scope: z.string().min(1).max(2048),
  day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'an ISO date (YYYY-MM-DD)')
};
const slot = z.number().int().min(1).max(1_000_000_000);

/**
 * An append whose daily-quota slot the holder takes first (a truth write: one request instead of a claim and an
 * append). The holder gives the slot back itself when the write is withdrawn or turns out to be a retry.
 */
export const forwardedCountedAppendBody = forwardedAppendBody.extend({
  quota: z.strictObject({ ...quotaCounter, limit: slot })
});
export type ForwardedCountedAppendBody = z.infer<typeof forwardedCountedAppendBody>;

const countedOutcomes = [
  z.object({ outcome: z.literal('appended'), entry: ledgerEntrySchema, duplicate: z.boolean() }),
  z
    .object({ outcome: z.literal('withdrawn') })
    .describe("the caller's deadline passed before its batch began: nothing was written, no slot spent"),
  z.object({ outcome: z.literal('over_quota') }).describe('the daily quota is used up: nothing was written')
] as const;
export const forwardedCountedAppendAnswer = z.discriminatedUnion('outcome', [...countedOutcomes]);
export type ForwardedCountedAppendAnswer = z.infer<typeof forwardedCountedAppendAnswer>;

/**
 * Counted appends a replica had waiting while its earlier ones were on their way, in one request (at most
 * MAX_FORWARD_BATCH, and about FORWARD_BATCH_BYTES of body unless it is a lone write): the holder takes each one's
 * slot and appends them together, as if each had come alone, and answers each in the order sent.
 */
export const MAX_FORWARD_BATCH = 64;
export const FORWARD_BATCH_BYTES = 1024 * 1024;
export const forwardedCountedAppendBatchBody = z.strictObject({
  writes: z.array(forwardedCountedAppendBody).min(1).max(MAX_FORWARD_BATCH)
});
export const forwardedCountedAppendBatchAnswer = z.object({
  answers: z.array(
    z.discriminatedUnion('outcome', [
      ...countedOutcomes,
      z
        .object({ outcome: z.literal('failed'), message: z.string() })
        .describe('the holder failed on this write (the database, say): it may or may not have landed')
    ])
  )
});
export type ForwardedCountedAppendBatchAnswer = z.infer<typeof forwardedCountedAppendBatchAnswer>;

/** Up to `count` slots of the counter for the sender to hand out itself (fewer near the limit; none past it). */
export const forwardedConsumeBody = z.strictObject({
  ...quotaCounter,
  limit: slot,
  count: z.number().int().min(1).max(256)
});
export const forwardedConsumeAnswer = z.object({ slots: z.array(slot) });
/** Slots the sender took and did not use: the holder hands them out again (or deletes them). */
export const forwardedRefundBody = z.strictObject({ ...quotaCounter, slots: z.array(slot).min(1).max(256) });
export const forwardedRefundAnswer = z.object({ refunded: z.number().int() });
