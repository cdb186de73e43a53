/**
 * The A2A v1.0 binding's request and answer schemas (./a2a-binding.ts, ./a2a-jsonrpc.ts): the A2A Message and the
 * parts the hub reads, the Task as answered, the binding's error body, and the JSON-RPC 2.0 envelope.
 */
import { z } from 'zod';
import { sseEvent } from '../../response-docs';
import { queryInt } from '../../../core/identifiers';
import { A2A_STATES } from '../../../services/a2a/a2a-task';

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
export const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, a2aErrorBody]));

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
export const sendMessageRequest = z.looseObject({
  tenant: z.string().max(200).optional(),
  message: messageBody,
  configuration: z.looseObject({ returnImmediately: z.boolean().optional() }).optional()
});

export const a2aTask = z
  .looseObject({
    id: z.string(),
    contextId: z.string(),
    status: z.looseObject({ state: z.string(), timestamp: z.string() }),
    artifacts: z.array(z.looseObject({ artifactId: z.string() })),
    history: z.array(z.looseObject({})),
    metadata: z.looseObject({})
  })
  .describe('A2A Task');
export const sendMessageResponse = z.object({ task: a2aTask });
export const listTasksResponse = z.object({
  tasks: z.array(a2aTask),
  nextPageToken: z.string(),
  pageSize: z.number().int(),
  totalSize: z.number().int()
});
export const sseResponse = {
  200: {
    description:
      'SSE: each data line a StreamResponse ({ task } first, then { statusUpdate } and { artifactUpdate }), until a final state',
    content: { 'text/event-stream': { schema: sseEvent('a StreamResponse as JSON') } }
  }
};

export const taskParams = z.object({
  task: z.string().min(1).max(200).describe('a task id, optionally with the :cancel or :subscribe suffix')
});
export const configParams = z.object({ task: z.string().min(1).max(200), config: z.string().min(1).max(200) });

const A2A_STATE_FILTER = z.enum(A2A_STATES);
export const listTasksQuery = z.looseObject({
  pageSize: queryInt(1, 100).default(50),
  pageToken: z
    .string()
    .regex(/^\d{1,7}$/, 'the nextPageToken of the previous page')
    .optional(),
  contextId: z.string().min(1).max(200).optional(),
  status: A2A_STATE_FILTER.optional()
});

const rpcId = z.union([z.string().max(200), z.number(), z.null()]);
export const rpcRequest = z
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
export const rpcResponse = z
  .looseObject({
    jsonrpc: z.literal('2.0'),
    id: rpcId,
    result: z.unknown().optional(),
    error: z.looseObject({ code: z.number().int(), message: z.string() }).optional()
  })
  .describe('A JSON-RPC 2.0 response: result, or an error whose code names the A2A error');
export const rpcParams = {
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
