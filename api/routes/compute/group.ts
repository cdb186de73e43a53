/**
 * Federated compute (capability `compute`): SLIM groups, group encryption and group consensus (protocol zh-slim/v1,
 * the bytes in core/compute/group-crypto.node.ts; docs/compute.md#federated-compute-groups-encryption-consensus).
 *   POST /v1/slim/group/secret     (oauth) create a group, change its membership (a new epoch), read an epoch:
 *                                  members are OAuth clients publishing X25519 and Ed25519 public keys; the hub
 *                                  wraps a fresh epoch key to each member and forgets it (stores wraps + commitment)
 *   POST /v1/slim/message/encrypt  (group_key) AES-256-GCM under the current epoch key the member presents
 *   POST /v1/slim/message/decrypt  (group_key) the counterpart; not a directory endpoint of its own (the documented
 *                                  federated_compute group has nine, docs/endpoints.md): the encrypt endpoint's half
 *   POST /v1/slim/group/consensus  (group_key) propose / vote (Ed25519 ballots) / status: workflow group-consensus/<id>
 */
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { ServiceConfig, TemporalConfig } from '../../../core/config.node';
import type { CredentialStore } from '../../../store/credentials';
import type { SlimGroupStore } from '../../../store/compute/groups';
import { createSlimGroups } from '../../../services/compute/slim-groups';
import { groupOfPrincipal, presentedGroupKey } from '../../plugins/auth/group-key';
import { ERROR_BODY } from '../../response-docs';
import {
  consensusAnswer,
  consensusBody,
  decryptAnswer,
  decryptBody,
  encryptAnswer,
  encryptBody,
  epochView,
  secretBody
} from './group.schema';

export const groupRoutes: FastifyPluginAsyncZod<{
  config: Pick<ServiceConfig, 'SERVICE_DID'> & Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'>;
  temporal: Client;
  groups: SlimGroupStore;
  credentials: CredentialStore;
}> = async (app, deps) => {
  const slim = createSlimGroups(deps);
  const declare = (auth: 'oauth' | 'group_key', summary?: string) => ({
    auth,
    ...(summary ? { directory: { group: 'federated_compute' as const, summary } } : {})
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
    async (request) => slim.groupSecret(request.principal!.id, request.body)
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
    async (request) =>
      slim.encrypt(
        { ...groupOfPrincipal(request.principal), key: presentedGroupKey(request) },
        request.body.plaintext,
        request.body.associated_data
      )
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
    async (request) =>
      slim.decrypt({ ...groupOfPrincipal(request.principal), key: presentedGroupKey(request) }, request.body)
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
    async (request) => slim.consensus(groupOfPrincipal(request.principal), request.principal!.id, request.body)
  );
};
