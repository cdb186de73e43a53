/**
 * Tasks for worker nodes.
 *   POST /a2a/task        (hub listener, HUB_PORT; node or homologous auth) queue a task: { type, payload,
 *                         required_capabilities, priority }; answers 200 { task_id, state: "queued" }. With an
 *                         Idempotency-Key a retry returns the first task instead of queuing a second one.
 *   GET  /a2a/task/:id    (hub listener, same auth) the task record
 *   GET  /a2a/queue/stats (main listener, public) depth (queued), in flight (claimed), done, failed
 * Worker nodes claim queued tasks with POST /api/task/assign (./work.ts); A2A clients send them as messages
 * (../discovery/a2a-binding.ts). The use cases are services/federation/federation-tasks.ts.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { idempotencyKeyHeaders } from '../../../core/idempotency';
import { TASK_STATES, taskBody } from '../../../core/federation/vocabulary';
import type { TaskStore } from '../../../store/federation/tasks';
import { createFederationTasks, queueStats } from '../../../services/federation/federation-tasks';
import { taskIdSchema, taskSchema } from './task.schema';

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
  input_required: z.number().int().describe("waiting for their submitters' input"),
  done: z.number().int(),
  failed: z.number().int(),
  canceled: z.number().int(),
  mean_wait_s: z.number().nullable().describe('mean seconds from submission to (latest) claim, over claimed tasks'),
  mean_run_s: z.number().nullable().describe('mean seconds from claim to completion, over done tasks'),
  total: z.number().int(),
  open_by_type: z.record(z.string(), z.number().int()).describe('queued, claimed and input_required tasks per type'),
  at: z.string()
});

export const taskSubmissionRoutes: FastifyPluginAsyncZod<{
  tasks: TaskStore;
  config: Pick<Config, 'hubPublicUrl'>;
}> = async (app, deps) => {
  const federationTasks = createFederationTasks(deps);
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
    async (request) => federationTasks.submit(request.principal!.id, request.body, request.headers['idempotency-key'])
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
    async (request) => federationTasks.find(request.params.task_id)
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
    async () => queueStats(tasks)
  );
};
