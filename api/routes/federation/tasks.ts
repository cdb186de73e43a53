/**
 * Tasks for worker nodes.
 *   POST /a2a/task        (hub listener, HUB_PORT; node or homologous auth) queue a task: { type, payload,
 *                         required_capabilities, priority }; answers 200 { task_id, state: "queued" }. With an
 *                         Idempotency-Key a retry returns the first task instead of queuing a second one.
 *   GET  /a2a/task/:id    (hub listener, same auth) the task record
 *   GET  /a2a/queue/stats (main listener, public) depth (queued), in flight (claimed), done, failed
 * Worker nodes claim queued tasks with POST /api/task/assign (./work.ts); A2A clients send them as messages (../discovery/a2a-binding.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { RawJson, rawJsonSchema } from '../../../core/raw-json';
import { canonicalJson, JsonValue } from '../../../core/ledger/canonical-json';
import { idempotencyKeyHeaders } from '../../../core/idempotency';
import { notFound } from '../../../core/errors';
import { TASK_STATES, taskBody } from '../../../core/federation/vocabulary';
import type { TaskDocument, TaskStore } from '../../../store/federation/tasks';

export const taskIdSchema = z.string().regex(/^task_[a-f0-9]{24}$/, 'a task id such as task_0123456789abcdef01234567');

/** A task as the API shows it: payload and result as canonical JSON, the claim id left out. */
export const publicTask = (t: TaskDocument) => {
  const {
    _id,
    payload_json,
    result_json,
    claim_id: _claim,
    claimed_at,
    finished_at,
    progress,
    context_id,
    ...rest
  } = t;
  return {
    task_id: _id,
    ...rest,
    claimed_at: claimed_at ?? null,
    finished_at: finished_at ?? null,
    progress: progress ?? null,
    context_id: context_id ?? null,
    payload: new RawJson(payload_json),
    result: result_json === null ? null : new RawJson(result_json)
  };
};

export const taskSchema = z.object({
  task_id: z.string(),
  type: z.string(),
  payload: rawJsonSchema('the payload as submitted, in canonical JSON'),
  required_capabilities: z.array(z.string()),
  priority: z.number().int(),
  state: z.enum(TASK_STATES),
  submitted_by: z.string().describe('the principal id that submitted it'),
  created_at: z.string(),
  updated_at: z.string(),
  claimed_by: z.string().nullable(),
  lease_expires_at: z.string().nullable(),
  attempts: z.number().int(),
  result: rawJsonSchema('the result the worker reported, in canonical JSON', {}).nullable(),
  error: z.string().nullable(),
  claimed_at: z.string().nullable().describe('when the current (or last) claim began'),
  finished_at: z.string().nullable(),
  progress: z.string().nullable().describe("the claiming node's last progress note"),
  context_id: z.string().nullable().describe('the A2A context, for tasks sent as A2A messages')
});
const submitResponse = z.object({
  ok: z.literal(true),
  task_id: z.string(),
  state: z.enum(TASK_STATES),
  duplicate: z.boolean().describe('true when an Idempotency-Key retry returned the task queued first'),
  task: taskSchema,
  status_url: z.string()
});
const statsResponse = z.object({
  ok: z.literal(true),
  depth: z.number().int().describe('queued'),
  in_flight: z.number().int().describe('claimed'),
  done: z.number().int(),
  failed: z.number().int(),
  canceled: z.number().int(),
  mean_wait_s: z.number().nullable().describe('mean seconds from submission to (latest) claim, over claimed tasks'),
  mean_run_s: z.number().nullable().describe('mean seconds from claim to completion, over done tasks'),
  total: z.number().int(),
  open_by_type: z.record(z.string(), z.number().int()).describe('queued and claimed tasks per type'),
  at: z.string()
});

export const taskSubmissionRoutes: FastifyPluginAsyncZod<{ tasks: TaskStore; config: Config }> = async (
  app,
  { tasks, config }
) => {
  app.post(
    '/a2a/task',
    {
      config: {
        auth: 'node_or_homologous',
        directory: {
          group: 'a2a_standard',
          summary: 'Task submission for worker nodes (hub gateway, HUB_PORT); queued durably'
        }
      },
      schema: { body: taskBody, headers: idempotencyKeyHeaders, response: { 200: submitResponse } }
    },
    async (request) => {
      const { body } = request;
      const submitter = request.principal!.id;
      const idem = request.headers['idempotency-key'];
      const id = idem
        ? `task_${createHash('sha256').update(`${submitter}\n${idem}`).digest('hex').slice(0, 24)}`
        : `task_${randomBytes(12).toString('hex')}`;
      const { task, duplicate } = await tasks.submit({
        _id: id,
        type: body.type,
        payload_json: canonicalJson(body.payload as JsonValue),
        required_capabilities: body.required_capabilities,
        priority: body.priority,
        submitted_by: submitter
      });
      return {
        ok: true as const,
        task_id: task._id,
        state: task.state,
        duplicate,
        task: publicTask(task),
        status_url: `${config.hubPublicUrl}/a2a/task/${task._id}`
      };
    }
  );

  app.get(
    '/a2a/task/:task_id',
    {
      config: { auth: 'node_or_homologous' },
      schema: {
        params: z.object({ task_id: taskIdSchema }),
        response: { 200: z.object({ ok: z.literal(true), task: taskSchema }) }
      }
    },
    async (request) => {
      const { task_id } = request.params;
      const task = await tasks.find(task_id);
      if (!task) throw notFound(`No task ${task_id}`);
      return { ok: true as const, task: publicTask(task) };
    }
  );
};

export const queueStatsRoutes: FastifyPluginAsyncZod<{ tasks: TaskStore }> = async (app, { tasks }) => {
  app.get(
    '/a2a/queue/stats',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'a2a_standard',
          summary: 'Task queue statistics: depth, in flight, done, failed, mean wait and run time'
        }
      },
      schema: { response: { 200: statsResponse } }
    },
    async () => {
      const s = await tasks.stats();
      return {
        ok: true as const,
        depth: s.queued,
        in_flight: s.claimed,
        done: s.done,
        failed: s.failed,
        canceled: s.canceled,
        mean_wait_s: s.mean_wait_s,
        mean_run_s: s.mean_run_s,
        total: s.total,
        open_by_type: s.by_type,
        at: new Date().toISOString()
      };
    }
  );
};
