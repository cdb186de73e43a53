/**
 * The product matrix GET /api/v1/products serves (docs/gateways.md: matrix_name, version and further fields). Its
 * shape is checked once at start (core/commercial/products.node.ts), so a bad PRODUCTS_FILE stops the start instead of
 * serving something broken.
 */
import { z } from 'zod';

export const productSchema = z.looseObject({
  id: z.string().min(1).max(128),
  name: z.string().min(1).max(256),
  tier: z.string().min(1).max(64).optional(),
  price_per_month: z.number().min(0).nullable().optional(),
  description: z.string().max(4096).optional(),
  features: z.array(z.string().max(512)).max(256).optional()
});

/** The matrix: matrix_name and version required, products a list; any further members are served as they are. */
export const productMatrixSchema = z.looseObject({
  matrix_name: z.string().min(1).max(256),
  version: z.string().min(1).max(64),
  products: z.array(productSchema).max(1000)
});
export type ProductMatrix = z.infer<typeof productMatrixSchema>;
