/**
 * did_register { did, node_id, autonomy_level, channels } and did_revoke { did }: the DID registry that decides who
 * may deploy (store/deploy/registry.ts), changed by an arbitrator or the admin token; every change is a ledger event.
 * did_register's node_id links the DID to that node (X-DID alone then authenticates as it); a DID links to one node,
 * so naming another node moves the link (relinking: the answer and the ledger event name the previous node).
 *
 * With the node's key beside X-DID (X-External-Node + X-External-Key), did_register is the node linking the calling
 * DID to itself, no arbitrator needed: `did` must be the X-DID, `node_id` the key's node, the level, channels and
 * public key left as they are (those stay an arbitrator's), and the DID linked to no node or to this one already
 * (409 otherwise: a DID is no secret, so moving a link stays an arbitrator's).
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Config } from '../../../../core/config.node';
import { AppError } from '../../../../core/errors';
import { didSchema, usedDidSchema } from '../../../../core/identifiers';
import type { DidRegistryStore, RegistryEntry } from '../../../../store/deploy/registry';
import type { Ledger } from '../../../../store/ledger/ledger';
import { DEPLOY_CHANNEL, type DeployAccess } from '../access';
import { answer } from './action';

export const MAX_AUTONOMY_LEVEL = 5;

export const didRegisterBody = z
  .object({
    action: z.literal('did_register'),
    did: didSchema,
    node_id: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/)
      .describe('the node this DID belongs to (letters, digits, . _ : -; at most 128)'),
    public_key: z
      .string()
      .min(1)
      .max(4096)
      .regex(/^[\x20-\x7e\n\r]+$/, 'printable ASCII (PEM, multibase, base64url)')
      .optional()
      .describe("the node's public key, as text"),
    autonomy_level: z
      .number()
      .int()
      .min(0)
      .max(MAX_AUTONOMY_LEVEL)
      .describe(
        `0-${MAX_AUTONOMY_LEVEL}; at or above DEPLOY_ARBITRATOR_LEVEL the DID is an arbitrator (may use did_register and did_revoke)`
      ),
    channels: z
      .array(z.string().regex(/^[a-z][a-z0-9_.-]{0,31}$/))
      .max(16)
      .refine((c) => new Set(c).size === c.length, 'channels are distinct')
      .meta({ uniqueItems: true })
      .describe(`capability channels; "${DEPLOY_CHANNEL}" allows deploy, rollback, config and the port pool`)
  })
  .strict();
export const didRevokeBody = z.object({ action: z.literal('did_revoke'), did: usedDidSchema }).strict();
export const registryAnswer = z.object({
  ok: z.literal(true),
  action: z.enum(['did_register', 'did_revoke']),
  did: z.string(),
  node_id: z.string().nullable(),
  autonomy_level: z.number().int(),
  channels: z.array(z.string()),
  created: z.boolean().describe('did_register: the DID was not registered before'),
  previous_node_id: z
    .string()
    .nullable()
    .optional()
    .describe('did_register: the node the DID was linked to before (null: none); another than node_id means relinked'),
  revoked: z.boolean(),
  ledger_seq: z.number().int()
});

export function createRegistryActions(deps: {
  registry: DidRegistryStore;
  ledger: Pick<Ledger, 'append'>;
  config: Pick<Config, 'SERVICE_DID'>;
  access: DeployAccess;
}) {
  const { registry, ledger, config, access } = deps;
  type Registered = { entry: RegistryEntry; created: boolean; previous_node_id: string | null; by: string };

  /** An arbitrator (or the admin token) registers or updates the DID, its link included (moving it: relinking). */
  const registerByArbitrator = async (
    body: z.infer<typeof didRegisterBody>,
    request: FastifyRequest
  ): Promise<Registered> => {
    const who = await access.allow(request, 'arbitrator');
    const by = who.admin ? 'admin' : request.principal!.id;
    // An arbitrator cannot make a DID more autonomous than itself.
    if (!who.admin && body.autonomy_level > (who.entry?.autonomy_level ?? 0)) {
      throw new AppError(
        'forbidden',
        `an arbitrator of level ${who.entry?.autonomy_level ?? 0} cannot grant level ${body.autonomy_level}`
      );
    }
    const registered = await registry.register({
      did: body.did,
      node_id: body.node_id,
      public_key: body.public_key ?? null,
      autonomy_level: body.autonomy_level,
      channels: body.channels,
      by
    });
    return { ...registered, by };
  };

  /** The node of the key links the calling DID to itself, and changes nothing else (see the top of this file). */
  const linkByNodeKey = async (
    body: z.infer<typeof didRegisterBody>,
    request: FastifyRequest,
    node: string
  ): Promise<Registered> => {
    const did = request.principal!.id;
    const onlyLinks = 'with a node key, did_register links the calling DID (X-DID) to the node of the key';
    if (body.did !== did || body.node_id !== node)
      throw new AppError('forbidden', `${onlyLinks}: did must be ${did} and node_id ${node}`);
    const current = await registry.get(did);
    if (!current || (current.revoked_at ?? null) !== null)
      throw new AppError('unauthorized', 'X-DID is not a registered DID');
    const sameChannels = [...(current.channels ?? [])].sort().join() === [...body.channels].sort().join();
    if (
      body.autonomy_level !== (current.autonomy_level ?? 0) ||
      !sameChannels ||
      (body.public_key !== undefined && body.public_key !== (current.public_key ?? null))
    )
      throw new AppError(
        'forbidden',
        `${onlyLinks}; its autonomy level, channels and public key are an arbitrator's: send them as they are`
      );
    const by = `${did} with the key of ${node}`;
    if (current.node_id !== node && !(await registry.linkFreeDid(did, node, by))) {
      const now = await registry.get(did);
      if (now?.node_id !== node)
        throw new AppError('conflict', `DID ${did} is linked to another node; an arbitrator moves links`);
    }
    const entry = (await registry.get(did))!;
    return { entry, created: false, previous_node_id: current.node_id ?? null, by };
  };

  return {
    did_register: async (body: z.infer<typeof didRegisterBody>, request: FastifyRequest) => {
      const node = access.isAdmin(request) ? null : await access.nodeKey(request);
      const { entry, created, previous_node_id, by } =
        node === null ? await registerByArbitrator(body, request) : await linkByNodeKey(body, request, node);
      const { entry: recorded } = await ledger.append({
        kind: 'event',
        key: 'hub.deploy.did_registered',
        value: {
          did: body.did,
          node_id: body.node_id,
          public_key: entry.public_key ?? null,
          autonomy_level: entry.autonomy_level ?? 0,
          channels: entry.channels ?? [],
          created,
          previous_node_id,
          by
        },
        did: config.SERVICE_DID,
        truth_type: 'config'
      });
      return answer(200, {
        ok: true as const,
        action: body.action,
        did: body.did,
        node_id: entry.node_id ?? null,
        autonomy_level: entry.autonomy_level ?? 0,
        channels: entry.channels ?? [],
        created,
        previous_node_id,
        revoked: false,
        ledger_seq: recorded.seq
      });
    },
    did_revoke: async (body: z.infer<typeof didRevokeBody>, request: FastifyRequest) => {
      const who = await access.allow(request, 'arbitrator');
      const by = who.admin ? 'admin' : request.principal!.id;
      const entry = await registry.get(body.did);
      if (!entry || (entry.revoked_at ?? null) !== null || !(await registry.revoke(body.did, by)))
        throw new AppError('not_found', `no active DID ${body.did}`);
      const { entry: recorded } = await ledger.append({
        kind: 'event',
        key: 'hub.deploy.did_revoked',
        value: { did: body.did, node_id: entry.node_id ?? null, by },
        did: config.SERVICE_DID,
        truth_type: 'config'
      });
      return answer(200, {
        ok: true as const,
        action: body.action,
        did: body.did,
        node_id: entry.node_id ?? null,
        autonomy_level: entry.autonomy_level ?? 0,
        channels: entry.channels ?? [],
        created: false,
        revoked: true,
        ledger_seq: recorded.seq
      });
    }
  };
}
