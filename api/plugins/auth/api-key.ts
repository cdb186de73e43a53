/**
 * Model `api_key`: Authorization: Bearer zk_<key id>_<secret>, issued by an administrator and not revoked.
 *
 * Every request reads its key from the store (so a revocation or a new secret counts on every API process at its
 * very next request), except on routes that declare `config.apiKeyConfirmLater` (the chat gateway's completion
 * routes, where every round trip counts). There, when the presented secret's digest equals the one this process
 * last verified for the key (store/verified-api-keys.ts):
 *   - verified by a read that started less than CHAT_KEY_CACHE_MS ago (default 1 s): answered from memory, no read
 *     on the request's path (a key in steady use is read again in the background once half that old). So a key
 *     revoked, given a new secret or another plan through another API process still works here for at most
 *     CHAT_KEY_CACHE_MS; through this process, the change counts at once. CHAT_KEY_CACHE_MS=0 turns this off.
 *   - verified longer ago: the authenticator answers at once with the plan it last saw and the read goes on beside
 *     the route's work; the route must then await `confirmApiKey(request)` (the store's verdict: the key, unrevoked,
 *     with that same digest, and its plan now) before anything reaches the client, and undo what it started when the
 *     verdict is a refusal (the chat gateway aborts the upstream call it started and gives its limit slots back).
 *     A refusal also makes this process forget the key, so only requests already in flight are started this way.
 * A secret whose digest is not the one verified is always verified before the route runs, so a wrong secret never
 * starts anything in a key's name.
 */
import type { FastifyRequest } from 'fastify';
import { API_KEY_PATTERN, digestsEqual, hashSecret } from '../../../core/credentials.node';
import { unauthorized } from '../../../core/errors';
import type { ApiKeyDocument } from '../../../store/credentials';
import { FreshReads } from '../../../core/fresh-reads';
import { forgetApiKey, keyReadStarted, rememberApiKey, verifiedApiKey } from '../../../store/verified-api-keys';
import { Authenticator, bearer, Principal } from './principal';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route awaits confirmApiKey(request) before acting for the key (see api/plugins/auth/api-key.ts). */
    apiKeyConfirmLater?: boolean;
  }
}

const keyReads = new WeakMap<object, FreshReads<ApiKeyDocument | null>>();

/** Requests answered from a verification older than CHAT_KEY_CACHE_MS, and the store read that confirms (or refuses) them. */
const pending = new WeakMap<FastifyRequest, Promise<Principal>>();

export const apiKey: Authenticator = async (request, { credentials, config }) => {
  const token = bearer(request);
  const match = token ? API_KEY_PATTERN.exec(token) : null;
  if (!token || !match) throw unauthorized('Authorization: Bearer zk_… API key is required');
  const keyId = match[1]!;
  const presented = hashSecret(token);
  let reads = keyReads.get(credentials);
  if (!reads) {
    reads = new FreshReads((id) => credentials.findApiKey(id));
    keyReads.set(credentials, reads);
  }
  const read = (): Promise<Principal> => {
    const started = keyReadStarted();
    return reads.get(keyId).then((key): Principal => {
      // What the store says of the key is remembered whatever this request presented (a wrong secret evicts nothing).
      if (!key || key.revoked_at) forgetApiKey(keyId);
      else rememberApiKey(keyId, { secretHash: key.secret_hash, plan: key.plan }, started);
      if (!key || key.revoked_at || !digestsEqual(key.secret_hash, presented))
        throw unauthorized('API key is invalid or revoked');
      return { model: 'api_key', id: key._id, plan: key.plan };
    });
  };
  const cached = verifiedApiKey(keyId);
  if (!request.routeOptions.config.apiKeyConfirmLater || !cached || !digestsEqual(cached.secretHash, presented))
    return read();
  const principal: Principal = { model: 'api_key', id: keyId, plan: cached.plan };
  const ttl = config.CHAT_KEY_CACHE_MS;
  const age = Date.now() - cached.checkedAt;
  if (age < ttl) {
    // Verified recently enough: no read on this request's path; a key in steady use is read again in the background.
    if (age >= ttl / 2 && !cached.refreshing) {
      cached.refreshing = true;
      read().catch(() => {
        cached.refreshing = false;
      });
    }
    return principal;
  }
  // Verified before, but longer ago: the route starts its work beside the read and awaits its verdict.
  const lookup = read();
  // The route awaits it; until then a refusal must not surface as an unhandled rejection.
  lookup.catch(() => undefined);
  pending.set(request, lookup);
  return principal;
};

/**
 * The store's verdict on a request the authenticator answered from its cache (the key as stored now; throws the
 * 401 when it is revoked or its secret changed), or null when the request was verified before the route ran.
 */
export function confirmApiKey(request: FastifyRequest): Promise<Principal> | null {
  return pending.get(request) ?? null;
}
