/**
 * did_register { did, node_id, autonomy_level, channels } and did_revoke { did }: the DID registry that decides who
 * may deploy (store/deploy/registry.ts), changed by an arbitrator or the admin token; every change is a ledger event.
 * did_register's node_id links the DID to that node (X-DID alone then authenticates as it); a DID links to one node,
 * so naming another node moves the link (relinking: the answer and the ledger event name the previous node).
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Config } from '../../../../core/config.node';
import { AppError } from '../../../../core/errors';
import { didSchema, usedDidSchema } from '../../../../core/identifiers';
import type { DidRegistryStore } from '../../../../store/deploy/registry';
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
  return {
    did_register: async (body: z.infer<typeof didRegisterBody>, request: FastifyRequest) => {
      const who = await access.allow(request, 'arbitrator');
      const by = who.admin ? 'admin' : request.principal!.id;
      // An arbitrator cannot make a DID more autonomous than itself.
      if (!who.admin && body.autonomy_level > (who.entry?.autonomy_level ?? 0)) {
        throw new AppError(
          'forbidden',
          `an arbitrator of level ${who.entry?.autonomy_level ?? 0} cannot grant level ${body.autonomy_level}`
        );
      }
      const { entry, created, previous_node_id } = await registry.register({
        did: body.did,
        node_id: body.node_id,
        public_key: body.public_key ?? null,
        autonomy_level: body.autonomy_level,
        channels: body.channels,
        by
      });
      const { entry: recorded } = await ledger.append({
        kind: 'event',
        key: 'hub.deploy.did_registered',
        value: {
          did: body.did,
          node_id: body.node_id,
          public_key: body.public_key ?? null,
          autonomy_level: body.autonomy_level,
          channels: body.channels,
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
      if (!entry || entry.revoked_at !== null || !(await registry.revoke(body.did, by)))
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
