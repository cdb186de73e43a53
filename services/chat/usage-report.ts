/**
 * A key's usage report: what it used per day and its plan's limits. Answered to the key itself (GET /v1/usage) and
 * to the administrator (a key's usage, an OAuth client's usage on POST /v1/chat/stream), in the same shape.
 */
import type { DailyUsage } from '../../store/chat/usage';
import type { ChatServices } from './chat-services';

export interface UsageReport {
  object: 'usage';
  key_id: string;
  plan: string;
  limits: { requests_per_minute: number; requests_per_day: number; tokens_per_day: number };
  /** Newest first; days without requests are left out. */
  days: DailyUsage[];
}

/** A key's usage over the last `days` days (today included) and its plan's limits. */
export async function usageReport(
  chat: Pick<ChatServices, 'planOf' | 'usage'>,
  keyId: string,
  plan: string,
  days: number
): Promise<UsageReport> {
  const to = new Date().toISOString().slice(0, 10);
  const from = new Date(Date.parse(`${to}T00:00:00Z`) - (days - 1) * 86_400_000).toISOString().slice(0, 10);
  const limits = chat.planOf(plan);
  return {
    object: 'usage' as const,
    key_id: keyId,
    plan,
    limits: {
      requests_per_minute: limits.requests_per_minute,
      requests_per_day: limits.requests_per_day,
      tokens_per_day: limits.tokens_per_day
    },
    days: await chat.usage.daily(keyId, from, to)
  };
}
