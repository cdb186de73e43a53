/** The Idempotency-Key request header, shared by every write that accepts one (truth report, task submission). */
import { z } from 'zod';

export const idempotencyKeyHeaders = z
  .object({
    'idempotency-key': z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,128}$/, '1-128 characters of letters, digits and _ . : -')
      .optional()
  })
  .passthrough();
