/** The commercial gateway and the memory gateway it proxies to: where memory calls go, the product matrix. */
import { z } from 'zod';
import { defineCapability } from './capability';

export const gatewaySettings = defineCapability({
  name: 'gateways',
  title: 'Commercial and memory gateways',
  page: 'docs/gateways.md',
  readBy: ['api'],
  schema: z.object({
    MEMORY_GATEWAY_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe(
        "Where the commercial gateway proxies memory calls; unset: this process's memory listener, http://127.0.0.1:$MEMORY_PORT (MEMORY_HOST instead of 127.0.0.1 when that is a specific address)."
      ),
    MEMORY_GATEWAY_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(120_000)
      .default(5000)
      .describe('A proxied memory call not answered in this time is 502 upstream_failed.'),
    PRODUCTS_FILE: z
      .string()
      .min(1)
      .optional()
      .describe(
        'The product matrix GET /api/v1/products serves (JSON, checked at start); unset: core/commercial/products.default.json.'
      )
  })
});
export type GatewayConfig = z.infer<typeof gatewaySettings.schema>;
