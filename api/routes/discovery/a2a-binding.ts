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
 *                                 the first task. A message naming a taskId is UnsupportedOperation (tasks take one
 *                                 message: no input-required turns); file parts are ContentTypeNotSupported.
 *   POST /a2a/message:stream      SendStreamingMessage: the same, then SSE: { task }, a { statusUpdate } at each state
 *                                 change, an { artifactUpdate } with the result, until a final state (or
 *                                 A2A_STREAM_MAX_S, 15 min: the client then subscribes again)
 *   GET  /a2a/tasks/{id}          GetTask; GET /a2a/tasks/{id}:subscribe SubscribeToTask (SSE as above, for a task
 *                                 not yet final)
 *   GET  /a2a/tasks               ListTasks: the caller's tasks, newest first (contextId, status, pageSize, pageToken)
 *   POST /a2a/tasks/{id}:cancel   CancelTask: a queued or working task is canceled (its node hears it at its next
 *                                 progress call); a final one is TaskNotCancelable
 *   /a2a/tasks/{id}/pushNotificationConfigs[/{config}]         PushNotificationNotSupported (pushNotifications: false)
 *   GET  /a2a/extendedAgentCard   ExtendedAgentCardNotConfigured (extendedAgentCard: false)
 *   POST /a2a/jsonrpc             The JSON-RPC 2.0 binding of the same operations (methods SendMessage,
 *                                 SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask; params and
 *                                 results as above; the streaming methods answer SSE whose data lines are JSON-RPC
 *                                 responses). A2A errors are JSON-RPC errors (-32001 TaskNotFound … -32007) with
 *                                 HTTP 200; an envelope that is not JSON-RPC 2.0 is a 400 in the binding's shape.
 * Queue states map to A2A task states: queued SUBMITTED, claimed WORKING, done COMPLETED, failed FAILED, canceled
 * CANCELED (input-required never applies). Every task operation needs a node key (X-External-Node + X-External-Key),
 * homologous credentials, or an OAuth access token (client credentials) with the scope `a2a`, as the card's
 * securityRequirements say; a caller sees only the tasks it sent (an OAuth client's are `oauth:<client_id>`'s).
 * Errors take the binding's shape (google.rpc.Status with an ErrorInfo whose reason the SDKs map to their error
 * classes), not the hub's, so A2A clients see typed errors.
 */
import { createHash } from 'node:crypto';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { FastifyPluginAsyncZod, hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { eventStreams } from '../../event-stream';
import { sseEvent } from '../../response-docs';
import { queryInt } from '../../../core/identifiers';
import { AppError } from '../../../core/errors';
import { canonicalJson, JsonValue } from '../../../core/ledger/canonical-json';
import type { Config } from '../../../core/config.node';
import type { TaskState } from '../../../core/federation/vocabulary';
import type { TaskDocument, TaskStore } from '../../../store/federation/tasks';

export const A2A_BASE_PATH = '/a2a';

/** The A2A error reasons this binding answers with, their HTTP status and google.rpc status name. */
const REASONS = {
  TASK_NOT_FOUND: { http: 404, status: 'NOT_FOUND', message: 'Task not found' },
  TASK_NOT_CANCELABLE: {
    http: 409,
    status: 'FAILED_PRECONDITION',
    message: 'The task is in a final state and cannot be canceled'
  },
  UNSUPPORTED_OPERATION: { http: 400, status: 'FAILED_PRECONDITION', message: 'Unsupported operation' },
  CONTENT_TYPE_NOT_SUPPORTED: {
    http: 415,
    status: 'INVALID_ARGUMENT',
    message: 'Only text and JSON data parts (text/plain, application/json) are accepted'
  },
  PUSH_NOTIFICATION_NOT_SUPPORTED: {
    http: 400,
    status: 'FAILED_PRECONDITION',
    message: 'Push notifications are not supported (capabilities.pushNotifications: false)'
  },
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: {
    http: 400,
    status: 'FAILED_PRECONDITION',
    message: 'There is no extended agent card (capabilities.extendedAgentCard: false)'
  },
  INVALID_PARAMS: { http: 400, status: 'INVALID_ARGUMENT', message: 'Request malformed' }
} as const;
type Reason = keyof typeof REASONS;

const STATUS_NAME: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ABORTED',
  413: 'RESOURCE_EXHAUSTED',
  414: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  503: 'UNAVAILABLE'
};

/** The binding's error body (google.rpc.Status as JSON), documented for every error status of these routes. */
export const a2aErrorBody = z
  .object({
    error: z.looseObject({
      code: z.number().int(),
      status: z.string(),
      message: z.string(),
      details: z.array(z.looseObject({ '@type': z.string() }))
    })
  })
  .describe('A2A error (google.rpc.Status); details carry a google.rpc.ErrorInfo whose reason names the A2A error');

function a2aError(
  reply: FastifyReply,
  httpStatus: number,
  message: string,
  reason?: string,
  statusName?: string
): FastifyReply {
  const details = reason
    ? [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'a2a-protocol.org' }]
    : [];
  return reply.code(httpStatus).send({
    error: {
      code: httpStatus,
      status: statusName ?? STATUS_NAME[httpStatus] ?? (httpStatus >= 500 ? 'INTERNAL' : 'UNKNOWN'),
      message,
      details
    }
  });
}

/** An operation's outcome: its value, or the A2A error it ends in. */
type Outcome<T> = ({ ok: true } & T) | { ok: false; reason: Reason; message?: string };

const refuse = (reply: FastifyReply, reason: Reason, message?: string) =>
  a2aError(reply, REASONS[reason].http, message ?? REASONS[reason].message, reason, REASONS[reason].status);

const ACCEPTED_MEDIA = ['', 'text/plain', 'application/json'];
/** A2A's kinds of Part: a part carries one of these members. */
const PART_KINDS = ['text', 'data', 'file', 'raw', 'url'];

/** Routing a message to nodes: what they must be able to do, the task type, the priority. */
const routingMetadata = z.looseObject({
  required_capabilities: z.array(z.string().min(1).max(80)).max(32).optional(),
  task_type: z
    .string()
    .regex(/^[a-z][a-z0-9_.-]{0,63}$/, 'a task type such as inference.chat')
    .optional(),
  priority: z.number().int().min(0).max(9).optional()
});

/** A2A Message (v1.0 JSON form): the fields the hub reads; everything else is allowed and kept in the task payload. */
const messageBody = z.looseObject({
  messageId: z.string().min(1).max(200),
  contextId: z.string().max(200).optional(),
  taskId: z.string().max(200).optional(),
  role: z.enum(['ROLE_USER', 'ROLE_AGENT', 'ROLE_UNSPECIFIED']),
  // A2A's Part is one of text, data, file (raw or url): a part with none of them is malformed (400); a file part, or a
  // media type other than text/plain and application/json, is well formed and answered ContentTypeNotSupported.
  parts: z
    .array(
      z
        .looseObject({ mediaType: z.string().max(200).optional() })
        .refine((part) => PART_KINDS.some((member) => member in part), `a part has one of ${PART_KINDS.join(', ')}`)
        .meta({ anyOf: PART_KINDS.map((member) => ({ required: [member] })) })
    )
    .min(1)
    .max(100),
  metadata: routingMetadata.optional()
});
const sendMessageRequest = z.looseObject({
  tenant: z.string().max(200).optional(),
  message: messageBody,
  configuration: z.looseObject({ returnImmediately: z.boolean().optional() }).optional()
});

const a2aTask = z
  .looseObject({
    id: z.string(),
    contextId: z.string(),
    status: z.looseObject({ state: z.string(), timestamp: z.string() }),
    artifacts: z.array(z.looseObject({ artifactId: z.string() })),
    history: z.array(z.looseObject({})),
    metadata: z.looseObject({})
  })
  .describe('A2A Task');
const sendMessageResponse = z.object({ task: a2aTask });
const listTasksResponse = z.object({
  tasks: z.array(a2aTask),
  nextPageToken: z.string(),
  pageSize: z.number().int(),
  totalSize: z.number().int()
});
const sseResponse = {
  200: {
    description:
      'SSE: each data line a StreamResponse ({ task } first, then { statusUpdate } and { artifactUpdate }), until a final state',
    content: { 'text/event-stream': { schema: sseEvent('a StreamResponse as JSON') } }
  }
};

const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, a2aErrorBody]));
const taskParams = z.object({
  task: z.string().min(1).max(200).describe('a task id, optionally with the :cancel or :subscribe suffix')
});
const configParams = z.object({ task: z.string().min(1).max(200), config: z.string().min(1).max(200) });

const A2A_STATE: Record<TaskState, string> = {
  queued: 'TASK_STATE_SUBMITTED',
  claimed: 'TASK_STATE_WORKING',
  done: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  canceled: 'TASK_STATE_CANCELED'
};
const FINAL: TaskState[] = ['done', 'failed', 'canceled'];
const A2A_STATE_FILTER = z.enum([
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED'
]);
const QUEUE_STATE = Object.fromEntries(Object.entries(A2A_STATE).map(([k, v]) => [v, k as TaskState]));

const agentText = (id: string, text: string) => ({ messageId: id, role: 'ROLE_AGENT', parts: [{ text }] });

function resultArtifact(t: TaskDocument) {
  if (t.state !== 'done' || t.result_json === null) return null;
  const result: unknown = JSON.parse(t.result_json);
  const text =
    result && typeof result === 'object' && 'text' in result && typeof result.text === 'string' ? result.text : null;
  return {
    artifactId: `${t._id}-result`,
    name: 'result',
    description: `The result node ${t.claimed_by} reported`,
    parts: [...(text === null ? [] : [{ text }]), { data: result, mediaType: 'application/json' }]
  };
}

const messagePayload = z.object({ message: z.record(z.string(), z.unknown()) });

/** A queue record as an A2A Task: state mapped, the node's result as the artifact, the message as history. */
export function toA2aTask(t: TaskDocument) {
  const payload = messagePayload.safeParse(JSON.parse(t.payload_json));
  const message = payload.success ? payload.data.message : null;
  const note = t.state === 'failed' ? t.error : t.state === 'claimed' ? t.progress : null;
  const artifact = resultArtifact(t);
  return {
    id: t._id,
    contextId: t.context_id ?? t._id,
    status: {
      state: A2A_STATE[t.state],
      timestamp: t.updated_at,
      ...(note ? { message: agentText(`${t._id}-status-${t.attempts}`, note) } : {})
    },
    artifacts: artifact ? [artifact] : [],
    history: message ? [message] : [],
    metadata: {
      task_type: t.type,
      required_capabilities: t.required_capabilities,
      priority: t.priority,
      attempts: t.attempts,
      claimed_by: t.claimed_by
    }
  };
}

/** JSON-RPC binding: the A2A error codes (and JSON-RPC's own for malformed params and unknown methods). */
const JSONRPC_CODE: Record<Reason, number> = {
  TASK_NOT_FOUND: -32001,
  TASK_NOT_CANCELABLE: -32002,
  PUSH_NOTIFICATION_NOT_SUPPORTED: -32003,
  UNSUPPORTED_OPERATION: -32004,
  CONTENT_TYPE_NOT_SUPPORTED: -32005,
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: -32007,
  INVALID_PARAMS: -32602
};
const METHOD_NOT_FOUND = -32601;
const rpcId = z.union([z.string().max(200), z.number(), z.null()]);
const rpcRequest = z
  .looseObject({
    jsonrpc: z.literal('2.0'),
    id: rpcId.optional(),
    method: z
      .string()
      .min(1)
      .max(100)
      .describe('SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask or SubscribeToTask'),
    params: z
      .looseObject({})
      .optional()
      .describe(
        'the operation request as in the HTTP+JSON binding (for GetTask, CancelTask and SubscribeToTask: { id })'
      )
  })
  .describe('A JSON-RPC 2.0 request');
const rpcResponse = z
  .looseObject({
    jsonrpc: z.literal('2.0'),
    id: rpcId,
    result: z.unknown().optional(),
    error: z.looseObject({ code: z.number().int(), message: z.string() }).optional()
  })
  .describe('A JSON-RPC 2.0 response: result, or an error whose code names the A2A error');
const rpcParams = {
  taskId: z.looseObject({ id: z.string().min(1).max(200), historyLength: z.number().int().min(0).optional() }),
  list: z.looseObject({
    pageSize: z.number().int().min(1).max(100).optional(),
    pageToken: z
      .string()
      .regex(/^\d{0,7}$/, 'the nextPageToken of the previous page')
      .optional(),
    contextId: z.string().min(1).max(200).optional(),
    // The SDKs send their enum's unset value (TASK_STATE_UNSPECIFIED, or UNRECOGNIZED from @a2a-js/sdk) for no filter.
    status: z.union([A2A_STATE_FILTER, z.enum(['TASK_STATE_UNSPECIFIED', 'UNRECOGNIZED'])]).optional()
  })
};

/** The scope an OAuth access token needs on the binding's task operations. */
export const A2A_OAUTH_SCOPE = 'a2a';

/** Who sent a task: the node or homologous principal, or `oauth:<client_id>` for an OAuth client. */
const submitterOf = (request: FastifyRequest): string =>
  request.principal!.model === 'oauth' ? `oauth:${request.principal!.id}` : request.principal!.id;

const STREAM_POLL_MS = 300;

export const a2aBindingRoutes: FastifyPluginAsyncZod<{ config: Config; tasks: TaskStore }> = async (
  app,
  { config, tasks }
) => {
  const STREAM_MAX_MS = config.A2A_STREAM_MAX_S * 1000;
  const A2A_BLOCKING_WAIT_MS = config.A2A_SEND_WAIT_S * 1000;
  const none = { auth: 'none' as const };
  const caller = { auth: 'node_or_homologous' as const, authAlso: ['oauth' as const] };
  const streams = eventStreams(app);

  // Inside this plugin every failure takes the binding's shape, so the SDKs can read it.
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(err) || err.validation)
      return a2aError(reply, 400, `Request malformed: ${err.message}`, 'INVALID_PARAMS');
    const status = err instanceof AppError ? err.status : (err.statusCode ?? 500);
    if (status >= 500) {
      request.log.error({ err }, 'request failed');
      return a2aError(
        reply,
        status,
        status === 503 ? 'Unavailable; retry later' : 'Internal error; quote the X-Trace header when reporting it'
      );
    }
    return a2aError(reply, status, err.message);
  });

  // An OAuth access token must carry the scope a2a (403 otherwise).
  app.addHook('preHandler', async (request) => {
    const p = request.principal;
    if (p?.model === 'oauth' && !p.scopes?.includes(A2A_OAUTH_SCOPE))
      throw new AppError(
        'forbidden',
        `This access token lacks the scope '${A2A_OAUTH_SCOPE}' (grant it to the OAuth client)`
      );
  });

  /** The caller's task, or null (another caller's task is as good as missing). */
  const ownTask = async (request: FastifyRequest, id: string) => {
    const task = /^task_[a-f0-9]{24}$/.test(id) ? await tasks.find(id) : null;
    return task && task.submitted_by === submitterOf(request) ? task : null;
  };

  /** Queues a message as a task; null (after answering) when the message cannot become one. */
  const queueMessage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    message: z.infer<typeof messageBody>
  ): Promise<TaskDocument | null> => {
    const out = await queue(request, message);
    if (out.ok) return out.task;
    refuse(reply, out.reason, out.message);
    return null;
  };

  /** Queues a message as a task, or says why it cannot become one. */
  const queue = async (
    request: FastifyRequest,
    message: z.infer<typeof messageBody>
  ): Promise<Outcome<{ task: TaskDocument }>> => {
    if (message.taskId)
      return {
        ok: false,
        reason: 'UNSUPPORTED_OPERATION',
        message: 'A task takes one message: send a new message (without taskId) for new work'
      };
    if (message.parts.some((p) => !('text' in p || 'data' in p) || !ACCEPTED_MEDIA.includes(p.mediaType ?? '')))
      return { ok: false, reason: 'CONTENT_TYPE_NOT_SUPPORTED' };
    const submitter = submitterOf(request);
    const id = `task_${createHash('sha256').update(`a2a\n${submitter}\n${message.messageId}`).digest('hex').slice(0, 24)}`;
    const { task } = await tasks.submit({
      _id: id,
      type: message.metadata?.task_type ?? 'a2a.message',
      payload_json: canonicalJson({ message } as JsonValue),
      required_capabilities: message.metadata?.required_capabilities ?? [],
      priority: message.metadata?.priority ?? 5,
      submitted_by: submitter,
      context_id: message.contextId ?? null
    });
    return { ok: true, task };
  };

  /** SSE of a task's updates until it reaches a final state, the client leaves or STREAM_MAX_MS passes. */
  const stream = async (
    request: FastifyRequest,
    reply: FastifyReply,
    first: TaskDocument,
    wrap: (event: unknown) => unknown = (event) => event
  ) => {
    const sse = streams.open(request, reply);
    const send = (event: unknown) => sse.write(`data: ${JSON.stringify(wrap(event))}\n\n`);
    send({ task: toA2aTask(first) });
    let last = `${first.state}/${first.attempts}/${first.progress ?? ''}`;
    let current = first;
    const started = Date.now();
    while (sse.isOpen() && !FINAL.includes(current.state) && Date.now() - started < STREAM_MAX_MS) {
      await new Promise((r) => setTimeout(r, STREAM_POLL_MS));
      try {
        const next = await tasks.find(current._id);
        if (!next) break;
        current = next;
      } catch (err) {
        request.log.warn({ err }, 'a2a stream poll failed; retrying');
        continue;
      }
      const key = `${current.state}/${current.attempts}/${current.progress ?? ''}`;
      if (key !== last) {
        last = key;
        const a2a = toA2aTask(current);
        const artifact = a2a.artifacts[0];
        if (artifact) send({ artifactUpdate: { taskId: a2a.id, contextId: a2a.contextId, artifact, lastChunk: true } });
        send({
          statusUpdate: {
            taskId: a2a.id,
            contextId: a2a.contextId,
            status: a2a.status,
            ...(FINAL.includes(current.state) ? { final: true } : {})
          }
        });
      } else {
        sse.keepAlive();
      }
    }
    sse.end();
  };

  app.post(
    `${A2A_BASE_PATH}/message::send`,
    {
      config: caller,
      schema: {
        summary: 'A2A SendMessage: queues the message as a federation task',
        body: sendMessageRequest,
        response: { 200: sendMessageResponse, ...errors(400, 401, 403, 404, 413, 415, 500, 503) }
      }
    },
    async (request, reply) => {
      let task = await queueMessage(request, reply, request.body.message);
      if (!task) return reply;
      const until = Date.now() + A2A_BLOCKING_WAIT_MS;
      let gone = false;
      request.raw.on('close', () => {
        gone = true;
      });
      while (
        request.body.configuration?.returnImmediately !== true &&
        !FINAL.includes(task.state) &&
        Date.now() < until &&
        !gone
      ) {
        await new Promise((r) => setTimeout(r, STREAM_POLL_MS));
        task = (await tasks.find(task._id)) ?? task;
      }
      return { task: toA2aTask(task) };
    }
  );

  app.post(
    `${A2A_BASE_PATH}/message::stream`,
    {
      config: caller,
      schema: {
        summary: 'A2A SendStreamingMessage: queues the message as a task, then SSE until it is final',
        body: sendMessageRequest,
        response: { ...sseResponse, ...errors(400, 401, 403, 413, 415, 500, 503) }
      }
    },
    async (request, reply) => {
      const task = await queueMessage(request, reply, request.body.message);
      if (task) await stream(request, reply, task);
      return reply;
    }
  );

  app.get(
    `${A2A_BASE_PATH}/tasks`,
    {
      config: caller,
      schema: {
        summary: "A2A ListTasks: the caller's tasks, newest first",
        querystring: z.looseObject({
          pageSize: queryInt(1, 100).default(50),
          pageToken: z
            .string()
            .regex(/^\d{1,7}$/, 'the nextPageToken of the previous page')
            .optional(),
          contextId: z.string().min(1).max(200).optional(),
          status: A2A_STATE_FILTER.optional()
        }),
        response: { 200: listTasksResponse, ...errors(400, 401, 403, 500, 503) }
      }
    },
    async (request) => {
      const { pageSize, pageToken, contextId, status } = request.query;
      const offset = pageToken ? Number(pageToken) : 0;
      const page = await tasks.listBySubmitter(
        submitterOf(request),
        { state: status ? QUEUE_STATE[status] : undefined, contextId },
        { limit: pageSize, offset }
      );
      const next = offset + page.tasks.length;
      return {
        tasks: page.tasks.map(toA2aTask),
        nextPageToken: next < page.total ? String(next) : '',
        pageSize,
        totalSize: page.total
      };
    }
  );

  // GetTask is /tasks/{id} and SubscribeToTask /tasks/{id}:subscribe: one route, told apart by the suffix.
  app.get(
    `${A2A_BASE_PATH}/tasks/:task`,
    {
      config: caller,
      schema: {
        summary: 'A2A GetTask, and SubscribeToTask (/tasks/{id}:subscribe, SSE until the task is final)',
        params: taskParams,
        querystring: z.looseObject({ historyLength: queryInt(0, 100).optional() }),
        response: {
          200: {
            description: 'GetTask: the A2A Task; SubscribeToTask: an SSE stream (text/event-stream)',
            content: {
              'application/json': { schema: a2aTask },
              'text/event-stream': { schema: sseEvent('a StreamResponse as JSON') }
            }
          },
          ...errors(400, 401, 403, 404, 500, 503)
        }
      }
    },
    async (request, reply) => {
      const subscribe = request.params.task.endsWith(':subscribe');
      const task = await ownTask(
        request,
        subscribe ? request.params.task.slice(0, -':subscribe'.length) : request.params.task
      );
      if (!task) return refuse(reply, 'TASK_NOT_FOUND');
      if (!subscribe) return reply.type('application/json').send(toA2aTask(task));
      if (FINAL.includes(task.state))
        return refuse(
          reply,
          'UNSUPPORTED_OPERATION',
          `The task is ${A2A_STATE[task.state]}: a final task has no updates to subscribe to`
        );
      await stream(request, reply, task);
      return reply;
    }
  );

  app.post(
    `${A2A_BASE_PATH}/tasks/:task`,
    {
      config: caller,
      schema: {
        summary: 'A2A CancelTask (/tasks/{id}:cancel)',
        params: taskParams,
        response: { 200: a2aTask, ...errors(400, 401, 403, 404, 409, 413, 415, 500, 503) }
      }
    },
    async (request, reply) => {
      if (!request.params.task.endsWith(':cancel'))
        return a2aError(reply, 404, `No route POST ${request.url.split('?')[0]}`);
      const task = await ownTask(request, request.params.task.slice(0, -':cancel'.length));
      if (!task) return refuse(reply, 'TASK_NOT_FOUND');
      const out = await tasks.cancel(task._id);
      if (!out.canceled || !out.task)
        return refuse(
          reply,
          'TASK_NOT_CANCELABLE',
          `The task is ${A2A_STATE[out.task?.state ?? task.state]}; only a submitted or working task can be canceled`
        );
      return toA2aTask(out.task);
    }
  );

  // The JSON-RPC binding: the same operations, one URL, A2A errors as JSON-RPC errors (HTTP 200).
  app.post(
    `${A2A_BASE_PATH}/jsonrpc`,
    {
      config: caller,
      schema: {
        summary:
          'A2A JSON-RPC binding: SendMessage, SendStreamingMessage (SSE), GetTask, ListTasks, CancelTask, SubscribeToTask (SSE)',
        body: rpcRequest,
        response: {
          200: {
            description:
              'A JSON-RPC response; for SendStreamingMessage and SubscribeToTask an SSE stream whose data lines are JSON-RPC responses carrying StreamResponses',
            content: {
              'application/json': { schema: rpcResponse },
              'text/event-stream': { schema: sseEvent('a JSON-RPC response carrying a StreamResponse') }
            }
          },
          ...errors(400, 401, 403, 413, 415, 500, 503)
        }
      }
    },
    async (request, reply) => {
      const { method, params = {} } = request.body;
      const id = request.body.id ?? null;
      const send = (body: z.infer<typeof rpcResponse>) => reply.type('application/json').send(body);
      const result = (value: unknown) => send({ jsonrpc: '2.0', id, result: value });
      const fail = (reason: Reason, message?: string) =>
        send({
          jsonrpc: '2.0',
          id,
          error: {
            code: JSONRPC_CODE[reason],
            message: message ?? REASONS[reason].message,
            data: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'a2a-protocol.org' }]
          }
        });
      const parse = <T extends z.ZodType>(schema: T): z.infer<T> | null => {
        const parsed = schema.safeParse(params);
        return parsed.success ? parsed.data : null;
      };
      const malformed = () => fail('INVALID_PARAMS', `Invalid params for ${method}`);
      const wrap = (event: unknown) => ({ jsonrpc: '2.0', id, result: event });

      switch (method) {
        case 'SendMessage':
        case 'SendStreamingMessage': {
          const body = parse(sendMessageRequest);
          if (!body) return malformed();
          const out = await queue(request, body.message);
          if (!out.ok) return fail(out.reason, out.message);
          if (method === 'SendStreamingMessage') {
            await stream(request, reply, out.task, wrap);
            return reply;
          }
          let task = out.task;
          const until = Date.now() + A2A_BLOCKING_WAIT_MS;
          let gone = false;
          request.raw.on('close', () => {
            gone = true;
          });
          while (
            body.configuration?.returnImmediately !== true &&
            !FINAL.includes(task.state) &&
            Date.now() < until &&
            !gone
          ) {
            await new Promise((r) => setTimeout(r, STREAM_POLL_MS));
            task = (await tasks.find(task._id)) ?? task;
          }
          return result({ task: toA2aTask(task) });
        }
        case 'GetTask':
        case 'CancelTask':
        case 'SubscribeToTask': {
          const body = parse(rpcParams.taskId);
          if (!body) return malformed();
          const task = await ownTask(request, body.id);
          if (!task) return fail('TASK_NOT_FOUND');
          if (method === 'GetTask') return result(toA2aTask(task));
          if (method === 'SubscribeToTask') {
            if (FINAL.includes(task.state))
              return fail(
                'UNSUPPORTED_OPERATION',
                `The task is ${A2A_STATE[task.state]}: a final task has no updates to subscribe to`
              );
            await stream(request, reply, task, wrap);
            return reply;
          }
          const out = await tasks.cancel(task._id);
          if (!out.canceled || !out.task)
            return fail(
              'TASK_NOT_CANCELABLE',
              `The task is ${A2A_STATE[out.task?.state ?? task.state]}; only a submitted or working task can be canceled`
            );
          return result(toA2aTask(out.task));
        }
        case 'ListTasks': {
          const body = parse(rpcParams.list);
          if (!body) return malformed();
          const pageSize = body.pageSize ?? 50;
          const offset = body.pageToken ? Number(body.pageToken) : 0;
          const page = await tasks.listBySubmitter(
            submitterOf(request),
            { state: body.status ? QUEUE_STATE[body.status] : undefined, contextId: body.contextId },
            { limit: pageSize, offset }
          );
          const next = offset + page.tasks.length;
          return result({
            tasks: page.tasks.map(toA2aTask),
            nextPageToken: next < page.total ? String(next) : '',
            pageSize,
            totalSize: page.total
          });
        }
        case 'CreateTaskPushNotificationConfig':
        case 'GetTaskPushNotificationConfig':
        case 'ListTaskPushNotificationConfigs':
        case 'DeleteTaskPushNotificationConfig':
          return fail('PUSH_NOTIFICATION_NOT_SUPPORTED');
        case 'GetExtendedAgentCard':
          return fail('EXTENDED_AGENT_CARD_NOT_CONFIGURED');
        default:
          return send({
            jsonrpc: '2.0',
            id,
            error: { code: METHOD_NOT_FOUND, message: `Method not found: ${method}` }
          });
      }
    }
  );

  const pushSummary = 'A2A push notification configs: not supported (capabilities.pushNotifications is false)';
  app.post(
    `${A2A_BASE_PATH}/tasks/:task/pushNotificationConfigs`,
    { config: none, schema: { summary: pushSummary, params: taskParams, response: errors(400, 413, 415, 500, 503) } },
    async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
  );
  app.get(
    `${A2A_BASE_PATH}/tasks/:task/pushNotificationConfigs`,
    { config: none, schema: { summary: pushSummary, params: taskParams, response: errors(400, 500, 503) } },
    async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
  );
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: `${A2A_BASE_PATH}/tasks/:task/pushNotificationConfigs/:config`,
      config: none,
      schema: { summary: pushSummary, params: configParams, response: errors(400, 413, 415, 500, 503) },
      handler: async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
    });
  }

  app.get(
    `${A2A_BASE_PATH}/extendedAgentCard`,
    {
      config: none,
      schema: {
        summary: 'A2A GetExtendedAgentCard: not configured (capabilities.extendedAgentCard is false)',
        response: errors(400, 500, 503)
      }
    },
    async (_r, reply) => refuse(reply, 'EXTENDED_AGENT_CARD_NOT_CONFIGURED')
  );
};
