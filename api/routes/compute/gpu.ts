/**
 * The GPU registry (capability `compute`):
 *   POST /v1/gpu/register   a node (X-External-Node + X-External-Key) declares one GPU record of its own: model,
 *                           memory, count, price, endpoint; the same `name` again updates it (201 new, 200 updated)
 *   GET  /v1/gpu/nodes      every record, public, with its owner node's state: a GPU is `available` only while its
 *                           node is online (the node lifecycle's judgement of presence), and unavailable when the node
 *                           is offline, pending review, rejected or gone
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { humanText, queryInt } from '../../../core/identifiers';
import { NODE_STATES } from '../../../core/federation/vocabulary';
import { GpuStore, MAX_GPUS_PER_NODE } from '../../../store/compute/gpu';
import type { NodeStore } from '../../../store/federation/nodes';
import type { PresenceStore } from '../../../store/federation/presence';
import { createGpuRegistry } from '../../../services/compute/gpu-registry';
import { ERROR_BODY } from '../../response-docs';

const GPU_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_GPU_COUNT = 1024;
const MAX_GPU_MEMORY_GB = 4096;
const MAX_PRICE = 1_000_000;

const registerBody = z
  .object({
    name: z
      .string()
      .regex(GPU_NAME, 'letters, digits, ".", "_" or "-", at most 64')
      .default('default')
      .describe('the record name within the node (default "default"); registering it again updates it'),
    model: humanText(120).describe('GPU model, e.g. "NVIDIA H100 80GB"'),
    memory_gb: z.number().positive().max(MAX_GPU_MEMORY_GB).describe('memory per GPU, in GB'),
    count: z.number().int().min(1).max(MAX_GPU_COUNT).describe('how many GPUs of this model the node offers'),
    price: z
      .object({
        amount: z.number().min(0).max(MAX_PRICE),
        currency: z.string().regex(/^[A-Z]{3}$/, 'an ISO 4217 code such as USD'),
        unit: z.literal('gpu_hour').default('gpu_hour')
      })
      .strict()
      .describe('price per GPU per hour'),
    endpoint: z
      .string()
      .max(2048)
      .regex(/^https?:\/\/[A-Za-z0-9.-]+(:[0-9]{1,5})?(\/[!-~]*)?$/, 'an http(s) URL')
      .describe('http(s) URL where the node serves work on these GPUs')
  })
  .strict();

const gpuRecord = z.object({
  gpu_id: z.string().describe('<node_id>/<name>'),
  node_id: z.string(),
  name: z.string(),
  model: z.string(),
  memory_gb: z.number(),
  count: z.number().int(),
  price: z.object({ amount: z.number(), currency: z.string(), unit: z.literal('gpu_hour') }),
  endpoint: z.string(),
  registered_at: z.string(),
  updated_at: z.string()
});
const listedGpu = gpuRecord.extend({
  node_state: z.enum(NODE_STATES).nullable().describe('the owner node state; null when the node no longer exists'),
  available: z.boolean().describe('true only while the owner node is online'),
  last_seen_at: z
    .string()
    .nullable()
    .describe('when the hub last heard a heartbeat of the owner node, within the presence window')
});
const registerResponse = z.object({
  ok: z.literal(true),
  gpu: gpuRecord,
  node_state: z.enum(NODE_STATES),
  available: z.boolean()
});
const listResponse = z.object({
  ok: z.literal(true),
  total: z.number().int(),
  available_total: z
    .number()
    .int()
    .describe('records whose node is online (among those matching the filters other than available)'),
  offset: z.number().int(),
  limit: z.number().int(),
  next_offset: z.number().int().nullable(),
  gpus: z.array(listedGpu)
});

export const gpuRoutes: FastifyPluginAsyncZod<{ gpus: GpuStore; nodes: NodeStore; presence: PresenceStore }> = async (
  app,
  deps
) => {
  const registry = createGpuRegistry(deps);
  app.post(
    '/v1/gpu/register',
    {
      config: {
        auth: 'external_node',
        directory: {
          group: 'federated_compute',
          summary: 'Register a GPU record of the calling node (model, memory, count, price, endpoint)',
          publicRead: false
        }
      },
      schema: {
        body: registerBody,
        response: {
          200: registerResponse.describe('Updated (the node already had a record of that name)'),
          201: registerResponse.describe('Registered'),
          409: ERROR_BODY.describe(`The node already holds ${MAX_GPUS_PER_NODE} GPU records`)
        }
      }
    },
    async (request, reply) => {
      const { created, answer } = await registry.register(request.principal!.id, request.body);
      return reply.code(created ? 201 : 200).send(answer);
    }
  );

  app.get(
    '/v1/gpu/nodes',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'federated_compute',
          summary: 'List GPU records with availability (unavailable when the owner node is not online)',
          publicRead: true
        }
      },
      schema: {
        querystring: z
          .object({
            available: z
              .enum(['true', 'false'])
              .optional()
              .describe('only available (true) or only unavailable (false) records'),
            model: humanText(120).optional(),
            node_id: z.string().max(64).optional(),
            limit: queryInt(1, 500).default(100),
            offset: queryInt(0, 1_000_000).default(0)
          })
          .strict(),
        response: { 200: listResponse }
      }
    },
    async (request) => registry.list(request.query)
  );
};
