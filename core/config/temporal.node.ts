/** Where Temporal is (or the embedded dev server's ports), the namespace, and the task queues a worker polls. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { csv, port } from './values.node';

export const temporalSettings = defineCapability({
  name: 'temporal',
  title: 'Temporal',
  page: null,
  readBy: ['api', 'worker', 'launcher'],
  schema: z.object({
    TEMPORAL_ADDRESS: z
      .string()
      .regex(/^[^\s:]+:\d+$/, 'must be host:port')
      .optional()
      .describe(
        'A Temporal frontend instead of the embedded dev server (production sets it; the worker registers the custom search attributes there if they are missing); unset: the dev server on loopback.'
      )
      .meta(setting({ allowed: 'host:port' })),
    TEMPORAL_NAMESPACE: z.string().min(1).default('default').describe('The Temporal namespace.'),
    TEMPORAL_TASK_QUEUE: z
      .string()
      .min(1)
      .default('zhongshu-hub')
      .describe('The core task queue; the models and commands queues derive their names from it.')
      .meta(setting({ readBy: ['api', 'worker'] })),
    WORKER_TASK_QUEUES: csv
      .pipe(z.array(z.enum(['core', 'models', 'commands'])).min(1))
      .default(['core', 'models', 'commands'])
      .describe(
        'The task queue kinds this worker process polls (contracts/task-queues.ts): all by default; e.g. `models` alone for a process of its own.'
      )
      .meta(setting({ readBy: ['worker'], allowed: 'comma-separated, at least one of: core, models, commands' })),
    TEMPORAL_PORT: port.default(7233).describe('The embedded dev server port (loopback).'),
    TEMPORAL_UI_PORT: port
      .default(8233)
      .describe('The embedded dev server web UI port (loopback).')
      .meta(setting({ readBy: ['launcher'] })),
    WORKFLOW_BUNDLE_PATH: z
      .string()
      .min(1)
      .optional()
      .describe('A prebuilt workflow bundle (the image builds one); unset: the worker bundles the workflows at start.')
      .meta(setting({ readBy: ['worker'] }))
  })
});
export type TemporalConfig = z.infer<typeof temporalSettings.schema>;
