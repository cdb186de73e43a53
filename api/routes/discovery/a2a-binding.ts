/**
 * The A2A v1.0 HTTP+JSON binding at /a2a, as far as the hub serves it today. The agent card must list at least
 * one interface (AgentCard.supported_interfaces is REQUIRED, and an empty list fails the SDKs' validation), and it
 * must not list one that answers 404. So every operation of the binding answers here, honestly:
 *   POST /a2a/message:send        a Message (no task) saying what the hub serves and where: the endpoint directory,
 *                                 the OpenAPI document, registration. A message naming a task gets TaskNotFound.
 *   GET  /a2a/tasks               an empty list: the hub runs no A2A tasks yet
 *   GET  /a2a/tasks/{id}          TaskNotFound; POST /a2a/tasks/{id}:cancel likewise
 *   POST /a2a/message:stream, GET /a2a/tasks/{id}:subscribe    UnsupportedOperation (the card says streaming: false)
 *   /a2a/tasks/{id}/pushNotificationConfigs[/{config}]         PushNotificationNotSupported (pushNotifications: false)
 *   GET  /a2a/extendedAgentCard   ExtendedAgentCardNotConfigured (extendedAgentCard: false)
 * Errors take the binding's shape (google.rpc.Status with an ErrorInfo whose reason the SDKs map to their error
 * classes), not the hub's, so A2A clients see typed errors. Task execution over A2A arrives with its own issue (on
 * the task queue); it replaces these handlers.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyError, FastifyReply } from 'fastify';
import { FastifyPluginAsyncZod, hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { queryInt } from '../../../core/identifiers';
import { AppError } from '../../../core/errors';
import type { Config } from '../../../core/config.node';

export const A2A_BASE_PATH = '/a2a';

/** The A2A error reasons this binding answers with, their HTTP status and google.rpc status name. */
const REASONS = {
  TASK_NOT_FOUND: { http: 404, status: 'NOT_FOUND', message: 'Task not found: this hub runs no A2A tasks yet' },
  UNSUPPORTED_OPERATION: { http: 400, status: 'FAILED_PRECONDITION', message: 'Streaming is not supported (the agent card says capabilities.streaming: false)' },
  PUSH_NOTIFICATION_NOT_SUPPORTED: { http: 400, status: 'FAILED_PRECONDITION', message: 'Push notifications are not supported (capabilities.pushNotifications: false)' },
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: { http: 400, status: 'FAILED_PRECONDITION', message: 'There is no extended agent card (capabilities.extendedAgentCard: false)' },
  INVALID_PARAMS: { http: 400, status: 'INVALID_ARGUMENT', message: 'Request malformed' }
} as const;
type Reason = keyof typeof REASONS;

const STATUS_NAME: Record<number, string> = { 400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 409: 'ABORTED', 413: 'RESOURCE_EXHAUSTED', 414: 'INVALID_ARGUMENT', 415: 'INVALID_ARGUMENT', 429: 'RESOURCE_EXHAUSTED', 503: 'UNAVAILABLE' };

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

function a2aError(reply: FastifyReply, httpStatus: number, message: string, reason?: string, statusName?: string): FastifyReply {
  const details = reason ? [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'a2a-protocol.org' }] : [];
  return reply.code(httpStatus).send({ error: { code: httpStatus, status: statusName ?? STATUS_NAME[httpStatus] ?? (httpStatus >= 500 ? 'INTERNAL' : 'UNKNOWN'), message, details } });
}

const refuse = (reply: FastifyReply, reason: Reason) => a2aError(reply, REASONS[reason].http, REASONS[reason].message, reason, REASONS[reason].status);

/** A2A Message (v1.0 JSON form): the fields the hub reads; everything else is allowed and ignored. */
const messageBody = z.looseObject({
  messageId: z.string().min(1).max(200),
  contextId: z.string().max(200).optional(),
  taskId: z.string().max(200).optional(),
  role: z.enum(['ROLE_USER', 'ROLE_AGENT', 'ROLE_UNSPECIFIED']),
  parts: z.array(z.looseObject({})).min(1).max(100)
});
const sendMessageRequest = z.looseObject({ tenant: z.string().max(200).optional(), message: messageBody });

const agentMessage = z.object({
  message: z.object({
    messageId: z.string(),
    contextId: z.string(),
    role: z.literal('ROLE_AGENT'),
    parts: z.array(z.union([z.object({ text: z.string() }), z.object({ data: z.record(z.string(), z.string()), mediaType: z.string() })]))
  })
});

const listTasksResponse = z.object({ tasks: z.array(z.never()), nextPageToken: z.string(), pageSize: z.number().int(), totalSize: z.number().int() });

const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, a2aErrorBody]));
const taskParams = z.object({ task: z.string().min(1).max(200).describe('a task id, optionally with the :cancel or :subscribe suffix') });
const configParams = z.object({ task: z.string().min(1).max(200), config: z.string().min(1).max(200) });

export const a2aBindingRoutes: FastifyPluginAsyncZod<{ config: Config }> = async (app, { config }) => {
  const base = config.publicUrl;
  const none = { auth: 'none' as const };

  // Inside this plugin every failure takes the binding's shape, so the SDKs can read it.
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(err) || err.validation) return a2aError(reply, 400, `Request malformed: ${err.message}`, 'INVALID_PARAMS');
    const status = err instanceof AppError ? err.status : (err.statusCode ?? 500);
    if (status >= 500) {
      request.log.error({ err }, 'request failed');
      return a2aError(reply, status, status === 503 ? 'Unavailable; retry later' : 'Internal error; quote the X-Trace header when reporting it');
    }
    return a2aError(reply, status, err.message);
  });

  app.post(
    `${A2A_BASE_PATH}/message::send`,
    { config: none, schema: { summary: 'A2A SendMessage: answers with a Message describing what the hub serves', body: sendMessageRequest, response: { 200: agentMessage, ...errors(400, 404, 413, 415, 500, 503) } } },
    async (request, reply) => {
      const { message } = request.body;
      if (message.taskId) return refuse(reply, 'TASK_NOT_FOUND');
      const links = {
        endpoint_summary: `${base}/a2a/endpoints/summary`,
        endpoint_directory: `${base}/a2a/endpoints`,
        openapi: `${base}/openapi.json`,
        register: `${base}/a2a/register`
      };
      return {
        message: {
          messageId: randomUUID(),
          contextId: message.contextId ?? randomUUID(),
          role: 'ROLE_AGENT' as const,
          parts: [
            {
              text:
                'This hub does not run A2A tasks yet. It serves federation access (node registration, heartbeat, review, the ' +
                'architecture directory tree), an append-only truth ledger and OAuth client credentials as a REST API: start ' +
                `with the endpoint summary at ${links.endpoint_summary}, or register a node with POST ${links.register}.`
            },
            { data: links, mediaType: 'application/json' }
          ]
        }
      };
    }
  );

  app.post(
    `${A2A_BASE_PATH}/message::stream`,
    { config: none, schema: { summary: 'A2A SendStreamingMessage: not supported (capabilities.streaming is false)', body: sendMessageRequest, response: errors(400, 413, 415, 500, 503) } },
    async (_request, reply) => refuse(reply, 'UNSUPPORTED_OPERATION')
  );

  app.get(
    `${A2A_BASE_PATH}/tasks`,
    {
      config: none,
      schema: {
        summary: 'A2A ListTasks: always empty (the hub runs no A2A tasks yet)',
        querystring: z.looseObject({ pageSize: queryInt(1, 100).default(50) }),
        response: { 200: listTasksResponse, ...errors(400, 500, 503) }
      }
    },
    async (request) => ({ tasks: [], nextPageToken: '', pageSize: request.query.pageSize, totalSize: 0 })
  );

  // GetTask is /tasks/{id} and SubscribeToTask /tasks/{id}:subscribe: one route, told apart by the suffix.
  app.get(
    `${A2A_BASE_PATH}/tasks/:task`,
    { config: none, schema: { summary: 'A2A GetTask (TaskNotFound: no A2A tasks yet) and SubscribeToTask (unsupported)', params: taskParams, response: errors(400, 404, 500, 503) } },
    async (request, reply) => refuse(reply, request.params.task.endsWith(':subscribe') ? 'UNSUPPORTED_OPERATION' : 'TASK_NOT_FOUND')
  );

  app.post(
    `${A2A_BASE_PATH}/tasks/:task`,
    { config: none, schema: { summary: 'A2A CancelTask (/tasks/{id}:cancel): TaskNotFound, no A2A tasks yet', params: taskParams, response: errors(400, 404, 413, 415, 500, 503) } },
    async (request, reply) => {
      if (!request.params.task.endsWith(':cancel')) return a2aError(reply, 404, `No route POST ${request.url.split('?')[0]}`);
      return refuse(reply, 'TASK_NOT_FOUND');
    }
  );

  const pushSummary = 'A2A push notification configs: not supported (capabilities.pushNotifications is false)';
  app.post(`${A2A_BASE_PATH}/tasks/:task/pushNotificationConfigs`, { config: none, schema: { summary: pushSummary, params: taskParams, response: errors(400, 413, 415, 500, 503) } }, async (_r, reply) =>
    refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
  );
  app.get(`${A2A_BASE_PATH}/tasks/:task/pushNotificationConfigs`, { config: none, schema: { summary: pushSummary, params: taskParams, response: errors(400, 500, 503) } }, async (_r, reply) =>
    refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
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
    { config: none, schema: { summary: 'A2A GetExtendedAgentCard: not configured (capabilities.extendedAgentCard is false)', response: errors(400, 500, 503) } },
    async (_r, reply) => refuse(reply, 'EXTENDED_AGENT_CARD_NOT_CONFIGURED')
  );
};
