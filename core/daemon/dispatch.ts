/**
 * The zod schema of POST /dispatch (docs/daemon.md#dispatch): one task, or a DAG of at most DAG_MAX_TASKS tasks.
 * Route side only; the workflow uses the pure core/daemon/dag.ts.
 */
import { z } from 'zod';

export const DAG_MAX_TASKS = 50;
export const TASK_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const DAG_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

const taskId = z.string().regex(TASK_ID_PATTERN, 'letters, digits, _ and - (1-64)');
const modelId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/, 'a model id (letters, digits and . _ : / -, at most 128)');
const text = z.string().min(1).max(32_000);
export const messageSchema = z.strictObject({ role: z.enum(['system', 'user', 'assistant']), content: text });

const taskFields = {
  model: modelId,
  prompt: text.optional().describe('one user message; give prompt or messages, not both'),
  messages: z
    .array(messageSchema)
    .min(1)
    .max(50)
    .optional()
    .describe('chat messages; contents may quote a parent: {{<parent id>.output}}'),
  max_tokens: z.number().int().min(1).max(32_000).optional()
};

export const dagTaskSchema = z.strictObject({
  id: taskId,
  ...taskFields,
  depends_on: z.array(taskId).max(DAG_MAX_TASKS).default([])
});

const common = {
  dag_id: z
    .string()
    .regex(DAG_ID_PATTERN, 'letters, digits, _ and - (1-64)')
    .optional()
    .describe('default: a new dag_<random>'),
  wait: z.boolean().default(true).describe('false: answer 202 at once with the workflow id and a status URL')
};

export const dispatchBodySchema = z.union([
  z.strictObject({ ...common, tasks: z.array(dagTaskSchema).min(1).max(DAG_MAX_TASKS) }).describe('A DAG of tasks'),
  z
    .strictObject({ ...common, id: taskId.optional().describe('default: task'), ...taskFields })
    .describe('A single task')
]);

export type DispatchBody = z.infer<typeof dispatchBodySchema>;
export type DagTaskInput = z.infer<typeof dagTaskSchema>;
export type ChatMessage = z.infer<typeof messageSchema>;
