/**
 * SLIM groups (protocol zh-slim/v1, the bytes in core/compute/group-crypto.node.ts): the use cases behind
 * POST /v1/slim/group/secret, /v1/slim/message/encrypt, /v1/slim/message/decrypt and /v1/slim/group/consensus.
 *   - Membership: members are registered OAuth clients publishing X25519 and Ed25519 public keys; each change is a
 *     new epoch whose fresh key the hub wraps to every member and forgets (it keeps the wraps and a commitment).
 *     Only the owner changes the membership; a group and its epochs are visible to the owner and their members.
 *   - Messages: AES-256-GCM under an epoch key the member presents; an earlier epoch's key is checked against that
 *     epoch's commitment.
 *   - Consensus: a proposal is the workflow group-consensus/<id>, over the members of the epoch it was made in.
 * Built per route plugin (createSlimGroups) from the stores and the Temporal client it is given.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { BallotChoice } from '../../core/compute/consensus';
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
} from '../../core/compute/group-crypto.node';
import type { ServiceConfig, TemporalConfig } from '../../core/config.node';
import { AppError, notFound } from '../../core/errors';
import type { CredentialStore } from '../../store/credentials';
import { epochDocId, type EpochDocument, type GroupMember, type SlimGroupStore } from '../../store/compute/groups';
import {
  castGroupBallot,
  groupConsensusStatus,
  openGroupConsensus
} from '../../workflows/compute/group-consensus.client';
import { type GroupConsensusInput, groupConsensusWorkflowId } from '../../contracts/compute/group-consensus.contract';

/** A member as a request names it: an OAuth client id and its two public keys as JWKs. */
export interface MemberInput {
  member_id: string;
  x25519: { x: string };
  ed25519: { x: string };
}

export type SecretRequest =
  | { action: 'create'; name?: string; members: MemberInput[] }
  | { action: 'rekey'; group_id: string; members: MemberInput[]; reason?: string }
  | { action: 'get'; group_id: string; epoch?: number };

export interface SealedMessage {
  v: 1;
  group_id: string;
  epoch: number;
  salt: string;
  iv: string;
  ciphertext: string;
}

export type ConsensusRequest =
  | { action: 'propose'; proposal: string; quorum: number; deadline_s: number }
  | { action: 'vote'; consensus_id: string; member_id: string; choice: BallotChoice; signature: string }
  | { action: 'status'; consensus_id: string };

/** The group a request authenticated for (api/plugins/auth/group-key.ts) and the epoch key it presented. */
export interface GroupCaller {
  group_id: string;
  epoch: number;
  key: Buffer;
}

export interface SlimGroupDeps {
  groups: SlimGroupStore;
  credentials: CredentialStore;
  temporal: Client;
  config: Pick<ServiceConfig, 'SERVICE_DID'> & Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'>;
}

const jwkOf = (crv: 'X25519' | 'Ed25519', x: string) => ({ kty: 'OKP' as const, crv, x });

/** An epoch as the secret endpoint answers it: its members' public keys and the wraps of its key. */
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

const newEpoch = (group_id: string, epoch: number, list: GroupMember[], reason: string, by: string): EpochDocument => ({
  _id: epochDocId(group_id, epoch),
  group_id,
  epoch,
  members: list,
  reason,
  created_by: by,
  created_at: new Date().toISOString(),
  ...startEpoch(group_id, epoch, list)
});

export function createSlimGroups({ groups, credentials, temporal, config }: SlimGroupDeps) {
  /** Members as stored: distinct ids, registered (unrevoked) OAuth clients, usable keys. */
  async function checkedMembers(input: MemberInput[]): Promise<GroupMember[]> {
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

  /** Create a group, change its membership (a new epoch), or read an epoch, for the OAuth client `caller`. */
  async function groupSecret(caller: string, body: SecretRequest) {
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

  function encrypt({ group_id, epoch, key }: GroupCaller, plaintext: string, associatedData?: string) {
    const message = sealMessage(group_id, epoch, key, Buffer.from(plaintext, 'utf8'), associatedData);
    return { ok: true as const, message };
  }

  async function decrypt(
    { group_id, epoch: current, key: presented }: GroupCaller,
    { message, associated_data, epoch_key }: { message: SealedMessage; associated_data?: string; epoch_key?: string }
  ) {
    if (message.group_id !== group_id)
      throw new AppError('forbidden', `The message is for group ${message.group_id}, not ${group_id}`);
    if (message.epoch > current)
      throw new AppError(
        'invalid_request',
        `Group ${group_id} has no epoch ${message.epoch} yet (current: ${current})`,
        {
          fields: [{ field: 'message.epoch', message: 'not reached yet' }]
        }
      );
    let key = presented;
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

  /** Propose (workflow group-consensus/<id>), vote or read a proposal of the caller's group, as `proposer`. */
  async function consensus({ group_id, epoch }: Omit<GroupCaller, 'key'>, proposer: string, body: ConsensusRequest) {
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
        proposed_by: proposer,
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

  return { groupSecret, encrypt, decrypt, consensus };
}

export type SlimGroups = ReturnType<typeof createSlimGroups>;
