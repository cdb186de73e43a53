/**
 * POST /a2a/jsonrpc: the JSON-RPC 2.0 binding of the A2A operations ./a2a-binding.ts serves over HTTP+JSON (methods
 * SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask; params and results as there;
 * the streaming methods answer SSE whose data lines are JSON-RPC responses). A2A errors are JSON-RPC errors
 * (-32001 TaskNotFound … -32007) with HTTP 200; an envelope that is not JSON-RPC 2.0 is a 400 in the binding's shape.
 * Registered inside the binding's plugin (under its base path), so its error handler and OAuth scope check apply.
 */
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { sseEvent } from '../../response-docs';
import type { A2aRefusal, A2aTasks } from '../../../services/a2a/a2a-tasks';
import { toA2aTask } from '../../../services/a2a/a2a-task';
import { errors, rpcParams, rpcRequest, rpcResponse, sendMessageRequest } from './a2a-binding.schema';
import { errorInfo, JSONRPC_CODE, REASONS, type TaskStreamer } from './a2a-replies';

const METHOD_NOT_FOUND = -32601;

type Deps = {
  a2a: A2aTasks;
  stream: TaskStreamer;
  submitterOf: (request: FastifyRequest) => string;
  clientGone: (request: FastifyRequest) => () => boolean;
};

export const a2aJsonRpcRoutes: FastifyPluginAsyncZod<Deps> = async (app, { a2a, stream, submitterOf, clientGone }) => {
  app.post(
    '/jsonrpc',
    {
      config: { auth: 'node_or_homologous', authAlso: ['oauth'] },
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
      const submitter = submitterOf(request);
      const send = (body: z.infer<typeof rpcResponse>) => reply.type('application/json').send(body);
      const result = (value: unknown) => send({ jsonrpc: '2.0', id, result: value });
      const fail = (reason: A2aRefusal, message?: string) =>
        send({
          jsonrpc: '2.0',
          id,
          error: { code: JSONRPC_CODE[reason], message: message ?? REASONS[reason].message, data: [errorInfo(reason)] }
        });
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
          const out = await a2a.send(submitter, body, () => clientGone(request));
          return out.ok ? result({ task: out.task }) : fail(out.reason, out.message);
        }
        case 'SendStreamingMessage': {
          const body = parse(sendMessageRequest);
          if (!body) return malformed();
          const out = await a2a.queue(submitter, body.message);
          if (!out.ok) return fail(out.reason, out.message);
          await stream(request, reply, out.task, wrap);
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
          if (method === 'GetTask') return result(toA2aTask(out.task, body.historyLength));
          await stream(request, reply, out.task, wrap);
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
};
