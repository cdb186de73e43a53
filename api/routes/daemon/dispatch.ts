/**
 * The local daemon's dispatch (loopback listener, `daemon` auth: the two factors are checked before anything is
 * admitted). POST /dispatch takes one task or a DAG (core/daemon/dag.ts), refuses a cycle, an unknown dependency or
 * a bad quote with 400 and a model outside the free-tier whitelist with 403 before anything starts, writes an
 * `admitted` audit line, and runs the DAG as the workflow daemon-dag/<dag_id>; it answers with the outcome, or at
 * once (202) with `wait: false`. GET /dags/<dag_id> and GET /tasks/<dag_id>~<id> read the state (own DAGs only).
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import type { ProviderCatalog } from '../../../core/chat/providers';
import { auditChainFor, sha256Hex } from '../../../core/daemon/audit.node';
import { DAG_STATES, TASK_REF_PATTERN, TASK_STATES, validateDag } from '../../../core/daemon/dag';
import { DAG_ID_PATTERN, dispatchBodySchema } from '../../../core/daemon/dispatch';
import { daemonModelWhitelist, modelRefusal } from '../../../core/daemon/models';
import { canonicalJson } from '../../../core/ledger/canonical-json';
import { AppError, notFound } from '../../../core/errors';
import { orderRootFacts } from '../../../store/daemon/assets';
import { ensureBreaker, readDag, startDag, waitDag } from '../../../workflows/daemon/dag.client';
import type { DagView } from '../../../contracts/daemon/dag.contract';
import { ERROR_BODY } from '../../response-docs';
import { header } from '../../plugins/auth/principal';

/** How long POST /dispatch waits for the outcome before answering 202 (the DAG goes on). */
const DISPATCH_WAIT_MS = 120_000;

const usage = z.object({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int()
});
export const taskResultSchema = z.object({
  task_id: z.string().describe('global id: <dag_id>~<id> (GET /tasks/<task_id>)'),
  id: z.string().describe('the id given in the DAG'),
  model: z.string(),
  depends_on: z.array(z.string()),
  status: z
    .enum(TASK_STATES)
    .describe(
      'queued, running, paused (breaker open), DONE, failed, skipped (a dependency did not finish DONE), rejected (identity check failed before the call)'
    ),
  output: z.string().nullable().describe('the produced text'),
  output_sha256: z.string().nullable().describe('output ownership: SHA-256 (hex) of the produced text'),
  usage: usage.nullable(),
  cost: z.number().nullable().describe('from the model price table (per 1,000 tokens)'),
  audit_root: z.string().nullable().describe("audit chain root (SHA-256 hex) after this task's audit line"),
  error: z.string().nullable(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable()
});
const dagSchema = z.object({
  ok: z.literal(true),
  dag_id: z.string(),
  workflow_id: z.string(),
  asset_id: z.string(),
  status: z
    .enum(DAG_STATES)
    .describe('running, DONE (every task DONE), failed, rejected (some task failed its identity check)'),
  tasks: z.array(taskResultSchema),
  audit_root: z.string().nullable(),
  submitted_at: z.string(),
  finished_at: z.string().nullable(),
  ledger_seq: z.number().int().nullable().describe('the ledger entry hub.daemon.dag_finished mirroring the audit root'),
  status_url: z.string(),
  // A single-task dispatch also answers its task's result at the top level (SPEC §2.9).
  task_id: z.string().optional().describe('single task only: as in tasks[0]'),
  output: z.string().nullable().optional().describe('single task only'),
  output_sha256: z.string().nullable().optional().describe('single task only: SHA-256 of the produced text'),
  usage: usage.nullable().optional().describe('single task only'),
  cost: z.number().nullable().optional().describe('single task only')
});
const acceptedSchema = z.object({
  ok: z.literal(true),
  dag_id: z.string(),
  workflow_id: z.string(),
  status: z.enum(['queued', 'running']),
  status_url: z.string().describe('GET it for the state (same two factors)'),
  audit_root: z.string()
});

export const daemonDispatchRoutes: FastifyPluginAsyncZod<{
  config: Config;
  temporal: Client;
  catalog: ProviderCatalog;
}> = async (app, { config, temporal, catalog }) => {
  const whitelist = daemonModelWhitelist(catalog, config.DAEMON_MODEL_WHITELIST);
  const chain = auditChainFor(config.dataDir);
  const coreQueue = config.TEMPORAL_TASK_QUEUE;
  const withUrl = (v: DagView) => ({ ok: true as const, ...v, status_url: `/dags/${v.dag_id}` });

  app.post(
    '/dispatch',
    {
      config: { auth: 'daemon' },
      schema: {
        body: dispatchBodySchema,
        response: {
          200: dagSchema.describe('The DAG finished (status DONE, failed or rejected)'),
          202: acceptedSchema.describe('wait: false, or not finished within 120 s: the DAG runs on'),
          400: ERROR_BODY.describe(
            'Invalid body, a cycle, an unknown dependency, a duplicate id, or a quote of a task that is not a dependency'
          ),
          403: ERROR_BODY.describe(
            'identity_check_failed (the asset is isolated), or forbidden: a model not on the free-tier whitelist'
          ),
          409: ERROR_BODY.describe('dag_id used already')
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      const assetId = request.principal!.id;
      const dag = validateDag(body);
      if ('problems' in dag)
        throw new AppError('invalid_request', `The DAG cannot run: ${dag.problems.map((p) => p.message).join('; ')}`, {
          fields: dag.problems
        });
      const dagId = body.dag_id ?? `dag_${randomBytes(8).toString('hex')}`;
      for (const t of dag.tasks) {
        const refusal = modelRefusal(catalog, whitelist, t.model);
        if (refusal) {
          await chain.append({
            event: 'rejected',
            stage: 'whitelist',
            asset_id: assetId,
            dag_id: dagId,
            task_id: t.id,
            model: t.model,
            reason: refusal
          });
          throw new AppError('forbidden', refusal, { model: t.model });
        }
      }
      const root = orderRootFacts(header(request, 'x-order-root'));
      const breakerId = await ensureBreaker(temporal, coreQueue, {
        threshold: config.DAEMON_BREAKER_THRESHOLD,
        cooldown_ms: config.DAEMON_BREAKER_COOLDOWN_S * 1000
      });
      const head = await chain.append({
        event: 'admitted',
        asset_id: assetId,
        dag_id: dagId,
        tasks: dag.order.join(','),
        dag_sha256: sha256Hex(canonicalJson(dag.tasks))
      });
      const workflowId = await startDag(temporal, coreQueue, {
        version: 1,
        dag_id: dagId,
        asset_id: assetId,
        order_root_sha256: root.hash!,
        order_root_version: root.version,
        tasks: dag.tasks,
        order: dag.order,
        max_parallel: config.DAEMON_MAX_PARALLEL,
        call_timeout_s: config.DAEMON_CALL_TIMEOUT_S,
        breaker_workflow_id: breakerId,
        hub_did: config.SERVICE_DID,
        submitted_at: new Date().toISOString()
      });
      const accepted = (status: 'queued' | 'running') =>
        reply.code(202).send({
          ok: true as const,
          dag_id: dagId,
          workflow_id: workflowId,
          status,
          status_url: `/dags/${dagId}`,
          audit_root: head.hash
        });
      if (!body.wait) return accepted('queued');
      const outcome = await waitDag(temporal, dagId, DISPATCH_WAIT_MS);
      if (!outcome) return accepted('running');
      const single = 'tasks' in body ? null : outcome.tasks[0]!;
      const top = single
        ? {
            task_id: single.task_id,
            output: single.output,
            output_sha256: single.output_sha256,
            usage: single.usage,
            cost: single.cost
          }
        : {};
      return reply.code(200).send({ ...withUrl(outcome), ...top });
    }
  );

  const own = async (dagId: string, assetId: string): Promise<DagView> => {
    const view = await readDag(temporal, dagId);
    if (!view || view.asset_id !== assetId) throw notFound(`No DAG ${dagId} dispatched by this asset`);
    return view;
  };

  app.get(
    '/dags/:dag_id',
    {
      config: { auth: 'daemon' },
      schema: {
        params: z.object({ dag_id: z.string().regex(DAG_ID_PATTERN) }),
        response: { 200: dagSchema.describe('The DAG and each task') }
      }
    },
    async (request) => withUrl(await own(request.params.dag_id, request.principal!.id))
  );

  app.get(
    '/tasks/:task_id',
    {
      config: { auth: 'daemon' },
      schema: {
        params: z.object({ task_id: z.string().regex(TASK_REF_PATTERN, '<dag_id>~<task id>') }),
        response: { 200: taskResultSchema.extend({ ok: z.literal(true), dag_id: z.string() }).describe('One task') }
      }
    },
    async (request) => {
      const [, dagId, id] = TASK_REF_PATTERN.exec(request.params.task_id)!;
      const view = await own(dagId!, request.principal!.id);
      const task = view.tasks.find((t) => t.id === id);
      if (!task) throw notFound(`No task ${id} in DAG ${dagId}`);
      return { ok: true as const, dag_id: view.dag_id, ...task };
    }
  );
};
