/**
 * The A2A v1.0 binding's request and answer schemas (./a2a-binding.ts, ./a2a-jsonrpc.ts): the A2A Message and the
 * parts the hub reads, the Task as answered, the binding's error body, and the JSON-RPC 2.0 envelope.
 */
import { z } from 'zod';
import { sseEvent } from '../../response-docs';
import { queryInt } from '../../../core/identifiers';
import { A2A_STATES, A2A_STATES_NEVER_HELD } from '../../../services/a2a/a2a-task';
import { MESSAGE_MEMBERS, PART_MEMBERS } from '../../../services/a2a/a2a-message';
import { A2A_VERSION_HEADER, A2A_VERSIONS } from '../../../services/a2a/a2a-version';

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
const PART_KINDS = ['text', 'data', 'raw', 'url'];

/** Routing a message to nodes: what they must be able to do, the task type, the priority. */
const routingMetadata = z.looseObject({
  required_capabilities: z.array(z.string().min(1).max(80)).max(32).optional(),
  task_type: z
    .string()
    .regex(/^[a-z][a-z0-9_.-]{0,63}$/, 'a task type such as inference.chat')
    .optional(),
  priority: z.number().int().min(0).max(9).optional()
});

/** A Struct (a JSON object of any members): metadata. */
const struct = z.record(z.string(), z.unknown());

/**
 * An A2A Part (a2a.proto Part, JSON names): one of text, raw (base64), url or data, with its metadata, filename and
 * media type. Other members are dropped (services/a2a/a2a-message.ts). A part with none of the four is malformed
 * (400); a raw or url part, or a media type other than text/plain and application/json, is well formed and answered
 * ContentTypeNotSupported.
 */
export const a2aPart = z
  .object({
    text: z.string().optional(),
    raw: z.string().optional(),
    url: z.string().optional(),
    data: z.unknown().optional(),
    metadata: struct.optional(),
    filename: z.string().max(1000).optional(),
    mediaType: z.string().max(200).optional()
  } satisfies Record<(typeof PART_MEMBERS)[number], z.ZodType>)
  .refine((p) => PART_KINDS.some((member) => member in p), `a part has one of ${PART_KINDS.join(', ')}`)
  .meta({ anyOf: PART_KINDS.map((member) => ({ required: [member] })) });

/**
 * An A2A Message (v1.0 JSON form): its documented members only; others are dropped, neither stored nor served back
 * in Task.history (services/a2a/a2a-message.ts).
 */
const messageBody = z.object({
  messageId: z.string().min(1).max(200),
  contextId: z.string().max(200).optional(),
  taskId: z.string().max(200).optional(),
  role: z.enum(['ROLE_USER', 'ROLE_AGENT', 'ROLE_UNSPECIFIED']),
  parts: z.array(a2aPart).min(1).max(100),
  metadata: routingMetadata.optional(),
  extensions: z.array(z.string().max(2000)).max(100).optional(),
  referenceTaskIds: z.array(z.string().max(200)).max(100).optional()
} satisfies Record<(typeof MESSAGE_MEMBERS)[number], z.ZodType>);
export const sendMessageRequest = z.looseObject({
  tenant: z.string().max(200).optional(),
  message: messageBody,
  configuration: z
    .looseObject({
      returnImmediately: z.boolean().optional(),
      historyLength: z.number().int().min(0).max(1000).optional()
    })
    .optional()
});

export const a2aTask = z
  .looseObject({
    id: z.string(),
    contextId: z.string(),
    status: z.looseObject({ state: z.string(), timestamp: z.string() }),
    // Left out of a ListTasks answer unless it asked for includeArtifacts.
    artifacts: z.array(z.looseObject({ artifactId: z.string() })).optional(),
    history: z.array(z.looseObject({})),
    metadata: z.looseObject({})
  })
  .describe('A2A Task');
/** An agent's Message (a node's direct answer). */
const agentMessage = z.looseObject({ messageId: z.string(), role: z.string(), parts: z.array(z.looseObject({})) });
export const sendMessageResponse = z.union([
  z.object({ task: a2aTask }),
  z.object({ message: agentMessage }).describe("the node's direct answer: a Message instead of a task")
]);
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

/**
 * ListTasks' status filter: any A2A v1.0 task state (those the queue never holds match nothing), or the SDKs' enum
 * unset value (TASK_STATE_UNSPECIFIED, or UNRECOGNIZED from @a2a-js/sdk) for no filter.
 */
const A2A_STATE_FILTER = z.enum([...A2A_STATES, ...A2A_STATES_NEVER_HELD, 'TASK_STATE_UNSPECIFIED', 'UNRECOGNIZED']);
const pageToken = z
  .string()
  .regex(/^\d{0,7}$/, 'the nextPageToken of the previous page')
  .optional();
const statusTimestampAfter = z.iso
  .datetime({ offset: true })
  .optional()
  .describe('only tasks whose status timestamp is at or after this time (RFC 3339)');

/**
 * ProtoJSON parsers accept a field's proto name beside its JSON name (a2a.proto ListTasksRequest, GetTaskRequest):
 * these requests' members in either spelling. `protoJsonNames` renames the proto names to the JSON names (the JSON
 * name wins when both are sent).
 */
const PROTO_NAMES: Record<string, string> = {
  context_id: 'contextId',
  page_size: 'pageSize',
  page_token: 'pageToken',
  history_length: 'historyLength',
  include_artifacts: 'includeArtifacts',
  status_timestamp_after: 'statusTimestampAfter'
};
export function protoJsonNames<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const [proto, json] of Object.entries(PROTO_NAMES))
    if (proto in out) {
      if (!(json in out)) out[json] = out[proto];
      delete out[proto];
    }
  return out as T;
}

/** ListTasks over HTTP+JSON: query parameters (their proto names too: protoJsonNames). */
export const listTasksQuery = z.looseObject({
  pageSize: queryInt(1, 100).default(50),
  pageToken,
  contextId: z.string().min(1).max(200).optional(),
  status: A2A_STATE_FILTER.optional(),
  historyLength: queryInt(0, 1000).optional(),
  includeArtifacts: z
    .enum(['true', 'false'])
    .optional()
    .describe('whether each task carries its artifacts (false, the default: the member is left out)'),
  statusTimestampAfter
});
export const getTaskQuery = z.looseObject({ historyLength: queryInt(0, 1000).optional() });

/**
 * The A2A-Version service parameter, documented on every operation of the binding (services/a2a/a2a-version.ts):
 * a hook reads it (or the query parameter of that name) before validation and refuses an unsupported version with
 * VersionNotSupportedError; the value is then the version served.
 */
export const versionHeader = z.looseObject({
  [A2A_VERSION_HEADER.toLowerCase()]: z
    .enum(A2A_VERSIONS)
    .describe(
      'The A2A protocol version the client speaks (Major.Minor); missing means 0.3, which is refused with VersionNotSupportedError. May be sent as the query parameter A2A-Version instead.'
    ),
  'idempotency-key': z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,128}$/, '1-128 characters of letters, digits and _ . : -')
    .optional()
    .describe('SendMessage: a retry with the same key returns the task the first send queued')
});

/** A JSON-RPC request id the binding reads and echoes (one it cannot read is answered with id null). */
export const rpcId = z.union([z.string().max(200), z.number(), z.null()]);
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
/** JSON-RPC params (their proto names too: protoJsonNames). */
export const rpcParams = {
  taskId: z.looseObject({ id: z.string().min(1).max(200), historyLength: z.number().int().min(0).optional() }),
  list: z.looseObject({
    pageSize: z.number().int().min(1).max(100).optional(),
    pageToken,
    contextId: z.string().min(1).max(200).optional(),
    status: A2A_STATE_FILTER.optional(),
    historyLength: z.number().int().min(0).optional(),
    includeArtifacts: z.boolean().optional(),
    statusTimestampAfter
  })
};
