/**
 * POST /a2a/jsonrpc: the JSON-RPC 2.0 binding of the A2A operations ./a2a-binding.ts serves over HTTP+JSON (methods
 * SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask; params and results as there;
 * the streaming methods answer SSE whose data lines are JSON-RPC responses). Every error is a JSON-RPC error object
 * with HTTP 200 (./a2a-replies.ts rpcError): a body that is not JSON -32700 (id null), a body that is not a JSON-RPC
 * 2.0 request (no "jsonrpc": "2.0", no method, a batch) -32600 (with its id when one can be read, else null), an
 * unknown method -32601, malformed params -32602, an unsupported A2A-Version -32009, a body of another media type
 * -32005 (as the reference SDKs answer it), and A2A's errors -32001 … -32007. Authentication (401, 403) and a body
 * too large (413) are refused before any JSON-RPC is read, over HTTP in the binding's shape.
 * Registered inside the binding's plugin (under its base path), so its error handler and OAuth scope check apply.
 */
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { sseEvent } from '../../response-docs';
import type { A2aRefusal, A2aTasks } from '../../../services/a2a/a2a-tasks';
import { toA2aTask } from '../../../services/a2a/a2a-task';
import {
  errors,
  protoJsonNames,
  rpcParams,
  rpcRequest,
  rpcResponse,
  sendMessageRequest,
  versionHeader
} from './a2a-binding.schema';
import {
  errorInfo,
  EXTENDED_CARD_REFUSAL,
  JSONRPC_CODE,
  JSONRPC_INVALID_REQUEST,
  JSONRPC_METHOD_NOT_FOUND,
  REASONS,
  rpcError,
  type TaskStreamer
} from './a2a-replies';
import { checkVersion } from './a2a-version-check';

type Deps = {
  a2a: A2aTasks;
  stream: TaskStreamer;
  submitterOf: (request: FastifyRequest) => string;
  clientGone: (request: FastifyRequest) => () => boolean;
  idempotencyKeyOf: (request: FastifyRequest) => string | undefined;
};

type RpcId = string | number | null;

/** The request's id if it can be read (a string, a number or null), else null. */
function idOf(body: unknown): RpcId {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('id' in body)) return null;
  const { id } = body as { id: unknown };
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

export const a2aJsonRpcRoutes: FastifyPluginAsyncZod<Deps> = async (
  app,
  { a2a, stream, submitterOf, clientGone, idempotencyKeyOf }
) => {
  // Served at the card's URL and with a trailing slash: clients that take the card's URL as a base and post to "/"
  // (the conformance kit's JSON-RPC client, httpx) reach `<url>/`. Documented once.
  for (const path of ['/jsonrpc', '/jsonrpc/'])
    app.post(
      path,
      {
        config: { auth: 'node_or_homologous', authAlso: ['oauth'] },
        // The schemas document the route; the handler checks the envelope and the version itself, so that every
        // failure is a JSON-RPC error carrying the request's id.
        attachValidation: true,
        schema: {
          hide: path.endsWith('/'),
          summary:
            'A2A JSON-RPC binding: SendMessage, SendStreamingMessage (SSE), GetTask, ListTasks, CancelTask, SubscribeToTask (SSE)',
          headers: versionHeader,
          body: rpcRequest,
          response: {
            200: {
              description:
                'A JSON-RPC response (errors too: -32700 parse error, -32600 invalid request, -32601, -32602, -32009 version not supported, A2A errors -32001 … -32007); for SendStreamingMessage and SubscribeToTask an SSE stream whose data lines are JSON-RPC responses carrying StreamResponses',
              content: {
                'application/json': { schema: rpcResponse },
                'text/event-stream': { schema: sseEvent('a JSON-RPC response carrying a StreamResponse') }
              }
            },
            ...errors(400, 401, 403, 413, 500, 503)
          }
        }
      },
      async (request, reply) => {
        const envelope = rpcRequest.safeParse(request.body);
        if (!envelope.success)
          return rpcError(
            reply,
            idOf(request.body),
            JSONRPC_INVALID_REQUEST,
            'Invalid Request: the body must be one JSON-RPC 2.0 request object ({"jsonrpc": "2.0", "method": …, "id": …, "params"?: {…}})'
          );
        const { method, params: rawParams = {} } = envelope.data;
        const id = envelope.data.id ?? null;
        const params = protoJsonNames(rawParams);
        const submitter = submitterOf(request);
        const send = (body: z.infer<typeof rpcResponse>) => reply.code(200).type('application/json').send(body);
        const result = (value: unknown) => send({ jsonrpc: '2.0', id, result: value });
        const fail = (reason: A2aRefusal, message?: string, metadata?: Record<string, string>) =>
          rpcError(reply, id, JSONRPC_CODE[reason], message ?? REASONS[reason].message, [errorInfo(reason, metadata)]);
        const version = checkVersion(request);
        if (!version.ok) return fail('VERSION_NOT_SUPPORTED', version.message, version.metadata);
        const parse = <T extends z.ZodType>(schema: T): z.infer<T> | null => {
          const parsed = schema.safeParse(params);
          return parsed.success ? parsed.data : null;
        };
        const malformed = () => fail('INVALID_PARAMS', `Invalid params for ${method}`);
        const wrap = (event: unknown) => ({ jsonrpc: '2.0', id, result: event });

        switch (method) {
          case 'SendMessage': {
            const body = parse(sendMessageRequest);
            if (!body) return malformed();
            const out = await a2a.send(submitter, body, () => clientGone(request), idempotencyKeyOf(request));
            return out.ok ? result(out.answer) : fail(out.reason, out.message);
          }
          case 'SendStreamingMessage': {
            const body = parse(sendMessageRequest);
            if (!body) return malformed();
            const out = await a2a.queue(submitter, body.message, idempotencyKeyOf(request));
            if (!out.ok) return fail(out.reason, out.message);
            await stream(request, reply, out.task, { wrap, untilInterrupted: true });
            return reply;
          }
          case 'GetTask':
          case 'CancelTask':
          case 'SubscribeToTask': {
            const body = parse(rpcParams.taskId);
            if (!body) return malformed();
            if (method === 'CancelTask') {
              const out = await a2a.cancel(submitter, body.id);
              return out.ok ? result(out.task) : fail(out.reason, out.message);
            }
            const out =
              method === 'GetTask' ? await a2a.get(submitter, body.id) : await a2a.subscribe(submitter, body.id);
            if (!out.ok) return fail(out.reason, out.message);
            if (method === 'GetTask') return result(toA2aTask(out.task, { historyLength: body.historyLength }));
            await stream(request, reply, out.task, { wrap });
            return reply;
          }
          case 'ListTasks': {
            const body = parse(rpcParams.list);
            if (!body) return malformed();
            return result(await a2a.list(submitter, { ...body, pageSize: body.pageSize ?? 50 }));
          }
          case 'CreateTaskPushNotificationConfig':
          case 'GetTaskPushNotificationConfig':
          case 'ListTaskPushNotificationConfigs':
          case 'DeleteTaskPushNotificationConfig':
            return fail('PUSH_NOTIFICATION_NOT_SUPPORTED');
          case 'GetExtendedAgentCard':
            return fail('UNSUPPORTED_OPERATION', EXTENDED_CARD_REFUSAL);
          default:
            return rpcError(reply, id, JSONRPC_METHOD_NOT_FOUND, `Method not found: ${method}`);
        }
      }
    );
};
