/**
 * Tasks for worker nodes.
 *   POST /a2a/task        (hub listener, HUB_PORT; node or homologous auth) queue a task: { type, payload,
 *                         required_capabilities, priority }; answers 200 { task_id, state: "queued" }. With an
 *                         Idempotency-Key a retry returns the first task instead of queuing a second one.
 *   GET  /a2a/task/:id    (hub listener, same auth) the task record
 *   GET  /a2a/queue/stats (main listener, public) depth (queued), in flight (claimed), done, failed
 * Worker nodes claim queued tasks through the deployment gateway's /api/task/assign (see activities/store/tasks.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { RawJson } from '../../../core/raw-json';
import { canonicalJson, JsonValue } from '../../../core/canonical-json';
import { idempotencyKeyHeaders } from '../../../core/idempotency';
import { notFound } from '../../../core/errors';
import { TaskBody, taskBody } from '../../../core/federation';
import { TaskDocument } from '../../../activities/store/tasks';
import type { ServiceContext } from '../../context';

const taskId = z.string().regex(/^task_[a-f0-9]{24}$/, 'a task id such as task_0123456789abcdef01234567');

const publicTask = (t: TaskDocument) => {
  const { _id, payload_json, result_json, ...rest } = t;
  return { task_id: _id, ...rest, payload: new RawJson(payload_json), result: result_json === null ? null : new RawJson(result_json) };
};

export async function taskSubmissionRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  app.post(
    '/a2a/task',
    {
      config: { auth: 'node_or_homologous', directory: { group: 'a2a_standard', summary: 'Task submission for worker nodes (hub gateway, HUB_PORT); queued durably' } },
      schema: { body: taskBody, headers: idempotencyKeyHeaders }
    },
    async (request) => {
      const body = request.body as TaskBody;
      const submitter = request.principal!.id;
      const idem = request.headers['idempotency-key'] as string | undefined;
      const id = idem ? `task_${createHash('sha256').update(`${submitter}\n${idem}`).digest('hex').slice(0, 24)}` : `task_${randomBytes(12).toString('hex')}`;
      const now = new Date().toISOString();
      const { task, duplicate } = await ctx.tasks.submit({
        _id: id,
        type: body.type,
        payload_json: canonicalJson(body.payload as JsonValue),
        required_capabilities: body.required_capabilities,
        priority: body.priority,
        state: 'queued',
        submitted_by: submitter,
        created_at: now,
        updated_at: now,
        claimed_by: null,
        lease_expires_at: null,
        attempts: 0,
        result_json: null,
        error: null
      });
      return { ok: true, task_id: task._id, state: task.state, duplicate, task: publicTask(task), status_url: `${ctx.config.hubPublicUrl}/a2a/task/${task._id}` };
    }
  );

  app.get('/a2a/task/:task_id', { config: { auth: 'node_or_homologous' }, schema: { params: z.object({ task_id: taskId }) } }, async (request) => {
    const { task_id } = request.params as { task_id: string };
    const task = await ctx.tasks.find(task_id);
    if (!task) throw notFound(`No task ${task_id}`);
    return { ok: true, task: publicTask(task) };
  });
}

export async function queueStatsRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  app.get('/a2a/queue/stats', { config: { auth: 'none', directory: { group: 'a2a_standard', summary: 'Task queue statistics: depth, in flight, done, failed' } } }, async () => {
    const s = await opts.ctx.tasks.stats();
    return { ok: true, depth: s.queued, in_flight: s.claimed, done: s.done, failed: s.failed, total: s.total, open_by_type: s.by_type, at: new Date().toISOString() };
  });
}
