/**
 * Work distribution: worker nodes pull tasks from the federation's queue (store/federation/tasks.ts).
 * Internal routes (docs/a2a.md#work-distribution-capability-federation-claims-leases-the-a2a-binding): not in the
 * endpoint directory, so the a2a_standard count stays as documented (docs/endpoints.md).
 * Every route authenticates the node (model external_node): with its own key (X-External-Node + X-External-Key from
 * POST /a2a/register), or with X-DID alone, the seed's "DID single header", of a DID linked to the node (the
 * registration's did, or did_register; api/plugins/auth/external-node.ts).
 *   POST /api/task/assign                claim up to max_tasks queued tasks whose required capabilities the node
 *                                        declared, each under a lease of TASK_LEASE_S; only an online node may claim
 *                                        (pending_review, offline and rejected get 403); a claim also makes sure
 *                                        the task-leases sweeper runs (in the background, at most every 10 min)
 *   POST /api/task/:task_id/progress     extend the lease (and record a note); { canceled: true } once the
 *                                        submitter canceled it, and the node should stop
 *   POST /api/task/:task_id/complete     the result (any JSON object), A2A artifacts, or a Message as the answer:
 *                                        the task is done
 *   POST /api/task/:task_id/fail         the reason: the task failed (no retry; a lapsed lease is what retries)
 *   POST /api/task/:task_id/input-required  ask the submitter for more (a question, or none): the task waits, with
 *                                        no lease, until the submitter answers; the node's next claim hands it back
 *   POST /api/task/:task_id/artifact     an A2A artifact (or a chunk of one) while working; extends the lease
 *   GET  /api/nodes                      the online nodes (id, name, brand, capabilities, last seen), for nodes and
 *                                        arbitrators (any registered X-DID, a node's credentials, or homologous)
 * The use cases are services/federation/work-distribution.ts.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Client } from '@temporalio/client';
import { z } from 'zod';
import { ERROR_BODY } from '../../response-docs';
import type { A2aConfig, TemporalConfig } from '../../../core/config.node';
import { humanText, queryInt } from '../../../core/identifiers';
import { BRAND_CODES } from '../../../core/federation/vocabulary';
import type { NodeStore } from '../../../store/federation/nodes';
import type { PresenceStore } from '../../../store/federation/presence';
import type { TaskStore } from '../../../store/federation/tasks';
import { createWorkDistribution } from '../../../services/federation/work-distribution';
import { a2aPart } from '../discovery/a2a-binding.schema';
import { taskIdSchema, taskSchema } from './task.schema';

/** Progress, complete and fail are refused when the caller no longer holds the task's claim. */
const NOT_HOLDER = ERROR_BODY.describe(
  'This node does not hold the claim (its lease lapsed, or another node holds it), or the task is final'
);

const taskParams = z.object({ task_id: taskIdSchema });
const assignBody = z
  .object({ max_tasks: z.number().int().min(1).max(50).default(1).describe('claim at most this many tasks (1 to 50)') })
  .strict();
const assignResponse = z.object({
  ok: z.literal(true),
  node_id: z.string(),
  lease_s: z.number().int(),
  tasks: z.array(taskSchema).describe('claimed by this node until lease_expires_at; empty when nothing matches')
});
const progressBody = z
  .object({ note: humanText(500).optional().describe('what the node is doing, shown to the submitter') })
  .strict();
const progressResponse = z.object({
  ok: z.literal(true),
  canceled: z.boolean().describe('true: the submitter canceled the task; stop working on it'),
  task: taskSchema
});
/** A Message a node sends: A2A Parts (text, raw base64, url or data, with mediaType and filename) and metadata. */
const nodeMessage = z
  .object({
    parts: z.array(a2aPart).min(1).max(100),
    metadata: z.record(z.string(), z.unknown()).optional()
  })
  .strict();
/** An A2A Artifact, in A2A's JSON names, as the submitter will see it. */
const artifact = z
  .object({
    artifactId: z.string().min(1).max(200),
    name: z.string().max(200).optional(),
    description: z.string().max(2000).optional(),
    parts: z.array(a2aPart).min(1).max(100),
    metadata: z.record(z.string(), z.unknown()).optional(),
    extensions: z.array(z.string().max(2000)).max(100).optional()
  })
  .strict();
const completeBody = z
  .object({
    result: z.record(z.string(), z.unknown()).optional().describe('the result, any JSON object'),
    artifacts: z.array(artifact).max(50).optional().describe('A2A artifacts, shown to the submitter before the result'),
    message: nodeMessage.optional().describe("the answer as a Message (A2A's direct reply) rather than a task result")
  })
  .strict()
  .refine((b) => b.result !== undefined || b.artifacts !== undefined || b.message !== undefined, {
    message: 'send a result, artifacts or a message'
  })
  .meta({ anyOf: ['result', 'artifacts', 'message'].map((member) => ({ required: [member] })) });
const inputRequiredBody = z
  .object({ message: nodeMessage.optional().describe('the question for the submitter') })
  .strict();
const artifactBody = z
  .object({
    artifact,
    append: z.boolean().default(false).describe('true: the parts extend the artifact of the same artifactId'),
    last_chunk: z.boolean().default(true).describe('false: more chunks of this artifact follow')
  })
  .strict();
const failBody = z.object({ reason: humanText(1000) }).strict();
const finishResponse = z.object({ ok: z.literal(true), task: taskSchema });

const onlineNode = z.object({
  node_id: z.string(),
  name: z.string(),
  brand: z.object({ code: z.enum(BRAND_CODES), model_base: z.string().nullable() }),
  capabilities: z.array(z.string()),
  last_seen_at: z.string().nullable().describe('the last heartbeat within the presence window')
});
const nodesResponse = z.object({
  ok: z.literal(true),
  total: z.number().int(),
  offset: z.number().int(),
  limit: z.number().int(),
  nodes: z.array(onlineNode)
});

type Deps = {
  tasks: TaskStore;
  nodes: NodeStore;
  presence: PresenceStore;
  temporal: Client;
  config: Pick<A2aConfig, 'TASK_LEASE_S' | 'TASK_MAX_ATTEMPTS'> & Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'>;
};

export const workDistributionRoutes: FastifyPluginAsyncZod<Deps> = async (app, deps) => {
  const work = createWorkDistribution(deps, (err) =>
    app.log.warn(
      { err: err instanceof Error ? err.message : String(err) },
      'task-leases sweeper not started yet (lapsed leases are still swept at every read); retrying at the next claim'
    )
  );
  const nodeAuth = { auth: 'external_node' as const };

  app.post(
    '/api/task/assign',
    {
      config: nodeAuth,
      schema: {
        summary: 'Worker nodes claim queued tasks matching their capabilities, under a lease',
        body: assignBody,
        response: { 200: assignResponse }
      }
    },
    async (request) => work.claim(request.principal!.id, request.body.max_tasks)
  );

  app.post(
    '/api/task/:task_id/progress',
    {
      config: nodeAuth,
      schema: {
        summary: 'A claiming node reports progress and extends its lease',
        params: taskParams,
        body: progressBody,
        response: { 200: progressResponse, 409: NOT_HOLDER }
      }
    },
    async (request) => work.progress(request.params.task_id, request.principal!.id, request.body.note ?? null)
  );

  app.post(
    '/api/task/:task_id/complete',
    {
      config: nodeAuth,
      schema: {
        summary: 'A claiming node reports its result: the task is done',
        params: taskParams,
        body: completeBody,
        response: { 200: finishResponse, 409: NOT_HOLDER }
      }
    },
    async (request) => work.complete(request.params.task_id, request.principal!.id, request.body)
  );

  app.post(
    '/api/task/:task_id/input-required',
    {
      config: nodeAuth,
      schema: {
        summary: 'A claiming node asks the submitter for more input; the task waits for the answer',
        params: taskParams,
        body: inputRequiredBody,
        response: { 200: finishResponse, 409: NOT_HOLDER }
      }
    },
    async (request) => work.requireInput(request.params.task_id, request.principal!.id, request.body.message ?? null)
  );

  app.post(
    '/api/task/:task_id/artifact',
    {
      config: nodeAuth,
      schema: {
        summary: 'A claiming node sends an artifact (or a chunk of one) while working; extends its lease',
        params: taskParams,
        body: artifactBody,
        response: { 200: finishResponse, 409: NOT_HOLDER }
      }
    },
    async (request) => work.addArtifact(request.params.task_id, request.principal!.id, request.body)
  );

  app.post(
    '/api/task/:task_id/fail',
    {
      config: nodeAuth,
      schema: {
        summary: 'A claiming node reports failure with a reason',
        params: taskParams,
        body: failBody,
        response: { 200: finishResponse, 409: NOT_HOLDER }
      }
    },
    async (request) => work.fail(request.params.task_id, request.principal!.id, request.body.reason)
  );

  app.get(
    '/api/nodes',
    {
      // Any registered DID reads the list (X-DID alone, linked to a node or not), as do nodes and homologous systems.
      config: { auth: 'did', authAlso: ['node_or_homologous'] },
      schema: {
        summary: 'The online nodes: id, name, brand, capabilities, last seen',
        querystring: z.object({ limit: queryInt(1, 500).default(100), offset: queryInt(0, 1_000_000).default(0) }),
        response: { 200: nodesResponse }
      }
    },
    async (request) => work.onlineNodes(request.query.limit, request.query.offset)
  );
};
