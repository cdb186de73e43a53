/**
 * Where Temporal is (or the embedded dev server's ports), how to reach it (TLS, client certificate, API key), the
 * namespace, and the task queues a worker polls.
 */
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
    TEMPORAL_TLS: z
      .enum(['off', 'on'])
      .default('off')
      .describe(
        "TLS to the Temporal frontend (TEMPORAL_ADDRESS): `on` verifies its certificate with the system's CAs, or with TEMPORAL_TLS_CA_FILE. Any TEMPORAL_TLS_*_FILE turns it on. A Temporal Cloud namespace needs it."
      )
      .meta(setting({ readBy: ['api', 'worker'] })),
    TEMPORAL_TLS_CA_FILE: z
      .string()
      .min(1)
      .optional()
      .describe(
        "A PEM file of the CA certificates the frontend's certificate is verified with (a self-hosted cluster's own CA); unset: the system's CAs."
      )
      .meta(setting({ readBy: ['api', 'worker'], allowed: 'a readable file' })),
    TEMPORAL_TLS_CERT_FILE: z
      .string()
      .min(1)
      .optional()
      .describe(
        "A PEM file of this process's client certificate, for mutual TLS (a cluster that requires client certificates, or a Temporal Cloud namespace with mTLS); with TEMPORAL_TLS_KEY_FILE."
      )
      .meta(setting({ readBy: ['api', 'worker'], allowed: 'a readable file' })),
    TEMPORAL_TLS_KEY_FILE: z
      .string()
      .min(1)
      .optional()
      .describe("A PEM file of the client certificate's private key (readable by the service's user only).")
      .meta(setting({ readBy: ['api', 'worker'], allowed: 'a readable file' })),
    TEMPORAL_TLS_SERVER_NAME: z
      .string()
      .min(1)
      .optional()
      .describe(
        "The name the frontend's certificate must carry when it is not TEMPORAL_ADDRESS's host (e.g. a balancer's address in front of the cluster)."
      )
      .meta(setting({ readBy: ['api', 'worker'] })),
    TEMPORAL_API_KEY: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Sent as `Authorization: Bearer <key>` on every call to Temporal: a Temporal Cloud API key, or a JWT for a self-hosted cluster's authorizer. A secret: from the environment only, never logged."
      )
      .meta(setting({ readBy: ['api', 'worker'] })),
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
