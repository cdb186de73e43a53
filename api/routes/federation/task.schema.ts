/** A federation task as the API shows it (services/federation/federation-tasks.ts publicTask): tasks.ts, work.ts. */
import { z } from 'zod';
import { rawJsonSchema } from '../../../core/raw-json';
import { TASK_STATES } from '../../../core/federation/vocabulary';

export const taskIdSchema = z.string().regex(/^task_[a-f0-9]{24}$/, 'a task id such as task_0123456789abcdef01234567');

export const taskSchema = z.object({
  task_id: z.string(),
  type: z.string(),
  payload: rawJsonSchema('the payload as submitted, in canonical JSON'),
  history: z
    .array(rawJsonSchema('an A2A Message, in canonical JSON'))
    .describe(
      "the conversation after the payload's message, oldest first: the node's questions (input-required) and the submitter's answers"
    ),
  required_capabilities: z.array(z.string()),
  priority: z.number().int(),
  state: z.enum(TASK_STATES),
  submitted_by: z.string().describe('the principal id that submitted it'),
  created_at: z.string(),
  updated_at: z.string(),
  claimed_by: z.string().nullable(),
  lease_expires_at: z.string().nullable(),
  attempts: z.number().int(),
  result: rawJsonSchema('the result the worker reported, in canonical JSON', {}).nullable(),
  error: z.string().nullable(),
  claimed_at: z.string().nullable().describe('when the current (or last) claim began'),
  finished_at: z.string().nullable(),
  progress: z.string().nullable().describe("the claiming node's last progress note"),
  context_id: z.string().nullable().describe('the A2A context, for tasks sent as A2A messages')
});
