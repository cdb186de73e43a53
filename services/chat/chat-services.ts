/**
 * The chat gateway's shared parts, built once per API process: the provider catalogue (CHAT_PROVIDERS_FILE /
 * CHAT_PROVIDERS), the upstream clients with their circuit breakers, the plan table, the per-key limits and the
 * usage accounting. Used by the chat services beside this module, the routes in api/routes/chat/ and /health
 * (breaker state).
 */
import type { Db } from 'mongodb';
import type { Logger } from 'pino';
import type { ChatConfig } from '../../core/config.node';
import { PlanLimits, PlanName, planTable, plansOverrideSchema, isPlanName } from '../../core/chat/plans';
import { ProviderCatalog } from '../../core/chat/providers';
import { loadProviderCatalog } from '../../core/chat/providers.node';
import { ChatUpstreams } from '../../core/chat/upstream.node';
import { ChatLimitStore } from '../../store/chat/limits';
import { ChatUsageStore } from '../../store/chat/usage';

export interface ChatServices {
  catalog: ProviderCatalog;
  upstreams: ChatUpstreams;
  plans: Record<PlanName, PlanLimits>;
  limits: ChatLimitStore;
  usage: ChatUsageStore;
  /** The limits of a key's plan (an unknown plan name, from before plans were checked, counts as S1). */
  planOf(plan: string): PlanLimits;
  /** Circuit breaker state per provider, for /health. */
  upstreamHealth(): {
    name: string;
    state: 'closed' | 'open' | 'half_open';
    consecutive_failures: number;
    retry_after_s: number;
  }[];
  /** When the process stops: gives back the limit slots it leased and writes its token tallies. */
  close(): Promise<void>;
}

/** The settings the gateway's shared parts read. */
export type ChatServicesConfig = Pick<
  ChatConfig,
  | 'CHAT_PROVIDERS_FILE'
  | 'CHAT_PROVIDERS'
  | 'CHAT_PLANS'
  | 'CHAT_UPSTREAM_RETRIES'
  | 'CHAT_RETRY_MAX_WAIT_MS'
  | 'CHAT_BREAKER_FAILURES'
  | 'CHAT_BREAKER_COOLDOWN_S'
>;

export function createChatServices(config: ChatServicesConfig, db: Db, logger: Logger): ChatServices {
  const catalog = loadProviderCatalog(config);
  let override = {};
  if (config.CHAT_PLANS) {
    let raw: unknown;
    try {
      raw = JSON.parse(config.CHAT_PLANS);
    } catch {
      throw new Error('CHAT_PLANS: not JSON (e.g. {"S1":{"requests_per_minute":5}})');
    }
    const parsed = plansOverrideSchema.safeParse(raw);
    if (!parsed.success)
      throw new Error(`CHAT_PLANS: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    override = parsed.data;
  }
  const plans = planTable(override);
  const upstreams = new ChatUpstreams(catalog, {
    retries: config.CHAT_UPSTREAM_RETRIES,
    retryMaxWaitMs: config.CHAT_RETRY_MAX_WAIT_MS,
    breakerFailures: config.CHAT_BREAKER_FAILURES,
    breakerCooldownMs: config.CHAT_BREAKER_COOLDOWN_S * 1000,
    onAttemptFailed: (info) => logger.warn(info, 'upstream attempt failed')
  });
  if (catalog.models.size === 0)
    logger.info('chat gateway: no provider configured (CHAT_PROVIDERS_FILE / CHAT_PROVIDERS); /v1/models is empty');
  else
    logger.info(
      { providers: [...catalog.providers.keys()], models: catalog.models.size },
      'chat gateway providers loaded'
    );
  const limits = new ChatLimitStore(db, (err) => logger.warn({ err }, 'chat limit prune failed'));
  const usage = new ChatUsageStore(db, (err) => logger.warn({ err }, 'chat usage tally flush failed'));
  return {
    catalog,
    upstreams,
    plans,
    limits,
    usage,
    planOf: (plan) => plans[isPlanName(plan) ? plan : 'S1'],
    upstreamHealth: () => upstreams.breakers.snapshot([...catalog.providers.keys()]),
    close: async () => {
      await Promise.all([limits.close(), usage.close()]);
      await upstreams.close();
    }
  };
}
