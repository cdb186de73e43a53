/**
 * Federated compute (capability `compute`): SLIM groups, group encryption and group consensus (protocol zh-slim/v1,
 * the bytes in core/compute/group-crypto.node.ts; README "Federated compute: groups, encryption, consensus").
 *   POST /v1/slim/group/secret     (oauth) create a group, change its membership (a new epoch), read an epoch:
 *                                  members are OAuth clients publishing X25519 and Ed25519 public keys; the hub
 *                                  wraps a fresh epoch key to each member and forgets it (stores wraps + commitment)
 *   POST /v1/slim/message/encrypt  (group_key) AES-256-GCM under the current epoch key the member presents
 *   POST /v1/slim/message/decrypt  (group_key) the counterpart; not a directory endpoint of its own (the spec's
 *                                  federated_compute group has nine), it is the encrypt endpoint's other half
 *   POST /v1/slim/group/consensus  (group_key) propose / vote (Ed25519 ballots) / status: workflow group-consensus/<id>
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { BALLOT_CHOICES } from '../../../core/compute/consensus';
import {
  b64u,
  fromB64u,
  isOkpPublicKey,
  matchesCommitment,
  openMessage,
  sealMessage,
  sha256Hex,
  SLIM_GROUP_PROTOCOL,
  startEpoch
} from '../../../core/compute/group-crypto.node';
import { AppError, notFound } from '../../../core/errors';
import { humanText } from '../../../core/identifiers';
import type { CredentialStore } from '../../../store/credentials';
import { epochDocId, EpochDocument, GroupMember, SlimGroupStore } from '../../../store/compute/groups';
import {
  castGroupBallot,
  groupConsensusStatus,
  openGroupConsensus
} from '../../../workflows/compute/group-consensus.client';
import { GroupConsensusInput, groupConsensusWorkflowId } from '../../../contracts/compute/group-consensus.contract';
import { groupOfPrincipal, presentedGroupKey } from '../../plugins/auth/group-key';
import { ERROR_BODY } from '../../response-docs';

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

const memberInput = z.object({ member_id: memberId, x25519: okpJwk('X25519'), ed25519: okpJwk('Ed25519') }).strict();
const members = z
  .array(memberInput)
  .min(1)
  .max(MAX_GROUP_MEMBERS)
  .describe(`1-${MAX_GROUP_MEMBERS} members with distinct member_id (registered OAuth clients)`);

const secretBody = z.discriminatedUnion(
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
const epochView = z.object({
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
const encryptBody = z
  .object({
    plaintext: z
      .string()
      .max(MAX_PLAINTEXT)
      .describe(`text, at most ${MAX_PLAINTEXT} UTF-16 code units (64 KiB as UTF-8)`),
    associated_data: z.string().max(1024).optional()
  })
  .strict();
const decryptBody = z
  .object({
    message: sealed,
    associated_data: z.string().max(1024).optional(),
    epoch_key: raw32.optional().describe("the key of the message's epoch, when it is an earlier one")
  })
  .strict();
const encryptAnswer = z.object({
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
const decryptAnswer = z.object({
  ok: z.literal(true),
  group_id: z.string(),
  epoch: z.number().int(),
  plaintext: z.string().nullable().describe('the plaintext as UTF-8 text (null when it is not valid UTF-8)'),
  plaintext_b64: z.string().describe('the plaintext bytes, base64url')
});

const consensusBody = z.discriminatedUnion(
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
const consensusAnswer = z.object({
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

const jwkOf = (crv: 'X25519' | 'Ed25519', x: string) => ({ kty: 'OKP' as const, crv, x });

function viewOf(epoch: EpochDocument, group: { name: string | null; owner: string; epoch: number }) {
  return {
    ok: true as const,
    protocol: SLIM_GROUP_PROTOCOL,
    group_id: epoch.group_id,
    name: group.name,
    owner: group.owner,
    epoch: epoch.epoch,
    current_epoch: group.epoch,
    reason: epoch.reason,
    created_at: epoch.created_at,
    members: epoch.members.map((m) => ({
      member_id: m.member_id,
      x25519: jwkOf('X25519', m.x25519),
      ed25519: jwkOf('Ed25519', m.ed25519)
    })),
    ephemeral_public: epoch.ephemeral_public,
    commitment: epoch.commitment,
    wraps: epoch.wraps.map((w) => ({ member_id: w.member_id, iv: w.iv, wrapped_key: w.wrapped_key }))
  };
}

export const groupRoutes: FastifyPluginAsyncZod<{
  config: Config;
  temporal: Client;
  groups: SlimGroupStore;
  credentials: CredentialStore;
}> = async (app, deps) => {
  const { config, temporal, groups, credentials } = deps;
  const declare = (auth: 'oauth' | 'group_key', summary?: string) => ({
    auth,
    ...(summary ? { directory: { group: 'federated_compute' as const, summary } } : {})
  });

  /** Members as stored: distinct ids, registered (unrevoked) OAuth clients, usable keys. */
  async function checkedMembers(input: z.infer<typeof memberInput>[]): Promise<GroupMember[]> {
    const bad: { field: string; message: string }[] = [];
    const seen = new Set<string>();
    for (const [i, m] of input.entries()) {
      if (seen.has(m.member_id)) bad.push({ field: `members.${i}.member_id`, message: 'appears twice' });
      seen.add(m.member_id);
      if (!isOkpPublicKey('X25519', m.x25519.x))
        bad.push({ field: `members.${i}.x25519`, message: 'not a usable X25519 public key' });
      if (!isOkpPublicKey('Ed25519', m.ed25519.x))
        bad.push({ field: `members.${i}.ed25519`, message: 'not a usable Ed25519 public key' });
    }
    if (bad.length === 0) {
      for (const [i, m] of input.entries()) {
        if (!(await credentials.findOAuthClient(m.member_id)))
          bad.push({ field: `members.${i}.member_id`, message: 'not a registered OAuth client' });
      }
    }
    if (bad.length > 0) throw new AppError('invalid_request', 'Some members are not acceptable', { fields: bad });
    return input.map((m) => ({ member_id: m.member_id, x25519: m.x25519.x, ed25519: m.ed25519.x }));
  }

  const newEpoch = (
    group_id: string,
    epoch: number,
    list: GroupMember[],
    reason: string,
    by: string
  ): EpochDocument => ({
    _id: epochDocId(group_id, epoch),
    group_id,
    epoch,
    members: list,
    reason,
    created_by: by,
    created_at: new Date().toISOString(),
    ...startEpoch(group_id, epoch, list)
  });

  app.post(
    '/v1/slim/group/secret',
    {
      config: declare(
        'oauth',
        "Group key agreement: create a group, change its membership (new epoch), read an epoch's wrapped keys"
      ),
      schema: {
        body: secretBody,
        response: {
          200: epochView,
          403: ERROR_BODY.describe("Only the group's owner changes its membership"),
          409: ERROR_BODY.describe('Another membership change made this epoch first; read the group and retry')
        }
      }
    },
    async (request) => {
      const body = request.body;
      const caller = request.principal!.id;
      if (body.action === 'create') {
        const list = await checkedMembers(body.members);
        const id = `sg_${randomBytes(8).toString('hex')}`;
        const first = newEpoch(id, 1, list, 'created', caller);
        const group = {
          _id: id,
          name: body.name ?? null,
          owner: caller,
          epoch: 1,
          created_at: first.created_at,
          updated_at: first.created_at
        };
        await groups.create(group, first);
        return viewOf(first, group);
      }
      const found = await groups.find(body.group_id);
      const isMember = (e: EpochDocument) => e.members.some((m) => m.member_id === caller);
      if (!found || (found.group.owner !== caller && !isMember(found.current)))
        throw notFound(`No group ${body.group_id} visible to ${caller}`);
      if (body.action === 'get') {
        const epoch =
          body.epoch === undefined || body.epoch === found.current.epoch
            ? found.current
            : await groups.epoch(body.group_id, body.epoch);
        if (!epoch || (found.group.owner !== caller && !isMember(epoch)))
          throw notFound(`No epoch ${body.epoch} of ${body.group_id} visible to ${caller}`);
        return viewOf(epoch, found.group);
      }
      if (found.group.owner !== caller)
        throw new AppError(
          'forbidden',
          `Only the owner (${found.group.owner}) changes the membership of ${body.group_id}`
        );
      const list = await checkedMembers(body.members);
      const next = newEpoch(body.group_id, found.current.epoch + 1, list, body.reason ?? 'membership change', caller);
      if (!(await groups.advance(next)))
        throw new AppError('conflict', `Epoch ${next.epoch} of ${body.group_id} was made by another change`, {
          group_id: body.group_id
        });
      return viewOf(next, { ...found.group, epoch: next.epoch });
    }
  );

  app.post(
    '/v1/slim/message/encrypt',
    {
      config: declare(
        'group_key',
        'Encrypt a message for the group (AES-256-GCM, current epoch key; AAD binds group and epoch)'
      ),
      schema: { body: encryptBody, response: { 200: encryptAnswer } }
    },
    async (request) => {
      const { group_id, epoch } = groupOfPrincipal(request.principal);
      const message = sealMessage(
        group_id,
        epoch,
        presentedGroupKey(request),
        Buffer.from(request.body.plaintext, 'utf8'),
        request.body.associated_data
      );
      return { ok: true as const, message };
    }
  );

  app.post(
    '/v1/slim/message/decrypt',
    {
      config: declare('group_key'),
      schema: {
        body: decryptBody,
        response: {
          200: decryptAnswer,
          400: ERROR_BODY.describe(
            'Also: the message does not authenticate (tampered, or sealed under another key), is of an epoch not reached yet, or of an earlier epoch without epoch_key'
          ),
          403: ERROR_BODY.describe("The message is for another group, or epoch_key is not that epoch's key")
        }
      }
    },
    async (request) => {
      const { group_id, epoch: current } = groupOfPrincipal(request.principal);
      const { message, associated_data, epoch_key } = request.body;
      if (message.group_id !== group_id)
        throw new AppError('forbidden', `The message is for group ${message.group_id}, not ${group_id}`);
      if (message.epoch > current)
        throw new AppError(
          'invalid_request',
          `Group ${group_id} has no epoch ${message.epoch} yet (current: ${current})`,
          { fields: [{ field: 'message.epoch', message: 'not reached yet' }] }
        );
      let key = presentedGroupKey(request);
      if (message.epoch !== current) {
        if (!epoch_key)
          throw new AppError(
            'invalid_request',
            `The message is of epoch ${message.epoch}: give that epoch's key as epoch_key`,
            { fields: [{ field: 'epoch_key', message: 'required for an earlier epoch' }] }
          );
        const old = await groups.epoch(group_id, message.epoch);
        key = fromB64u(epoch_key);
        if (!old || !matchesCommitment(group_id, message.epoch, key, old.commitment))
          throw new AppError('forbidden', `epoch_key is not the key of epoch ${message.epoch}`);
      }
      const plain = openMessage(key, message, associated_data);
      if (!plain)
        throw new AppError(
          'invalid_request',
          'Decryption failed: the ciphertext, its nonce, salt or tag, or the bound group, epoch or associated data were altered',
          { fields: [{ field: 'message', message: 'does not authenticate' }] }
        );
      let text: string | null;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(plain);
      } catch {
        text = null;
      }
      return { ok: true as const, group_id, epoch: message.epoch, plaintext: text, plaintext_b64: b64u(plain) };
    }
  );

  app.post(
    '/v1/slim/group/consensus',
    {
      config: declare(
        'group_key',
        'Group consensus: propose, vote with Ed25519-signed ballots, status (workflow group-consensus/<id>)'
      ),
      schema: {
        body: consensusBody,
        response: {
          200: consensusAnswer,
          403: ERROR_BODY.describe(
            "The ballot's signature does not verify, or its member_id is not a member of the proposal's epoch"
          ),
          409: ERROR_BODY.describe(
            "The consensus is closed, the member has already voted, or (propose) the quorum exceeds the epoch's members"
          )
        }
      }
    },
    async (request) => {
      const { group_id, epoch } = groupOfPrincipal(request.principal);
      const body = request.body;
      if (body.action === 'propose') {
        const epochDoc = await groups.epoch(group_id, epoch);
        if (!epochDoc) throw notFound(`No epoch ${epoch} of ${group_id}`);
        if (body.quorum > epochDoc.members.length) {
          // The quorum is well formed; it conflicts with the group's current membership (409, like any state conflict).
          throw new AppError(
            'conflict',
            `quorum ${body.quorum} exceeds the ${epochDoc.members.length} members of epoch ${epoch}`,
            { quorum: body.quorum, members: epochDoc.members.length }
          );
        }
        const id = `gc_${randomBytes(8).toString('hex')}`;
        const input: GroupConsensusInput = {
          version: 1,
          consensus_id: id,
          group_id,
          epoch,
          proposal: body.proposal,
          proposal_sha256: sha256Hex(body.proposal),
          quorum: body.quorum,
          members: epochDoc.members.map((m) => ({ member_id: m.member_id, ed25519: m.ed25519 })),
          deadline_s: body.deadline_s,
          proposed_by: request.principal!.id,
          created_at: new Date().toISOString(),
          hub_did: config.SERVICE_DID
        };
        const { workflowId } = await openGroupConsensus(temporal, config.TEMPORAL_TASK_QUEUE, input);
        return { ok: true as const, workflow_id: workflowId, consensus: await groupConsensusStatus(temporal, id) };
      }
      const status = await groupConsensusStatus(temporal, body.consensus_id);
      if (status.group_id !== group_id) throw notFound(`No consensus ${body.consensus_id} in group ${group_id}`);
      if (body.action === 'status')
        return { ok: true as const, workflow_id: groupConsensusWorkflowId(body.consensus_id), consensus: status };
      if (status.state !== 'open')
        throw new AppError('conflict', `consensus ${body.consensus_id} is closed (${status.state})`, {
          consensus_id: body.consensus_id
        });
      const epochDoc = await groups.epoch(group_id, status.epoch);
      if (!epochDoc?.members.some((m) => m.member_id === body.member_id))
        throw new AppError('forbidden', `${body.member_id} is not a member of epoch ${status.epoch} of ${group_id}`);
      const after = await castGroupBallot(temporal, body.consensus_id, {
        member_id: body.member_id,
        choice: body.choice,
        signature: body.signature
      });
      return { ok: true as const, workflow_id: groupConsensusWorkflowId(body.consensus_id), consensus: after };
    }
  );
};
