/** The truth ledger: write quotas and limits, high-risk approval, and the one writer across API replicas. */
import { z } from 'zod';
import { defineCapability, setting } from './capability';
import { csv, positiveSeconds } from './values.node';

export const ledgerSettings = defineCapability({
  name: 'ledger',
  title: 'Truth ledger and approvals',
  page: 'docs/ledger.md',
  readBy: ['api'],
  schema: z.object({
    TRUTH_DAILY_QUOTA: z.coerce.number().int().positive().default(2000).describe('Truth writes per DID per UTC day.'),
    TRUTH_MAX_VALUE_BYTES: z.coerce
      .number()
      .int()
      .positive()
      .default(64 * 1024)
      .describe('The largest `value` of a truth (as canonical JSON) in bytes; larger gives 413.'),
    TRUTH_HIGH_RISK_TYPES: csv
      .default(['meta_law', 'protocol', 'risk'])
      .describe('Truth types held for approval.')
      .meta(setting({ allowed: 'comma-separated truth types' })),
    TRUTH_HIGH_RISK_KEY_PREFIXES: csv
      .default(['KERNEL.EVOLUTION.DIRECTIVE.'])
      .describe('Truth key prefixes held for approval.')
      .meta(setting({ allowed: 'comma-separated key prefixes' })),
    TRUTH_APPROVAL_TIMEOUT_S: positiveSeconds
      .default(72 * 3600)
      .describe('A held write expires after this many seconds (72 h by default), nothing appended.'),
    TRUTH_WRITE_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .positive()
      .default(5000)
      .describe('A truth write that cannot finish in this time answers 503.'),
    TRUTH_DID_CACHE_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(60_000)
      .default(1000)
      .describe(
        "A DID found active is not read again for a truth write while the process has checked for revocations (the DID's read or the revocation feed) this recently; 0 reads every time. A revocation made through another API process counts for truth writes within this time."
      ),
    TRUTH_MAX_IN_FLIGHT: z.coerce
      .number()
      .int()
      .positive()
      .default(128)
      .describe(
        'Truth writes in flight per API process (main and backup listeners together); one more is 503 overloaded at once.'
      ),
    LEDGER_FORWARD_SECRET: z
      .string()
      .min(24, 'must be at least 24 characters')
      .optional()
      .describe(
        "The API replicas' shared secret for the ledger writer lease (the same on every replica): one replica appends and counts daily quotas, the others (and the workers) forward to it; unset: each replica appends itself."
      )
      .meta(setting({ readBy: ['api', 'worker'] })),
    LEDGER_WRITER_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe(
        "Where the other replicas reach this one's main listener; unset: http://HOST:PORT, or for HOST 0.0.0.0 or :: the first non-internal IPv4 address."
      ),
    LEDGER_WRITER_LEASE_S: z.coerce
      .number()
      .int()
      .min(3)
      .max(300)
      .default(10)
      .describe("The writer lease's period in seconds; renewed, and read by the other replicas, every third of it.")
      .meta(setting({ readBy: ['api', 'worker'] }))
  })
});
export type LedgerConfig = z.infer<typeof ledgerSettings.schema>;
