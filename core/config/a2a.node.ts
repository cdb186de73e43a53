/** The A2A binding and work distribution: task claims and their leases, blocking sends and SSE streams. */
import { z } from 'zod';
import { defineCapability } from './capability';

export const a2aSettings = defineCapability({
  name: 'a2a',
  title: 'A2A binding and work distribution',
  page: 'docs/a2a.md',
  readBy: ['api'],
  schema: z.object({
    TASK_LEASE_S: z.coerce
      .number()
      .int()
      .min(1)
      .max(86_400)
      .default(300)
      .describe("A task claim's lease in seconds; each progress call extends it."),
    TASK_MAX_ATTEMPTS: z.coerce
      .number()
      .int()
      .min(1)
      .max(100)
      .default(3)
      .describe('Claims a task gets; a lease lapsing on the last one fails the task.'),
    A2A_SEND_WAIT_S: z.coerce
      .number()
      .int()
      .min(0)
      .max(300)
      .default(30)
      .describe('How long a blocking A2A SendMessage waits for a final state.'),
    A2A_STREAM_MAX_S: z.coerce
      .number()
      .int()
      .min(1)
      .max(86_400)
      .default(900)
      .describe('How long one A2A SSE stream (message:stream, tasks/{id}:subscribe) stays open.')
  })
});
export type A2aConfig = z.infer<typeof a2aSettings.schema>;
