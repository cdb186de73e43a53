/**
 * The request and answer schemas of the partner channels (api/routes/partner/kunlun.ts): the operations, the
 * secure channel's envelopes, and the answers.
 */
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { publicEntrySchema } from '../../../core/ledger/ledger-entry';
import { ENVELOPE_ALG, ENVELOPE_VERSION } from '../../../core/partner/envelope.node';

const MAX_ENTRIES = 100;

export const operation = z.discriminatedUnion('op', [
  z.object({ op: z.literal('hello') }).strict(),
  z.object({ op: z.literal('echo'), message: humanText(4096, { multiline: true }) }).strict(),
  z.object({ op: z.literal('ledger_head') }).strict(),
  z
    .object({
      op: z.literal('ledger_entries'),
      after: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
      limit: z.number().int().min(1).max(MAX_ENTRIES).default(20)
    })
    .strict()
]);
type Operation = z.infer<typeof operation>;

const b64url = (what: string, max: number) =>
  z
    .string()
    .max(max)
    .regex(/^[A-Za-z0-9_-]+$/, `${what}, base64url without padding`);
export const requestEnvelope = z
  .object({
    v: z.literal(ENVELOPE_VERSION),
    alg: z.literal(ENVELOPE_ALG),
    epk: b64url("the partner's ephemeral X25519 public key (32 bytes)", 43),
    iv: b64url('12-byte AES-GCM iv', 16),
    ciphertext: b64url(
      'AES-256-GCM ciphertext followed by the 16-byte tag; the plaintext is one operation as JSON',
      48 * 1024
    )
  })
  .strict();
export const responseEnvelope = z.object({
  ok: z.literal(true),
  v: z.literal(ENVELOPE_VERSION),
  alg: z.literal(ENVELOPE_ALG),
  iv: z.string(),
  ciphertext: z
    .string()
    .describe('the answer (as /v1/federated/kunlun gives it) as JSON, encrypted under the response key')
});

export const answer = z.union([
  z.object({
    ok: z.literal(true),
    op: z.literal('hello'),
    partner_id: z.string(),
    partner_name: z.string(),
    hub: z.object({ did: z.string(), kid: z.string(), key_agreement_kid: z.string() }),
    time: z.string()
  }),
  z.object({ ok: z.literal(true), op: z.literal('echo'), partner_id: z.string(), message: z.string() }),
  z.object({ ok: z.literal(true), op: z.literal('ledger_head'), size: z.number().int(), root: z.string() }),
  z.object({
    ok: z.literal(true),
    op: z.literal('ledger_entries'),
    after: z.number().int(),
    next_cursor: z.number().int(),
    entries: z.array(publicEntrySchema)
  })
]);
