/**
 * Model `group_key`: membership of a SLIM group, proved by presenting the group's current epoch key (which only
 * members can unwrap, POST /v1/slim/group/secret) over TLS:
 *   X-Slim-Group: <group id>        X-Slim-Group-Key: <the current epoch key, 32 bytes base64url>
 * The hub checks the key against the epoch's stored commitment (HKDF, constant-time) and keeps it only for the
 * request. A key of an earlier epoch is refused: a member removed by a membership change still holds it.
 * The principal's id is `<group id>#<epoch>`.
 */
import { fromB64u, matchesCommitment } from '../../../core/compute/group-crypto.node';
import { unauthorized } from '../../../core/errors';
import type { FastifyRequest } from 'fastify';
import { Authenticator, header, Principal } from './principal';

export const GROUP_ID_PATTERN = /^sg_[a-f0-9]{16}$/;
const KEY_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** The epoch key a request presented (already checked by the authenticator). */
export const presentedGroupKey = (request: FastifyRequest): Buffer =>
  fromB64u(header(request, 'x-slim-group-key') ?? '');

export function groupOfPrincipal(principal: Principal | null): { group_id: string; epoch: number } {
  const [groupId, epoch] = (principal?.id ?? '').split('#');
  return { group_id: groupId ?? '', epoch: Number(epoch) };
}

export const groupKey: Authenticator = async (request, deps) => {
  const groupId = header(request, 'x-slim-group');
  const key = header(request, 'x-slim-group-key');
  if (!groupId || !key)
    throw unauthorized('X-Slim-Group and X-Slim-Group-Key (the current epoch key, base64url) are required');
  if (!GROUP_ID_PATTERN.test(groupId) || !KEY_PATTERN.test(key))
    throw unauthorized('X-Slim-Group or X-Slim-Group-Key is malformed');
  const found = await deps.slimGroups.find(groupId);
  if (!found) throw unauthorized('Unknown group or wrong group key');
  if (!matchesCommitment(groupId, found.current.epoch, fromB64u(key), found.current.commitment)) {
    throw unauthorized("Unknown group or wrong group key (only the current epoch's key is accepted)");
  }
  return { model: 'group_key', id: `${groupId}#${found.current.epoch}` };
};
