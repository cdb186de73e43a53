/**
 * Admission to the chat gateway: the caller's plan must permit the model (its fallbacks the plan may not use are
 * skipped), then the key's limits are taken (services/chat/key-limits.ts). For an API key the auth hook answered
 * from its per-process cache, the store's verdict on the key arrives while the request is admitted and its upstream
 * call starts; nothing reaches the client before it (see `startUpstream`).
 */
import { ChatError, modelNotFound, modelNotPermitted } from '../../core/chat/openai-errors';
import { unauthorized } from '../../core/errors';
import { mayUse, CatalogModel } from '../../core/chat/providers';
import type { ChatServices } from './chat-services';
import { Admitted, Claims, createKeyLimits, KeyLimits, RateHeaderSink } from './key-limits';

/** The scope an OAuth access token needs on POST /v1/chat/stream. */
export const OAUTH_CHAT_SCOPE = 'chat';

/** An authenticated caller as the auth hook found it (api/plugins/auth/principal.ts). */
export interface ChatPrincipal {
  model: string;
  id: string;
  scopes?: string[];
  plan?: string;
}

/**
 * The key a request counts under and its plan: an API key's own, or, where the route also takes OAuth access
 * tokens (`oauthAllowed`), `oauth:<client_id>` under `oauthPlan` (CHAT_OAUTH_PLAN) for a token with the scope `chat`.
 */
export function chatKeyOf(
  p: ChatPrincipal | null | undefined,
  oauthAllowed: boolean,
  oauthPlan: string
): { keyId: string; plan: string } {
  if (p?.model === 'oauth' && oauthAllowed) {
    if (!p.scopes?.includes(OAUTH_CHAT_SCOPE))
      throw new ChatError(
        403,
        'permission_error',
        'insufficient_scope',
        `This access token lacks the scope '${OAUTH_CHAT_SCOPE}' (grant it to the OAuth client)`
      );
    return { keyId: `oauth:${p.id}`, plan: oauthPlan };
  }
  if (!p || p.model !== 'api_key') throw unauthorized('Authorization: Bearer zk_… API key is required');
  return { keyId: p.id, plan: p.plan ?? 'S1' };
}

/** What the store says of a key (a principal): its plan decides its models and limits. */
export interface KeyVerdict {
  plan?: string;
}

/** Who calls: the key (or `oauth:<client_id>`) whose limits and usage count, and the plan it was answered with. */
export interface ChatCaller<V extends KeyVerdict = KeyVerdict> {
  keyId: string;
  plan: string;
  /** The store's verdict still to come on a key answered from the per-process cache; null when verified already. */
  confirmation: Promise<V> | null;
  /** Takes the store's verdict as the request's principal. */
  confirmed(verdict: V): void;
}

/**
 * An admitted request: its model chain and limits taken; when the key was answered from the process's cache, the
 * claims made under the cached plan and the store's verdict still to come (see `startUpstream`).
 */
export interface Admission<V extends KeyVerdict = KeyVerdict> {
  chain: CatalogModel[];
  a: Admitted;
  unconfirmed: { claims: Claims; plan: string; verdict: Promise<V> } | null;
}

/** Errors that refused a request before its upstream call counted (no usage is recorded for them). */
const refusedBeforeUpstream = new WeakSet<object>();
const refusal = (err: unknown): unknown => {
  if (err && typeof err === 'object') refusedBeforeUpstream.add(err);
  return err;
};
/** Whether `err` refused the request before its upstream call counted (then no usage is recorded). */
export const wasRefusedBeforeUpstream = (err: unknown): boolean => refusedBeforeUpstream.has(err as object);

export type ChatAdmission = ReturnType<typeof createChatAdmission>;

export function createChatAdmission(chat: Pick<ChatServices, 'catalog' | 'planOf' | 'limits' | 'usage'>) {
  const limits: KeyLimits = createKeyLimits(chat);

  const chainFor = (modelId: string, plan: string): CatalogModel[] => {
    const model = chat.catalog.model(modelId);
    if (!model) throw modelNotFound(modelId, chat.catalog.models.size > 0);
    if (!mayUse(model, plan)) throw modelNotPermitted(modelId, plan);
    // Fallbacks the plan may not use are skipped.
    return chat.catalog.chain(modelId).filter((m) => mayUse(m, plan));
  };

  /** The model's chain for a plan; on a refusal the rate headers are set from what this process knows. */
  const chainOrRefuse = async (
    headers: RateHeaderSink,
    modelId: string,
    keyId: string,
    plan: string
  ): Promise<CatalogModel[]> => {
    try {
      return chainFor(modelId, plan);
    } catch (err) {
      await limits.knownRateHeaders(headers, keyId, plan);
      throw err;
    }
  };

  /** Admits a request under a plan known from the store: the model's chain, then the limits. */
  const admitUnder = async <V extends KeyVerdict>(
    headers: RateHeaderSink,
    modelId: string,
    keyId: string,
    plan: string
  ): Promise<Admission<V>> => {
    const chain = await chainOrRefuse(headers, modelId, keyId, plan);
    return { chain, a: await limits.decide(headers, await limits.claim(keyId, plan)), unconfirmed: null };
  };

  /**
   * The model's chain for the caller's plan, then the caller's limits (rate headers are set on a refusal too).
   *
   * An API key the auth hook answered from its per-process cache (api/plugins/auth/api-key.ts: the same secret
   * digest as this process last verified) is still being read from the store: the claims are taken under the
   * cached plan meanwhile, and the admission carries the store's verdict, which `startUpstream` awaits before
   * anything reaches the client. A request refused here (429, 403) waits for the verdict first: a revoked key is
   * told 401, and a plan changed meanwhile is admitted again under the real plan (whose models are checked again).
   */
  const admit = async <V extends KeyVerdict>(
    caller: ChatCaller<V>,
    headers: RateHeaderSink,
    modelId: string
  ): Promise<Admission<V>> => {
    const { keyId, plan, confirmation } = caller;
    if (!confirmation) return admitUnder(headers, modelId, keyId, plan);
    /** On a refusal under the cached plan: the store's verdict decides (401, the same refusal, or the real plan). */
    const reconsider = async (err: unknown): Promise<Admission<V>> => {
      const real = await confirmation;
      caller.confirmed(real);
      const realPlan = real.plan ?? 'S1';
      if (realPlan === plan) throw err;
      return admitUnder(headers, modelId, keyId, realPlan);
    };
    let chain: CatalogModel[];
    try {
      chain = chainFor(modelId, plan);
    } catch (err) {
      return reconsider(err).catch(async (e: unknown) => {
        if (e === err) await limits.knownRateHeaders(headers, keyId, plan);
        throw e;
      });
    }
    let claims: Claims;
    try {
      claims = await limits.claim(keyId, plan);
    } catch (err) {
      await confirmation; // a revoked key is told so rather than a store failure
      throw err;
    }
    try {
      return { chain, a: await limits.decide(headers, claims), unconfirmed: { claims, plan, verdict: confirmation } };
    } catch (err) {
      return reconsider(err);
    }
  };

  /**
   * Calls the upstream for an admitted request. For a request admitted on its key's cached verification the call
   * starts at once, beside the store read that confirms the key (the read is the one database round trip left on
   * a request's path; overlapping it with the upstream's time to answer takes it off the latency). Nothing reaches
   * the client before the verdict: a revoked key or a new secret aborts the upstream call, gives the claims back
   * and answers 401; a plan changed meanwhile aborts it and admits the request again under the real plan. So a
   * key revoked while a process holds it verified can start at most the requests in flight at that moment on
   * that process (aborted, never answered, never recorded); every later request verifies before it claims.
   */
  const startUpstream = async <T, V extends KeyVerdict>(
    caller: ChatCaller<V>,
    headers: RateHeaderSink,
    modelId: string,
    adm: Admission<V>,
    signal: AbortSignal,
    call: (chain: CatalogModel[], signal: AbortSignal) => Promise<T>
  ): Promise<T> => {
    if (!adm.unconfirmed) return call(adm.chain, signal);
    const { claims, plan, verdict } = adm.unconfirmed;
    const attempt = new AbortController();
    const follow = () => attempt.abort();
    signal.addEventListener('abort', follow, { once: true });
    const started = call(adm.chain, attempt.signal);
    started.catch(() => undefined); // awaited below unless the verdict refuses
    try {
      let real: V;
      try {
        real = await verdict;
      } catch (err) {
        attempt.abort();
        await limits.release(claims);
        throw refusal(err);
      }
      caller.confirmed(real);
      const realPlan = real.plan ?? 'S1';
      if (realPlan === plan) return await started;
      attempt.abort();
      await limits.release(claims);
      const again = await admitUnder<V>(headers, modelId, claims.keyId, realPlan).catch((err: unknown) => {
        throw refusal(err);
      });
      adm.a = again.a;
      return await call(again.chain, signal);
    } finally {
      signal.removeEventListener('abort', follow);
    }
  };

  return { admit, startUpstream, knownRateHeaders: limits.knownRateHeaders };
}
