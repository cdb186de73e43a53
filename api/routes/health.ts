/** GET /health on every listener: the listener is up and can reach MongoDB. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Db } from 'mongodb';
import { z } from 'zod';
import type { ListenerName } from '../directory';
import { HUB_VERSION, SERVICE_NAME } from '../../core/version';

export const healthResponse = z.object({
  ok: z.boolean(),
  status: z.enum(['up', 'degraded']),
  service: z.string(),
  listener: z.string(),
  version: z.string(),
  mongo: z.enum(['up', 'down']),
  upstreams: z
    .array(
      z.object({
        name: z.string(),
        state: z.enum(['closed', 'open', 'half_open']),
        consecutive_failures: z.number().int(),
        retry_after_s: z.number().int()
      })
    )
    .optional()
    .describe('chat gateway providers (main listener): circuit breaker state as this API process sees it'),
  ledger_writer: z
    .object({
      holds_lease: z
        .boolean()
        .nullable()
        .describe('this replica holds the writer lease (null: an API process of a cluster, whose primary takes part)'),
      writer_url: z
        .string()
        .nullable()
        .describe(
          "the holder's main listener as this replica knows it (null: none known, or the holder did not answer: appended here)"
        ),
      forwarded: z.number().int().describe('appends this process forwarded to the holder and the holder answered'),
      forward_requests: z
        .number()
        .int()
        .describe('the requests those took (truth writes waiting behind others go together)'),
      served: z.number().int().describe('forwarded appends this process appended as the holder')
    })
    .optional()
    .describe(
      'the ledger writer lease across replicas (main listener, with LEDGER_FORWARD_SECRET set; docs/ledger.md, the writer lease)'
    )
});

export type LedgerWriterHealth = () => z.infer<typeof healthResponse>['ledger_writer'];
type UpstreamHealth = () => {
  name: string;
  state: 'closed' | 'open' | 'half_open';
  consecutive_failures: number;
  retry_after_s: number;
}[];

export const healthRoutes: FastifyPluginAsyncZod<{
  db: Db;
  listener: ListenerName;
  upstreams?: UpstreamHealth;
  ledgerWriter?: LedgerWriterHealth;
}> = async (app, { db, listener, upstreams, ledgerWriter }) => {
  app.get('/health', { config: { auth: 'none' }, schema: { response: { 200: healthResponse } } }, async () => {
    const mongo = await db
      .command({ ping: 1 }, { timeoutMS: 1000 })
      .then(() => 'up' as const)
      .catch(() => 'down' as const);
    const breakers = upstreams?.().map(({ name, state, consecutive_failures, retry_after_s }) => ({
      name,
      state,
      consecutive_failures,
      retry_after_s
    }));
    const writer = ledgerWriter?.();
    return {
      ok: mongo === 'up',
      status: mongo === 'up' ? ('up' as const) : ('degraded' as const),
      service: SERVICE_NAME,
      listener,
      version: HUB_VERSION,
      mongo,
      ...(breakers ? { upstreams: breakers } : {}),
      ...(writer ? { ledger_writer: writer } : {})
    };
  });
};
