/**
 * POST /a2a/register (no auth): a node joins the federation.
 * 201 { node_id, api_key (shown once; only its digest is stored), state, workflow_id, heartbeat, endpoints }.
 * The node id takes the next hub-wide sequence number; the unique seq index is what guarantees no two nodes share
 * one (see NodeStore.insertWithNextSequence), so concurrent registrations never collide. A number lost to another
 * API process is retried with the next one inside the store; a registration that cannot get one answers 503.
 * The node document is stored first, then node/<node_id> is started; if Temporal cannot be reached the document is
 * removed again and the answer is 503 (nothing half-registered).
 */
import { FastifyInstance } from 'fastify';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import { hashSecret, newSecret } from '../../../core/credentials.node';
import { AppError } from '../../../core/errors';
import { formatNodeId, RegistrationBody, registrationBody } from '../../../core/federation/vocabulary';
import type { nodeLifecycleWorkflow } from '../../../workflows/federation/node-lifecycle';
import { NodeLifecycleInput, nodeWorkflowId } from '../../../workflows/federation/node-lifecycle.contract';
import { BrandAttr, NodeIdAttr, NodeStateAttr } from '../../../core/search-attributes';
import type { ServiceContext } from '../../context';
import { startWorkflowWithRetry } from '../../../workflows/client-support';
import { NodeDocument } from '../../../store/federation/nodes';

const MAX_ID_SKIPS = 1000;

export async function registerRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  const { config } = ctx;

  app.post(
    '/a2a/register',
    { config: { auth: 'none', directory: { group: 'a2a_standard', summary: 'Node self-registration: returns node_id, api_key (once) and the endpoint directory' } }, schema: { body: registrationBody } },
    async (request, reply) => {
      const body = request.body as RegistrationBody;
      const apiKey = newSecret('nk_');
      const now = new Date().toISOString();
      const initialState = config.NODE_REVIEW_REQUIRED ? 'pending_review' : 'offline';
      // A node id whose workflow already exists in Temporal (the database was reset while Temporal kept its
      // histories) is skipped: the node document is removed and the next number taken.
      let nodeId = '';
      for (let attempt = 1; !nodeId; attempt++) {
        const doc = await ctx.nodes.insertWithNextSequence((sequence): NodeDocument => ({
          _id: formatNodeId(body.brand.code, sequence),
          seq: sequence,
          name: body.name,
          brand: { code: body.brand.code, model_base: body.brand.model_base ?? null },
          instance: { os: body.instance?.os ?? null, cpu: body.instance?.cpu ?? null, memory_gb: body.instance?.memory_gb ?? null, gpu: body.instance?.gpu ?? null },
          capabilities: body.capabilities?.declared ?? [],
          api_key_hash: hashSecret(apiKey),
          state: initialState,
          created_at: now,
          state_changed_at: now,
          review: null
        })).catch((err: unknown) => {
          // Left only if other API processes took this registration's number MAX_SEQUENCE_ATTEMPTS times in a row.
          if ((err as { code?: number }).code === 11000) {
            throw new AppError('unavailable', 'Too many concurrent registrations; nothing was kept, please retry', {}, { 'Retry-After': '1' });
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
          await startWorkflowWithRetry<typeof nodeLifecycleWorkflow>(ctx.temporal, 'nodeLifecycleWorkflow', {
            workflowId: nodeWorkflowId(doc._id),
            taskQueue: config.TEMPORAL_TASK_QUEUE,
            args: [input],
            workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
            typedSearchAttributes: [
              { key: NodeIdAttr, value: doc._id },
              { key: BrandAttr, value: body.brand.code },
              { key: NodeStateAttr, value: initialState }
            ],
            memo: { name: body.name, registered_at: now }
          });
          nodeId = doc._id;
        } catch (err) {
          await ctx.nodes.delete(doc._id).catch(() => undefined);
          if (err instanceof WorkflowExecutionAlreadyStartedError && attempt < MAX_ID_SKIPS) continue;
          request.log.error({ err, nodeId: doc._id }, 'node workflow could not be started; registration undone');
          throw new AppError('unavailable', 'Registration could not be completed (workflow service unavailable); nothing was kept, please retry');
        }
      }

      const base = config.publicUrl;
      return reply.code(201).send({
        ok: true,
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
          entries: ctx.directory.entries().map((e) => ({ method: e.method, path: e.path, group: e.group, auth: e.auth, url: `${e.listener === 'hub' ? config.hubPublicUrl : base}${e.path}` }))
        }
      });
    }
  );
}
