/** The listeners: where each binds, the URLs clients see, how many API processes share them, and request limits. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { port, proxyList } from './values.node';

export const listenerSettings = defineCapability({
  name: 'listeners',
  title: 'Listeners and requests',
  page: null,
  readBy: ['api'],
  schema: z.object({
    HOST: z
      .string()
      .min(1)
      .default('0.0.0.0')
      .describe(
        'Bind address of every listener except the memory gateway (MEMORY_HOST) and the daemon (always 127.0.0.1); the hub nginx serving deploy targets binds here too.'
      )
      .meta(setting({ readBy: ['api', 'worker', 'launcher'] })),
    PORT: port
      .default(8080)
      .describe('The main listener: everything public (federation, truth ledger, OAuth, administration, /docs).')
      .meta(setting({ readBy: ['api', 'launcher', 'tools'] })),
    BACKUP_PORT: port.default(8081).describe('The backup listener: the truth write and the short status form.'),
    HUB_PORT: port
      .default(9001)
      .describe('The hub gateway listener: task submission (POST /a2a/task, GET /a2a/task/:id).'),
    COMMERCIAL_PORT: port.default(9099).describe('The commercial gateway listener (under /api/v1).'),
    MEMORY_PORT: port.default(9120).describe('The memory gateway listener, which the commercial gateway proxies to.'),
    DAEMON_PORT: port.default(9123).describe('The local daemon listener, bound to 127.0.0.1 whatever HOST says.'),
    MEMORY_HOST: z
      .string()
      .min(1)
      .default('127.0.0.1')
      .describe('Bind address of the memory gateway (the commercial gateway reaches it on loopback).'),
    PUBLIC_URL: z
      .url()
      .optional()
      .describe('Base URL clients see (agent card, OAuth issuer, endpoint directory); unset: http://localhost:$PORT.')
      .meta(setting({ readBy: ['api', 'launcher', 'tools'] })),
    HUB_PUBLIC_URL: z
      .url()
      .optional()
      .describe('Base URL of the hub listener in the endpoint directory; unset: http://localhost:$HUB_PORT.'),
    API_PROCESSES: z.coerce
      .number()
      .int()
      .min(1)
      .max(64)
      .default(1)
      .describe(
        "API processes (Node's cluster module; they share every listener's port). With more than 1 the entry process is a primary: it creates the signing keys, the admin token, the indexes and the directory tree's first version once, then forks; a dead API process is restarted after 0.5-8 s (after 5 restarts within 120 s the primary exits and the launcher's supervisor restarts the whole API)."
      ),
    JSON_MAX_DEPTH: z.coerce
      .number()
      .int()
      .min(8)
      .max(512)
      .default(64)
      .describe(
        'Deepest nesting of any JSON body (objects and arrays; the body itself is level 1); deeper gives 400 json_too_deep.'
      ),
    TRUSTED_PROXIES: proxyList
      .default([])
      .describe(
        'Proxies (a load balancer, its network) whose X-Forwarded-For names the client for the per-address request limits (REGISTER_RATE_LIMIT_PER_MIN): the right-most entry that is not a trusted proxy; empty: the connecting peer is the client.'
      )
      .meta(setting({ allowed: 'comma-separated IP addresses and CIDR ranges (not /0)' }))
  })
});
export type ListenerConfig = z.infer<typeof listenerSettings.schema>;
