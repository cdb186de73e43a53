/** The ledger as a C2SP transparency log: the checkpoint origin (also the name of the checkpoint's signing key). */
import { z } from 'zod';
import { defineCapability, setting } from './capability';

export const tlogSettings = defineCapability({
  name: 'tlog',
  title: 'Transparency log (C2SP checkpoints and tiles)',
  page: 'docs/transparency.md',
  readBy: ['api'],
  schema: z.object({
    TLOG_ORIGIN: z
      .string()
      .max(256)
      .regex(/^[^\s+]+$/, 'must have no whitespace and no "+"')
      .refine((s) => !/^[a-z][a-z0-9+.-]*:\/\//i.test(s), 'must have no scheme (C2SP tlog-checkpoint)')
      .optional()
      .describe(
        "The checkpoint origin line and the name of the checkpoint's signing key (GET /tlog/checkpoint, /tlog/verifier-key); unset: PUBLIC_URL's host and path without the scheme, followed by /tlog (e.g. localhost:8080/tlog). Every replica of one hub must use the same; changing it starts a new log for verifiers."
      )
      .meta(setting({ allowed: 'a URL prefix without scheme, no whitespace or "+"' }))
  })
});
export type TlogConfig = z.infer<typeof tlogSettings.schema>;
