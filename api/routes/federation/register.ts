/**
 * POST /a2a/register (no auth): a node joins the federation.
 * 201 { node_id, api_key (shown once; only its digest is stored), state, workflow_id, heartbeat, endpoints }.
 * The node id takes the next hub-wide sequence number; the unique seq index is what guarantees no two nodes share
 * one (see NodeStore.insertWithNextSequence), so concurrent registrations never collide. A number lost to another
 * API process is retried with the next one inside the store; a registration that cannot get one answers 503.
 * The node document is stored first, then node/<node_id> is started; if Temporal cannot be reached the document is
 * removed again and the answer is 503 (nothing half-registered).
 */
import { Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { hashSecret, newSecret } from '../../../core/credentials.node';
import { AppError } from '../../../core/errors';
import { formatNodeId, registrationBody } from '../../../core/federation/vocabulary';
import { startNodeLifecycle } from '../../../workflows/federation/node-lifecycle.client';
import { NodeLifecycleInput, nodeWorkflowId } from '../../../contracts/federation/node-lifecycle.contract';
import type { NodeDocument, NodeStore } from '../../../store/federation/nodes';
import type { EndpointDirectory } from '../../directory';
import { isDuplicateKey } from '../../../store/mongo';

const registeredResponse = z
  .object({
    ok: z.literal(true),
    node_id: z.string(),
    api_key: z.string().describe('shown once; only its digest is stored'),
    state: z.enum(['pending_review', 'offline']),
    workflow_id: z.string(),
    message: z.string(),
    heartbeat: z.object({
      url: z.string(),
      headers: z.record(z.string(), z.string()),
      offline_after_s: z.number().int(),
      recommended_interval_s: z.number().int()
    }),
    endpoints: z.object({
      full_directory_url: z.string(),
      summary_url: z.string(),
      agent_card_url: z.string(),
      entries: z.array(
        z.object({ method: z.string(), path: z.string(), group: z.string(), auth: z.string(), url: z.string() })
      )
    })
  })
  .describe('Registered');

const MAX_ID_SKIPS = 1000;

export const registerRoutes: FastifyPluginAsyncZod<{
  nodes: NodeStore;
  temporal: Client;
  directory: EndpointDirectory;
  config: Config;
}> = async (app, deps) => {
  const { nodes, temporal, directory, config } = deps;

  app.post(
    '/a2a/register',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'a2a_standard',
          summary: 'Node self-registration: returns node_id, api_key (once) and the endpoint directory'
        },
        // Anonymous and creates state: limited per client address (429 rate_limited with Retry-After).
        rateLimit: { max: config.REGISTER_RATE_LIMIT_PER_MIN, timeWindow: 60_000 }
      },
      schema: { body: registrationBody, response: { 201: registeredResponse } }
    },
    async (request, reply) => {
      const body = request.body;
      const apiKey = newSecret('nk_');
      const now = new Date().toISOString();
      const initialState = config.NODE_REVIEW_REQUIRED ? 'pending_review' : 'offline';
      // A node id whose workflow already exists in Temporal (the database was reset while Temporal kept its
      // histories) is skipped: the node document is removed and the next number taken.
      let nodeId = '';
      for (let attempt = 1; !nodeId; attempt++) {
        const doc = await nodes
          .insertWithNextSequence((sequence): NodeDocument => ({
            _id: formatNodeId(body.brand.code, sequence),
            seq: sequence,
            name: body.name,
            brand: { code: body.brand.code, model_base: body.brand.model_base ?? null },
            instance: {
              os: body.instance?.os ?? null,
              cpu: body.instance?.cpu ?? null,
              memory_gb: body.instance?.memory_gb ?? null,
              gpu: body.instance?.gpu ?? null
            },
            capabilities: body.capabilities?.declared ?? [],
            api_key_hash: hashSecret(apiKey),
            state: initialState,
            created_at: now,
            state_changed_at: now,
            review: null
          }))
          .catch((err: unknown) => {
            // Left only if other API processes took this registration's number MAX_SEQUENCE_ATTEMPTS times in a row.
            if (isDuplicateKey(err)) {
              throw new AppError(
                'unavailable',
                'Too many concurrent registrations; nothing was kept, please retry',
                {},
                { 'Retry-After': '1' }
              );
            }
            throw err;
          });
        const input: NodeLifecycleInput = {
          version: 1,
          node_id: doc._id,
          brand: body.brand.code,
          registered_at: now,
          offline_after_s: config.NODE_OFFLINE_AFTER_S,
          review_required: config.NODE_REVIEW_REQUIRED,
          offline_recheck_ms: config.NODE_CACHE_TTL_MS + 1000,
          history_limit: config.NODE_WORKFLOW_HISTORY_LIMIT,
          hub_did: config.SERVICE_DID
        };
        try {
          await startNodeLifecycle(
            temporal,
            config.TEMPORAL_TASK_QUEUE,
            input,
            { name: body.name, registered_at: now },
            initialState
          );
          nodeId = doc._id;
        } catch (err) {
          // Nothing half-registered: without its workflow the node could never be reviewed or go online.
          const removed = nodes.abandon([doc], (e) =>
            request.log.error(
              { err: e, nodeId: doc._id },
              'a node whose workflow could not be started could not be removed'
            )
          );
          if (err instanceof WorkflowExecutionAlreadyStartedError && attempt < MAX_ID_SKIPS) {
            // The skipped number's document is gone before the answer (the database answers: it just took the
            // insert), so a caller counting nodes after it never sees two for one registration. (Temporal being
            // unreachable, below, is answered at once, the removal retrying behind.)
            await removed;
            continue;
          }
          request.log.error({ err, nodeId: doc._id }, 'node workflow could not be started; registration undone');
          throw err;
        }
      }

      const base = config.publicUrl;
      return reply.code(201).send({
        ok: true as const,
        node_id: nodeId,
        api_key: apiKey,
        state: initialState,
        workflow_id: nodeWorkflowId(nodeId),
        message: config.NODE_REVIEW_REQUIRED
          ? 'registered; keep the api_key (it is shown only once), send heartbeats, and wait for review'
          : 'registered; keep the api_key (it is shown only once) and send heartbeats',
        heartbeat: {
          url: `${base}/a2a/heartbeat`,
          headers: { 'X-External-Node': nodeId, 'X-External-Key': '<api_key>' },
          offline_after_s: config.NODE_OFFLINE_AFTER_S,
          recommended_interval_s: Math.max(1, Math.floor(config.NODE_OFFLINE_AFTER_S / 3))
        },
        endpoints: {
          full_directory_url: `${base}/a2a/endpoints`,
          summary_url: `${base}/a2a/endpoints/summary`,
          agent_card_url: `${base}/a2a/.well-known/agent.json`,
          entries: directory.entries().map((e) => ({
            method: e.method,
            path: e.path,
            group: e.group,
            auth: e.auth,
            url: `${e.listener === 'hub' ? config.hubPublicUrl : base}${e.path}`
          }))
        }
      });
    }
  );
};
