/**
 * Chat gateway plans: what a zk_ key of each plan may do. The numbers are configuration (CHAT_PLANS overrides any
 * of them, as JSON `{ "S2": { "requests_per_minute": 100 } }`); the defaults are documented in
 * docs/chat.md#plans-and-limits.
 */
import { z } from 'zod';

export const planLimitsSchema = z.strictObject({
  requests_per_minute: z.number().int().min(1).max(1_000_000),
  requests_per_day: z.number().int().min(1).max(100_000_000),
  tokens_per_day: z.number().int().min(1).max(1e12),
  /** Whether a key of this plan may hold key groups (keys issued under it, each with its own quota). */
  key_groups: z.boolean()
});
export type PlanLimits = z.infer<typeof planLimitsSchema>;

export const PLAN_NAMES = ['S1', 'S2', 'S3', 'S4', 'S5'] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

export const DEFAULT_PLANS: Record<PlanName, PlanLimits> = {
  S1: { requests_per_minute: 20, requests_per_day: 1_000, tokens_per_day: 200_000, key_groups: false },
  S2: { requests_per_minute: 60, requests_per_day: 5_000, tokens_per_day: 1_000_000, key_groups: false },
  S3: { requests_per_minute: 120, requests_per_day: 20_000, tokens_per_day: 5_000_000, key_groups: false },
  S4: { requests_per_minute: 300, requests_per_day: 100_000, tokens_per_day: 20_000_000, key_groups: true },
  S5: { requests_per_minute: 1_000, requests_per_day: 500_000, tokens_per_day: 100_000_000, key_groups: true }
};

export const plansOverrideSchema = z.partialRecord(z.enum(PLAN_NAMES), planLimitsSchema.partial());

/** The plan table: the defaults with CHAT_PLANS applied. */
export function planTable(override: z.infer<typeof plansOverrideSchema> = {}): Record<PlanName, PlanLimits> {
  const out = { ...DEFAULT_PLANS };
  for (const name of PLAN_NAMES) out[name] = { ...DEFAULT_PLANS[name], ...(override[name] ?? {}) };
  return out;
}

export const isPlanName = (s: string): s is PlanName => (PLAN_NAMES as readonly string[]).includes(s);
