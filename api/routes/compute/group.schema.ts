/**
 * The request and answer schemas of the SLIM group routes (api/routes/compute/group.ts, protocol zh-slim/v1): group
 * membership with public OKP keys, sealed messages, consensus ballots.
 */
import { z } from 'zod';
import { BALLOT_CHOICES } from '../../../core/compute/consensus';
import { SLIM_GROUP_PROTOCOL } from '../../../core/compute/group-crypto.node';
import { humanText } from '../../../core/identifiers';

export const MAX_GROUP_MEMBERS = 64;
/** UTF-16 code units: at most 3 UTF-8 bytes each, so a plaintext is at most 64 KiB and its sealed form fits decrypt's limit. */
const MAX_PLAINTEXT = 21_845;
/** base64url of 64 KiB + the 16-byte tag. */
const MAX_CIPHERTEXT = Math.ceil(((65_536 + 16) * 4) / 3);

const groupId = z.string().regex(/^sg_[a-f0-9]{16}$/, 'a group id such as sg_0123456789abcdef');
const consensusId = z.string().regex(/^gc_[a-f0-9]{16}$/, 'a consensus id such as gc_0123456789abcdef');
const memberId = z.string().regex(/^client_[a-f0-9]{16}$/, 'an OAuth client id (client_<16 hex>)');
/** 32 bytes, base64url without padding, canonical (the last character carries no stray bits). */
const raw32 = z.string().regex(/^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/, '32 bytes, base64url without padding');
const raw64 = z.string().regex(/^[A-Za-z0-9_-]{85}[AQgw]$/, '64 bytes, base64url without padding');
const b64url = (max: number) =>
  z
    .string()
    .max(max)
    .regex(/^[A-Za-z0-9_-]*$/, 'base64url without padding');

/** A public OKP JWK; a private key (`d`) is refused with the other unknown members. */
const okpJwk = (crv: 'X25519' | 'Ed25519') =>
  z
    .object({
      kty: z.literal('OKP'),
      crv: z.literal(crv),
      x: raw32,
      kid: z.string().max(200).optional(),
      alg: z.string().max(20).optional(),
      use: z.string().max(10).optional()
    })
    .strict()
    .describe(`${crv} public key as a JWK (no private member d)`);

export const memberInput = z
  .object({ member_id: memberId, x25519: okpJwk('X25519'), ed25519: okpJwk('Ed25519') })
  .strict();
const members = z
  .array(memberInput)
  .min(1)
  .max(MAX_GROUP_MEMBERS)
  .describe(`1-${MAX_GROUP_MEMBERS} members with distinct member_id (registered OAuth clients)`);

export const secretBody = z.discriminatedUnion(
  'action',
  [
    z.object({ action: z.literal('create'), name: humanText(200).optional(), members }).strict(),
    z
      .object({ action: z.literal('rekey'), group_id: groupId, members, reason: humanText(500).optional() })
      .strict()
      .describe('a new epoch with this (full) member list'),
    z
      .object({ action: z.literal('get'), group_id: groupId, epoch: z.number().int().min(1).max(1_000_000).optional() })
      .strict()
  ],
  { error: () => 'action must be one of: create, rekey, get' }
);

const publicJwk = z.object({ kty: z.literal('OKP'), crv: z.string(), x: z.string() });
export const epochView = z.object({
  ok: z.literal(true),
  protocol: z.literal(SLIM_GROUP_PROTOCOL),
  group_id: z.string(),
  name: z.string().nullable(),
  owner: z.string().describe('the OAuth client that manages the membership'),
  epoch: z.number().int().describe('the epoch shown'),
  current_epoch: z.number().int(),
  reason: z.string(),
  created_at: z.string(),
  members: z.array(z.object({ member_id: z.string(), x25519: publicJwk, ed25519: publicJwk })),
  ephemeral_public: z.string().describe("the epoch's ephemeral X25519 public key (raw, base64url)"),
  commitment: z.string().describe('HKDF-SHA-256 key commitment of the epoch key (base64url)'),
  wraps: z.array(
    z.object({
      member_id: z.string(),
      iv: z.string(),
      wrapped_key: z.string().describe('AES-256-GCM ciphertext + tag of the epoch key')
    })
  )
});

const sealed = z
  .object({
    v: z.literal(1),
    group_id: groupId,
    epoch: z.number().int().min(1).max(1_000_000),
    salt: b64url(22),
    iv: b64url(16),
    ciphertext: b64url(MAX_CIPHERTEXT)
  })
  .strict()
  .describe('a sealed message (zh-slim/v1)');
export const encryptBody = z
  .object({
    plaintext: z
      .string()
      .max(MAX_PLAINTEXT)
      .describe(`text, at most ${MAX_PLAINTEXT} UTF-16 code units (64 KiB as UTF-8)`),
    associated_data: z.string().max(1024).optional()
  })
  .strict();
export const decryptBody = z
  .object({
    message: sealed,
    associated_data: z.string().max(1024).optional(),
    epoch_key: raw32.optional().describe("the key of the message's epoch, when it is an earlier one")
  })
  .strict();
export const encryptAnswer = z.object({
  ok: z.literal(true),
  message: z.object({
    v: z.literal(1),
    group_id: z.string(),
    epoch: z.number().int(),
    salt: z.string(),
    iv: z.string(),
    ciphertext: z.string()
  })
});
export const decryptAnswer = z.object({
  ok: z.literal(true),
  group_id: z.string(),
  epoch: z.number().int(),
  plaintext: z.string().nullable().describe('the plaintext as UTF-8 text (null when it is not valid UTF-8)'),
  plaintext_b64: z.string().describe('the plaintext bytes, base64url')
});

export const consensusBody = z.discriminatedUnion(
  'action',
  [
    z
      .object({
        action: z.literal('propose'),
        proposal: humanText(4000, { multiline: true }),
        quorum: z
          .number()
          .int()
          .min(1)
          .max(MAX_GROUP_MEMBERS)
          .describe('approvals needed; at most the number of members'),
        deadline_s: z.number().int().min(1).max(604_800)
      })
      .strict(),
    z
      .object({
        action: z.literal('vote'),
        consensus_id: consensusId,
        member_id: memberId,
        choice: z.enum(BALLOT_CHOICES),
        signature: raw64.describe('Ed25519 over the ballot message')
      })
      .strict(),
    z.object({ action: z.literal('status'), consensus_id: consensusId }).strict()
  ],
  { error: () => 'action must be one of: propose, vote, status' }
);
export const consensusAnswer = z.object({
  ok: z.literal(true),
  workflow_id: z.string(),
  consensus: z.object({
    consensus_id: z.string(),
    group_id: z.string(),
    epoch: z.number().int(),
    proposal: z.string(),
    proposal_sha256: z.string(),
    quorum: z.number().int(),
    members: z.number().int(),
    state: z.enum(['open', 'accepted', 'rejected', 'expired']),
    approvals: z.number().int(),
    rejections: z.number().int(),
    ballots: z.array(
      z.object({ member_id: z.string(), choice: z.enum(BALLOT_CHOICES), signature: z.string(), cast_at: z.string() })
    ),
    created_at: z.string(),
    deadline_at: z.string(),
    decided_at: z.string().nullable(),
    outcome_seq: z.number().int().nullable().describe('the ledger seq of the recorded outcome'),
    refused: z
      .array(z.object({ member_id: z.string(), reason: z.string() }))
      .describe('ballots sent by signal (not through this route) that were refused')
  })
});
