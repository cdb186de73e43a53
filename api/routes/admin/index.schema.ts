/**
 * The request and answer schemas of the administrator's credential routes (api/routes/admin/index.ts).
 */
import { z } from 'zod';
import { didSchema, humanText } from '../../../core/identifiers';

const label = humanText(200).optional();
const nullableLabel = z.string().nullable();
const shownOnce = (what: string) => `${what}: shown once; only its digest is stored`;

export const revokedResponse = (idName: string) =>
  z.object({ ok: z.literal(true), [idName]: z.string(), revoked: z.literal(true) });

export const didBody = z.object({
  did: didSchema.optional(),
  label
});
export const didResponse = z.object({
  ok: z.literal(true),
  did: z.string(),
  label: nullableLabel,
  created: z.boolean(),
  created_at: z.string()
});

export const homologousTokenBody = z.object({ label, did: didSchema.optional() });
export const homologousTokenIssued = z
  .object({
    ok: z.literal(true),
    token_id: z.string(),
    token: z.string().describe(shownOnce('the token')),
    did: z.string().nullable(),
    usage: z.string(),
    note: z.string()
  })
  .describe('Issued');

export const apiKeyBody = z.object({
  label,
  plan: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,20}$/)
    .default('S1')
});
export const apiKeyIssued = z
  .object({
    ok: z.literal(true),
    key_id: z.string(),
    api_key: z.string().describe(shownOnce('the key')),
    plan: z.string(),
    note: z.string()
  })
  .describe('Issued');

export const keyParams = { params: z.object({ key_id: z.string().regex(/^[a-f0-9]{16}$/, 'a 16-hex-digit key id') }) };
export const revokedKey = z.object({
  ok: z.literal(true),
  key_id: z.string(),
  revoked: z.literal(true),
  revoked_at: z.string().nullable()
});
export const regenerated = z.object({
  ok: z.literal(true),
  key_id: z.string(),
  api_key: z.string().describe(shownOnce('the new key')),
  note: z.string()
});

export const oauthClientBody = z.object({
  label,
  scopes: z
    .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/))
    .max(20)
    .default([])
});
export const oauthClientIssued = z
  .object({
    ok: z.literal(true),
    client_id: z.string(),
    client_secret: z.string().describe(shownOnce('the secret')),
    scopes: z.array(z.string()),
    token_endpoint: z.string()
  })
  .describe('Issued');

export const daemonAssetBody = z.object({ label });
export const assetIssued = z.object({
  ok: z.literal(true),
  asset_id: z.string(),
  order_root: z.string().describe(shownOnce('the order root')),
  version: z.number().int(),
  usage: z.string()
});
