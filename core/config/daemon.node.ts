/**
 * The local daemon (a loopback listener of the API, its model calls run by the worker): the order root's version,
 * the models it may call, parallelism, the circuit breaker, the per-call timeout, and the audit file.
 */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { csv, flag } from './values.node';

export const daemonSettings = defineCapability({
  name: 'daemon',
  title: 'Local daemon',
  page: 'docs/daemon.md',
  readBy: ['api'],
  schema: z.object({
    DAEMON_PROTOCOL_VERSION: z.coerce
      .number()
      .int()
      .positive()
      .default(1)
      .describe("The version the daemon's order root must carry.")
      .meta(setting({ readBy: ['api', 'worker'] })),
    DAEMON_MODEL_WHITELIST: csv
      .optional()
      .describe('Model ids the daemon may call; others are 403. Unset: the configured models marked free_tier.')
      .meta(setting({ readBy: ['api', 'worker'], allowed: 'comma-separated model ids' })),
    DAEMON_MAX_PARALLEL: z.coerce
      .number()
      .int()
      .min(1)
      .max(64)
      .default(4)
      .describe('DAG tasks of one dispatch running at once.'),
    DAEMON_BREAKER_THRESHOLD: z.coerce
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(3)
      .describe("Consecutive failed model calls that open the daemon's circuit breaker."),
    DAEMON_BREAKER_COOLDOWN_S: z.coerce
      .number()
      .int()
      .min(1)
      .max(86_400)
      .default(30)
      .describe("The cool-down before the daemon's open breaker lets a half-open probe through."),
    DAEMON_CALL_TIMEOUT_S: z.coerce
      .number()
      .int()
      .min(1)
      .max(600)
      .default(60)
      .describe("One daemon model call's time limit in seconds."),
    DAEMON_AUDIT_CLEARTEXT: flag('false')
      .describe('`true`: prompts and outputs enter DATA_DIR/daemon_audit.jsonl in clear too (their hashes always).')
      .meta(setting({ readBy: ['worker'] }))
  })
});
export type DaemonConfig = z.infer<typeof daemonSettings.schema>;
