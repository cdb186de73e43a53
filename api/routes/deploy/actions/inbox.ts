/**
 * inbox_push { key, value, node_id } and inbox_ack { id }: work orders for a node. A push starts the
 * work-order/<id> workflow, which holds the order for the high-risk approval and only then queues it at
 * GET /api/instructions/<node_id>; the node it is for acknowledges it once.
 */
import { assertFitsEntryBundle } from '../../../../core/tlog/tiles';
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Config } from '../../../../core/config.node';
import { AppError } from '../../../../core/errors';
import { canonicalJson } from '../../../../core/ledger/canonical-json';
import { SEED_KEY_PREFIX } from '../../../../core/ledger/truth-record';
import type { DidRegistryStore } from '../../../../store/deploy/registry';
import type { WorkOrderStore } from '../../../../store/deploy/work-orders';
import type { Ledger } from '../../../../store/ledger/ledger';
import { startWorkOrder } from '../../../../workflows/deploy/work-order.client';
import type { DeployAccess } from '../access';
import { answer } from './action';

const nodeId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/);
export const inboxPushBody = z
  .object({
    action: z.literal('inbox_push'),
    key: z
      .string()
      .max(256)
      .regex(/^KERNEL\.EVOLUTION\.DIRECTIVE\.[A-Za-z0-9_:+-]+(\.[A-Za-z0-9_:+-]+)*$/)
      .describe(`an execution-seed key: ${SEED_KEY_PREFIX}<name>`),
    value: z
      .object({ directive_action: z.string().min(1).max(200) })
      .passthrough()
      .describe('the work order: directive_action and any other members'),
    node_id: nodeId.describe('the node whose queue (GET /api/instructions/<node_id>) receives the order once approved')
  })
  .strict();
export const inboxAckBody = z
  .object({
    action: z.literal('inbox_ack'),
    id: z
      .string()
      .regex(/^wo_[0-9a-f]{24}$/)
      .describe('the instruction_id')
  })
  .strict();
export const inboxPushAnswer = z.object({
  ok: z.literal(true),
  action: z.literal('inbox_push'),
  pending: z.literal(true),
  instruction_id: z.string(),
  approval_id: z.string(),
  node_id: z.string(),
  workflow_id: z.string(),
  approval_workflow_id: z.string(),
  status_url: z.string().describe('the approval: GET it; approvers decide it there like any held write'),
  message: z.string()
});
export const inboxAckAnswer = z.object({
  ok: z.literal(true),
  action: z.literal('inbox_ack'),
  instruction_id: z.string(),
  node_id: z.string(),
  acked_at: z.string(),
  already_acked: z.boolean(),
  ledger_seq: z.number().int().nullable()
});

export function createInboxActions(deps: {
  temporal: Client;
  orders: WorkOrderStore;
  registry: Pick<DidRegistryStore, 'get'>;
  ledger: Pick<Ledger, 'append'>;
  config: Pick<
    Config,
    'TEMPORAL_TASK_QUEUE' | 'TRUTH_MAX_VALUE_BYTES' | 'TRUTH_APPROVAL_TIMEOUT_S' | 'SERVICE_DID' | 'publicUrl'
  >;
  access: DeployAccess;
}) {
  const { temporal, orders, registry, ledger, config, access } = deps;
  return {
    inbox_push: async (body: z.infer<typeof inboxPushBody>, request: FastifyRequest) => {
      await access.allow(request, 'deploy');
      const valueJson = canonicalJson(body.value);
      if (Buffer.byteLength(valueJson) > config.TRUTH_MAX_VALUE_BYTES)
        throw new AppError(
          'payload_too_large',
          `value is ${Buffer.byteLength(valueJson)} bytes as canonical JSON; the limit is ${config.TRUTH_MAX_VALUE_BYTES}`
        );
      assertFitsEntryBundle({ kind: 'truth', key: body.key, truth_type: null, did: request.principal!.id }, valueJson);
      const hex = randomBytes(12).toString('hex');
      const instructionId = `wo_${hex}`;
      const approvalId = `apr_${randomBytes(12).toString('hex')}`;
      const started = await startWorkOrder(temporal, config.TEMPORAL_TASK_QUEUE, {
        version: 1,
        instruction_id: instructionId,
        node_id: body.node_id,
        approval: {
          version: 1,
          approval_id: approvalId,
          truth: {
            key: body.key,
            value_json: valueJson,
            truth_type: null,
            did: request.principal!.id,
            idempotency_key: `work-order:${instructionId}`
          },
          held_because: `key prefix ${SEED_KEY_PREFIX} (work order for node ${body.node_id})`,
          requested_at: new Date().toISOString(),
          timeout_seconds: config.TRUTH_APPROVAL_TIMEOUT_S,
          hub_did: config.SERVICE_DID
        },
        hub_did: config.SERVICE_DID,
        actor: request.principal!.id
      });
      return answer(202, {
        ok: true as const,
        action: body.action,
        pending: true as const,
        instruction_id: instructionId,
        approval_id: approvalId,
        node_id: body.node_id,
        ...started,
        status_url: `${config.publicUrl}/api/truth/approvals/${approvalId}`,
        message: `held for approval (${approvalId}); once approved it is queued at GET /api/instructions/${body.node_id}`
      });
    },
    inbox_ack: async (body: z.infer<typeof inboxAckBody>, request: FastifyRequest) => {
      // Only the node the order is for (its DID's registry node_id), or the admin token.
      const order = await orders.get(body.id);
      if (!order)
        throw new AppError('not_found', `no work order ${body.id} in any queue (not approved yet, or unknown)`);
      const admin = access.isAdmin(request);
      const entry = await registry.get(request.principal!.id);
      if (!admin && entry?.node_id !== order.node_id)
        throw new AppError(
          'forbidden',
          `work order ${body.id} is for node ${order.node_id}; ${request.principal!.id} is not that node's DID`
        );
      const { order: after, acked } = await orders.ack(body.id, request.principal!.id);
      let seq: number | null = null;
      if (acked) {
        const { entry: recorded } = await ledger.append({
          kind: 'event',
          key: 'hub.deploy.inbox_acked',
          value: {
            instruction_id: body.id,
            node_id: order.node_id,
            key: order.key,
            by: request.principal!.id,
            acked_at: after!.acked_at
          },
          did: config.SERVICE_DID,
          truth_type: null
        });
        seq = recorded.seq;
      }
      return answer(200, {
        ok: true as const,
        action: body.action,
        instruction_id: body.id,
        node_id: order.node_id,
        acked_at: after!.acked_at!,
        already_acked: !acked,
        ledger_seq: seq
      });
    }
  };
}
