/**
 * The A2A v1.0 HTTP+JSON binding at /a2a, on the federation's task queue (store/federation/tasks.ts). A message an
 * A2A client sends becomes a task in the queue (the same record POST /a2a/task creates, its payload { message }),
 * which a worker node claims (POST /api/task/assign), runs and completes; its result becomes the task's artifact.
 *   POST /a2a/message:send        SendMessage: queues the message as a task and answers { task }: at once with
 *                                 configuration.returnImmediately, else when the task is final or after
 *                                 A2A_SEND_WAIT_S (30 s), whichever is first (a task may wait long for a node;
 *                                 the client follows it with GetTask or SubscribeToTask).
 *                                 Routing: message.metadata.required_capabilities (the capabilities a node must have
 *                                 declared), metadata.task_type (default a2a.message), metadata.priority (0-9).
 *                                 The task id is derived from the caller and messageId, so a retried send returns
 *                                 the first task. A message naming a taskId is TaskNotFound when the caller has no
 *                                 such task, else UnsupportedOperation (tasks take one message: no input-required
 *                                 turns); raw and url parts are ContentTypeNotSupported. A Message's and its parts'
 *                                 undocumented members are dropped (services/a2a/a2a-message.ts).
 *   POST /a2a/message:stream      SendStreamingMessage: the same, then SSE: { task }, a { statusUpdate } at each state
 *                                 change, an { artifactUpdate } with the result, until a final state (or
 *                                 A2A_STREAM_MAX_S, 15 min: the client then subscribes again)
 *   GET  /a2a/tasks/{id}          GetTask (historyLength); GET or POST /a2a/tasks/{id}:subscribe SubscribeToTask (SSE
 *                                 as above, for a task not yet final; a2a.proto says GET, the specification's HTTP
 *                                 binding section POST)
 *   GET  /a2a/tasks               ListTasks: the caller's tasks (contextId, status, statusTimestampAfter, pageSize,
 *                                 pageToken, historyLength, includeArtifacts; proto field names accepted too)
 *   POST /a2a/tasks/{id}:cancel   CancelTask: a queued or working task is canceled (its node hears it at its next
 *                                 progress call); a final one is TaskNotCancelable
 *   /a2a/tasks/{id}/pushNotificationConfigs[/{config}] and GET /a2a/extendedAgentCard: PushNotificationNotSupported,
 *                                 UnsupportedOperation (./a2a-unsupported.ts)
 *   POST /a2a/jsonrpc             The JSON-RPC 2.0 binding of the same operations (./a2a-jsonrpc.ts).
 * Every operation reads the A2A-Version service parameter (header, or query parameter): a version other than 1.0,
 * a missing one (0.3) included, is VersionNotSupported (services/a2a/a2a-version.ts).
 * The operations themselves are services/a2a/a2a-tasks.ts. Every task operation needs a node key (X-External-Node +
 * X-External-Key), homologous credentials, or an OAuth access token (client credentials) with the scope `a2a`, as the
 * card's securityRequirements say; a caller sees only the tasks it sent (an OAuth client's are `oauth:<client_id>`'s).
 * Errors take the binding's shape (./a2a-replies.ts), not the hub's, so A2A clients see typed errors.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { sseEvent } from '../../response-docs';
import { AppError } from '../../../core/errors';
import type { A2aConfig, Config } from '../../../core/config.node';
import { parseJsonBody } from '../../plugins/json-body';
import type { TaskStore } from '../../../store/federation/tasks';
import { createA2aTasks } from '../../../services/a2a/a2a-tasks';
import { toA2aTask } from '../../../services/a2a/a2a-task';
import { A2A_BASE_PATH, A2A_OAUTH_SCOPE } from '../../../services/a2a/interface';
import * as s from './a2a-binding.schema';
import { a2aError, a2aErrorHandler, refuse, taskStreamer } from './a2a-replies';
import { refuseUnsupportedVersion } from './a2a-version-check';
import { a2aJsonRpcRoutes } from './a2a-jsonrpc';
import { a2aUnsupportedRoutes } from './a2a-unsupported';

/** Who sent a task: the node or homologous principal, or `oauth:<client_id>` for an OAuth client. */
const submitterOf = (request: FastifyRequest): string =>
  request.principal!.model === 'oauth' ? `oauth:${request.principal!.id}` : request.principal!.id;

/** From now on, whether the client has gone (a blocking send stops waiting for it). */
const clientGone = (request: FastifyRequest) => {
  let gone = false;
  request.raw.on('close', () => {
    gone = true;
  });
  return () => gone;
};

/** A send's Idempotency-Key header (the versionHeader schema checked its form), or undefined. */
const idempotencyKeyOf = (request: FastifyRequest): string | undefined => {
  const key = request.headers['idempotency-key'];
  return typeof key === 'string' ? key : undefined;
};

export const a2aBindingRoutes: FastifyPluginAsyncZod<{
  config: Pick<A2aConfig, 'A2A_SEND_WAIT_S' | 'A2A_STREAM_MAX_S' | 'TASK_LEASE_S'> & Pick<Config, 'JSON_MAX_DEPTH'>;
  tasks: TaskStore;
}> = async (app, { config, tasks }) => {
  const a2a = createA2aTasks({ tasks, config });
  const stream = taskStreamer(app, a2a);
  const caller = { auth: 'node_or_homologous' as const, authAlso: ['oauth' as const] };

  /** SubscribeToTask, over GET (a2a.proto) or POST (the specification's HTTP binding section). */
  const subscribe = async (request: FastifyRequest, reply: FastifyReply, id: string) => {
    const out = await a2a.subscribe(submitterOf(request), id);
    if (!out.ok) return refuse(reply, out.reason, out.message);
    await stream(request, reply, out.task);
    return reply;
  };

  app.setErrorHandler(a2aErrorHandler);

  // Bodies: application/json, and application/a2a+json (the media type A2A 1.0.1 registers), both through the
  // listener's strict JSON parser. Any other type, text/plain included, is 415 (Fastify's own text parser would hand
  // the text to the schema, a 400).
  app.addContentTypeParser('application/a2a+json', { parseAs: 'buffer' }, (request, body, done) => {
    try {
      done(null, parseJsonBody(body as Buffer, request.headers['content-type'], config.JSON_MAX_DEPTH));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.removeContentTypeParser('text/plain');

  // A2A-Version, before validation (the JSON-RPC route checks it itself, to answer with the request's id).
  app.addHook('preValidation', refuseUnsupportedVersion);

  // An OAuth access token must carry the scope a2a (403 otherwise).
  app.addHook('preHandler', async (request) => {
    const p = request.principal;
    if (p?.model === 'oauth' && !p.scopes?.includes(A2A_OAUTH_SCOPE))
      throw new AppError(
        'forbidden',
        `This access token lacks the scope '${A2A_OAUTH_SCOPE}' (grant it to the OAuth client)`
      );
  });

  app.post(
    `${A2A_BASE_PATH}/message::send`,
    {
      config: caller,
      schema: {
        summary: 'A2A SendMessage: queues the message as a federation task',
        headers: s.versionHeader,
        body: s.sendMessageRequest,
        response: { 200: s.sendMessageResponse, ...s.errors(400, 401, 403, 404, 413, 415, 500, 503) }
      }
    },
    async (request, reply) => {
      const out = await a2a.send(
        submitterOf(request),
        request.body,
        () => clientGone(request),
        idempotencyKeyOf(request)
      );
      return out.ok ? out.answer : refuse(reply, out.reason, out.message);
    }
  );

  app.post(
    `${A2A_BASE_PATH}/message::stream`,
    {
      config: caller,
      schema: {
        summary: 'A2A SendStreamingMessage: queues the message as a task, then SSE until it is final',
        headers: s.versionHeader,
        body: s.sendMessageRequest,
        response: { ...s.sseResponse, ...s.errors(400, 401, 403, 404, 413, 415, 500, 503) }
      }
    },
    async (request, reply) => {
      const out = await a2a.queue(submitterOf(request), request.body.message, idempotencyKeyOf(request));
      if (!out.ok) return refuse(reply, out.reason, out.message);
      await stream(request, reply, out.task, { untilInterrupted: true });
      return reply;
    }
  );

  app.get(
    `${A2A_BASE_PATH}/tasks`,
    {
      config: caller,
      schema: {
        summary:
          "A2A ListTasks: the caller's tasks (filtered: latest status first; unfiltered: newest submitted first)",
        headers: s.versionHeader,
        querystring: s.listTasksQuery,
        response: { 200: s.listTasksResponse, ...s.errors(400, 401, 403, 500, 503) }
      },
      // ProtoJSON's proto field names (context_id, page_size, …) as the JSON names.
      preValidation: async (request) => {
        request.query = s.protoJsonNames(request.query);
      }
    },
    async (request) =>
      a2a.list(submitterOf(request), {
        ...request.query,
        includeArtifacts: request.query.includeArtifacts === 'true'
      })
  );

  // GetTask is /tasks/{id} and SubscribeToTask /tasks/{id}:subscribe: one route, told apart by the suffix.
  app.get(
    `${A2A_BASE_PATH}/tasks/:task`,
    {
      config: caller,
      schema: {
        summary: 'A2A GetTask, and SubscribeToTask (/tasks/{id}:subscribe, SSE until the task is final)',
        headers: s.versionHeader,
        params: s.taskParams,
        querystring: s.getTaskQuery,
        response: {
          200: {
            description: 'GetTask: the A2A Task; SubscribeToTask: an SSE stream (text/event-stream)',
            content: {
              'application/json': { schema: s.a2aTask },
              'text/event-stream': { schema: sseEvent('a StreamResponse as JSON') }
            }
          },
          ...s.errors(400, 401, 403, 404, 500, 503)
        }
      },
      preValidation: async (request) => {
        request.query = s.protoJsonNames(request.query);
      }
    },
    async (request, reply) => {
      const { task: id } = request.params;
      const submitter = submitterOf(request);
      if (id.endsWith(':subscribe')) return subscribe(request, reply, id.slice(0, -':subscribe'.length));
      const out = await a2a.get(submitter, id);
      return out.ok
        ? reply.type('application/json').send(toA2aTask(out.task, { historyLength: request.query.historyLength }))
        : refuse(reply, out.reason);
    }
  );

  app.post(
    `${A2A_BASE_PATH}/tasks/:task`,
    {
      config: caller,
      schema: {
        summary: 'A2A CancelTask (/tasks/{id}:cancel), and SubscribeToTask (/tasks/{id}:subscribe, SSE)',
        headers: s.versionHeader,
        params: s.taskParams,
        response: {
          200: {
            description: 'CancelTask: the A2A Task; SubscribeToTask: an SSE stream (text/event-stream)',
            content: {
              'application/json': { schema: s.a2aTask },
              'text/event-stream': { schema: sseEvent('a StreamResponse as JSON') }
            }
          },
          ...s.errors(400, 401, 403, 404, 409, 413, 415, 500, 503)
        }
      }
    },
    async (request, reply) => {
      const { task } = request.params;
      if (task.endsWith(':subscribe')) return subscribe(request, reply, task.slice(0, -':subscribe'.length));
      if (!task.endsWith(':cancel')) return a2aError(reply, 404, `No route POST ${request.url.split('?')[0]}`);
      const out = await a2a.cancel(submitterOf(request), task.slice(0, -':cancel'.length));
      return out.ok ? reply.type('application/json').send(out.task) : refuse(reply, out.reason, out.message);
    }
  );

  await app.register(a2aJsonRpcRoutes, {
    prefix: A2A_BASE_PATH,
    a2a,
    stream,
    submitterOf,
    clientGone,
    idempotencyKeyOf
  });

  await app.register(a2aUnsupportedRoutes, { prefix: A2A_BASE_PATH });
};
