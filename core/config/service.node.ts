/** The hub itself: its files, its DID, the administrator token, and what it logs. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const serviceSettings = defineCapability({
  name: 'service',
  title: 'The hub: files, identity, logs',
  page: null,
  readBy: ['api', 'worker', 'launcher'],
  schema: z.object({
    LOG_LEVEL: z.enum(LOG_LEVELS).default('info').describe('The pino level of every process.'),
    LOG_FORMAT: z
      .enum(['json', 'pretty'])
      .optional()
      .describe(
        'How processes log: `json` (one pino object a line, for collectors) or `pretty` (one readable line an event); unset: pretty at a terminal, JSON otherwise. The launcher reads its children as JSON and formats them at its terminal.'
      ),
    ZHONGSHU_INSTALL_PACKAGES: z
      .enum(['0', '1'])
      .default('1')
      .describe(
        '`1`: `npm start` installs the Debian packages the service runs (PostgreSQL, nginx) where missing, or names the one command to run (exit 77) when this user may not; `0`: it reports them and installs nothing (without PostgreSQL the embedded stack then does not start: exit 69).'
      )
      .meta(setting({ readBy: ['launcher'] })),
    DATA_DIR: z
      .string()
      .min(1)
      .default('./.data')
      .describe(
        "The embedded databases, the hub's keys, the admin token, pid files, the daemon's audit file and the deploy releases (made absolute at start)."
      )
      .meta(setting({ readBy: ['api', 'worker', 'launcher', 'tools'] })),
    ADMIN_TOKEN: z
      .string()
      .min(24, 'must be at least 24 characters')
      .optional()
      .describe(
        'The administrator bearer token for /admin; unset: one is generated at DATA_DIR/admin-token on the first start.'
      )
      .meta(setting({ readBy: ['api', 'launcher', 'tools'] })),
    SERVICE_DID: z
      .string()
      .regex(/^did:[a-z0-9]+:.+$/, 'must be a DID such as did:zhongshu:hub')
      .default('did:zhongshu:hub')
      .describe("The hub's own DID (status, its ledger records, the commercial gateway's X-DID header).")
      .meta(setting({ readBy: ['api', 'worker'], allowed: 'a DID, e.g. did:example:hub' }))
  })
});
export type ServiceConfig = z.infer<typeof serviceSettings.schema>;
