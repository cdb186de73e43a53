/**
 * The local daemon's dispatch (loopback listener, `daemon` auth: the two factors are checked before anything is
 * admitted). POST /dispatch takes one task or a DAG (core/daemon/dag.ts), refuses a cycle, an unknown dependency or
 * a bad quote with 400 and a model outside the free-tier whitelist with 403 before anything starts, writes an
 * `admitted` audit line, and runs the DAG as the workflow daemon-dag/<dag_id>; it answers with the outcome, or at
 * once (202) with `wait: false`. GET /dags/<dag_id> and GET /tasks/<dag_id>~<id> read the state (own DAGs only).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { DAG_STATES, TASK_REF_PATTERN, TASK_STATES } from '../../../core/daemon/dag';
import { DAG_ID_PATTERN, dispatchBodySchema } from '../../../core/daemon/dispatch';
import { createDagDispatch, type DagDispatchDeps } from '../../../services/daemon/dispatch-dag';
import { ERROR_BODY } from '../../response-docs';
import { header } from '../../plugins/auth/principal';

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
  // A single-task dispatch also answers its task's result at the top level (docs/daemon.md#dispatch).
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

export const daemonDispatchRoutes: FastifyPluginAsyncZod<DagDispatchDeps> = async (app, deps) => {
  const dags = createDagDispatch(deps);

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
      const result = await dags.dispatch(request.principal!.id, header(request, 'x-order-root'), request.body);
      return 'accepted' in result ? reply.code(202).send(result.accepted) : reply.code(200).send(result.finished);
    }
  );

  app.get(
    '/dags/:dag_id',
    {
      config: { auth: 'daemon' },
      schema: {
        params: z.object({ dag_id: z.string().regex(DAG_ID_PATTERN) }),
        response: { 200: dagSchema.describe('The DAG and each task') }
      }
    },
    async (request) => dags.dagOf(request.params.dag_id, request.principal!.id)
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
    async (request) => dags.taskOf(request.params.task_id, request.principal!.id)
  );
};
