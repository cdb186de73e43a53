/**
 * The answer schemas of the public ledger reads (api/routes/ledger/read.ts): status with a signed tree head,
 * entries, snapshot, list, verification and RFC 6962 proofs.
 */
import { z } from 'zod';
import { publicEntrySchema } from '../../../core/ledger/ledger-entry';
import { rawJsonSchema } from '../../../core/raw-json';

const hex = z.string().regex(/^[0-9a-f]{64}$/);

const signedTreeHead = z.object({
  tree_size: z.number().int(),
  root_hash: hex,
  timestamp: z.string(),
  algorithm: z.literal('Ed25519'),
  key_id: z.string(),
  signature: z
    .string()
    .describe('base64 Ed25519 signature over the canonical JSON {"root_hash","timestamp","tree_size"}')
});
export const statusResponse = z.object({
  status: z.literal('online'),
  service: z.string(),
  did: z.string(),
  truth_count: z.number().int(),
  merkle_root: hex,
  version: z.string(),
  hub_version: z.string(),
  tree_head: signedTreeHead,
  public_key: z.object({ algorithm: z.literal('Ed25519'), key_id: z.string(), base64: z.string() }),
  tlog: z
    .object({
      origin: z.string().describe('the C2SP checkpoint origin (GET /tlog/checkpoint)'),
      verifier_key: z.string().describe('the checkpoint verifier key, <origin>+<key id hex>+<base64 0x01||key>'),
      witness: z
        .object({
          name: z.string().describe("the witness's cosigning key name (TLOG_WITNESS_NAME)"),
          verifier_key: z.string().describe('the cosignature verifier key, <name>+<key id hex>+<base64 0x04||key>'),
          logs: z
            .array(z.string())
            .describe('the origins of the logs this hub witnesses (TLOG_WITNESSED_LOGS and the peer registry)')
        })
        .describe('the hub as a C2SP tlog-witness: POST /tlog/add-checkpoint'),
      witnesses: z
        .object({
          k: z
            .number()
            .int()
            .describe('cosignatures a checkpoint needs to count as witnessed (TLOG_WITNESS_QUORUM; unset: n)'),
          n: z.number().int().describe('the witnesses of this log now (TLOG_WITNESSES and the peer registry)'),
          witnessed_size: z
            .number()
            .int()
            .nullable()
            .describe('the size of the newest checkpoint k witnesses cosigned (GET /tlog/checkpoint); null: none yet'),
          witnesses: z.array(
            z.object({
              name: z.string(),
              verifier_key: z.string().describe('the configured cosignature verifier key'),
              url: z.string().describe('the submission prefix (…/add-checkpoint)'),
              peer_id: z
                .string()
                .nullable()
                .describe('the peer whose pinned witness key this is (POST /admin/peers); null: TLOG_WITNESSES'),
              state: z
                .enum(['pending', 'cosigned', 'unreachable', 'refused'])
                .describe('the outcome of the last submission (pending: none yet)'),
              cosigned_size: z.number().int().describe('the largest size it cosigned with a cosignature that verified'),
              witness_size: z.number().int().nullable().describe('the size the witness says it last cosigned'),
              reason: z.string().nullable().describe('why the last submission gave no cosignature that counts'),
              attempted_at: z.string().nullable(),
              cosigned_at: z.string().nullable()
            })
          )
        })
        .describe("the witnesses of this hub's log and the k-of-n policy (docs/transparency.md#witnesses-of-this-log)")
    })
    .describe('the ledger as a C2SP transparency log (docs/transparency.md)')
});
export const entriesResponse = z.object({
  ok: z.literal(true),
  count: z.number().int(),
  results: z.array(publicEntrySchema)
});
export const publicResponse = entriesResponse.extend({ truth_types: z.array(z.string()) });
export const ledgerResponse = z.object({
  ok: z.literal(true),
  size: z.number().int(),
  root: hex,
  count: z.number().int(),
  entries: z.array(publicEntrySchema.extend({ root_after: hex }))
});
export const listResponse = z.object({
  ok: z.literal(true),
  count: z.number().int(),
  truths: z.array(
    z.object({
      seq: z.number().int(),
      key: z.string(),
      truth_value: rawJsonSchema('the value, as canonical JSON'),
      truth_type: z.string().nullable(),
      did: z.string().nullable(),
      event_id: z.string(),
      created_at: z.string()
    })
  )
});
export const verifyResponse = z.object({
  ok: z.boolean(),
  consistent: z.boolean(),
  computed: hex,
  stored: hex,
  ledger_lines: z.number().int(),
  first_bad_seq: z.number().int().nullable(),
  problem: z.string().nullable(),
  checked_at: z.string()
});
export const seedResponse = z.object({
  ok: z.boolean(),
  chain_length: z.number().int(),
  head_hash: hex.nullable(),
  first_break: z
    .object({ seq: z.number().int(), expected_prev_seed_hash: hex.nullable(), found: z.unknown() })
    .nullable(),
  rule: z.string(),
  checked_at: z.string()
});
export const inclusionResponse = z.object({
  ok: z.literal(true),
  seq: z.number().int(),
  leaf_index: z.number().int(),
  tree_size: z.number().int(),
  leaf_hash: hex,
  root: hex,
  audit_path: z.array(hex),
  entry: publicEntrySchema
});
export const consistencyResponse = z.object({
  ok: z.literal(true),
  first: z.number().int(),
  second: z.number().int(),
  first_root: hex,
  second_root: hex,
  proof: z.array(hex)
});
