/** Deployment arbitration: the hub's own nginx, the releases it serves, arbitrators, and the deploy port pool. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { port } from './values.node';

export const deploySettings = defineCapability({
  name: 'deploy',
  title: 'Deployment arbitration',
  page: 'docs/deploy.md',
  readBy: ['api'],
  schema: z.object({
    DEPLOY_WEB: z
      .enum(['on', 'off'])
      .default('on')
      .describe('`off`: no nginx is started and deploys answer 503.')
      .meta(setting({ readBy: ['api', 'launcher'] })),
    DEPLOY_WEB_PORT: port
      .default(8090)
      .describe("The port of the hub's nginx serving deploy targets (on HOST).")
      .meta(setting({ readBy: ['api', 'worker', 'launcher'] })),
    NGINX_BIN: z
      .string()
      .min(1)
      .default('/usr/sbin/nginx')
      .describe("The nginx binary (Debian's package).")
      .meta(setting({ readBy: ['api', 'worker', 'launcher'] })),
    DEPLOY_KEEP_RELEASES: z.coerce
      .number()
      .int()
      .min(1)
      .max(100)
      .default(5)
      .describe('Releases kept per target (the current one always).'),
    DEPLOY_ARBITRATOR_LEVEL: z.coerce
      .number()
      .int()
      .min(0)
      .max(5)
      .default(4)
      .describe('The autonomy level at or above which a registered DID is an arbitrator (did_register, did_revoke).'),
    PORT_POOL: z
      .string()
      .regex(/^\d{1,5}-\d{1,5}$/, 'first-last, e.g. 18000-18999')
      .default('18000-18999')
      .transform((v) => {
        const [first, last] = v.split('-').map(Number) as [number, number];
        return { first, last };
      })
      .refine(
        (r) => r.first >= 1 && r.last <= 65535 && r.first <= r.last && r.last - r.first < 10_000,
        'PORT_POOL: first <= last, within 1-65535, at most 10,000 ports'
      )
      .describe('The deploy port pool handed out to deploy targets.')
      .meta(setting({ allowed: '`first-last` within 1-65535, at most 10,000 ports' }))
  })
});
export type DeployConfig = z.infer<typeof deploySettings.schema>;
