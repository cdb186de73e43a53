/**
 * Model `api_key`: Authorization: Bearer zk_<key id>_<secret>, issued by an administrator and not revoked.
 *
 * Every request reads its key from the store (so a revocation or a new secret counts on every API process at its
 * very next request). Routes that declare `config.apiKeyConfirmLater` (the chat gateway's completion routes) may
 * overlap that read with their own work: when the presented secret's digest equals the one this process last
 * verified for the key, the authenticator answers at once with the plan it last saw, and the read goes on in the
 * background; the route must then await `confirmApiKey(request)` (the store's verdict: the key, unrevoked, with
 * that same digest, and its plan now) before anything reaches the client, and undo what it started when the
 * verdict is a refusal (the chat gateway aborts the upstream call it started and gives its limit slots back).
 * A refusal also makes this process forget the key, so only requests already in flight are started this way. A
 * secret whose digest is not the cached one is always verified before the route runs, so a wrong secret never
 * starts anything in a key's name.
 */
import type { FastifyRequest } from 'fastify';
import { API_KEY_PATTERN, digestsEqual, hashSecret } from '../../../core/credentials.node';
import { unauthorized } from '../../../core/errors';
import type { ApiKeyDocument } from '../../../store/credentials';
import { FreshReads } from '../../../core/fresh-reads';
import { Authenticator, bearer, Principal } from './principal';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route awaits confirmApiKey(request) before acting for the key (see api/plugins/auth/api-key.ts). */
    apiKeyConfirmLater?: boolean;
  }
}

const keyReads = new WeakMap<object, FreshReads<ApiKeyDocument | null>>();

/** Per process: key id → the secret digest and plan of its last successful verification. */
const verified = new Map<string, { secretHash: string; plan: string }>();
const MAX_VERIFIED = 10_000;
/** Requests answered from `verified`, and the store read that confirms (or refuses) them. */
const pending = new WeakMap<FastifyRequest, Promise<Principal>>();

export const apiKey: Authenticator = async (request, { credentials }) => {
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
  const lookup = reads.get(keyId).then((key): Principal => {
    if (!key || key.revoked_at || !digestsEqual(key.secret_hash, presented)) {
      verified.delete(keyId);
      throw unauthorized('API key is invalid or revoked');
    }
    if (verified.size >= MAX_VERIFIED && !verified.has(keyId)) verified.clear();
    verified.set(keyId, { secretHash: key.secret_hash, plan: key.plan });
    return { model: 'api_key', id: key._id, plan: key.plan };
  });
  const cached = verified.get(keyId);
  if (request.routeOptions.config.apiKeyConfirmLater && cached && digestsEqual(cached.secretHash, presented)) {
    // The route awaits it; until then a refusal must not surface as an unhandled rejection.
    lookup.catch(() => undefined);
    pending.set(request, lookup);
    return { model: 'api_key', id: keyId, plan: cached.plan };
  }
  return lookup;
};

/**
 * The store's verdict on a request the authenticator answered from its cache (the key as stored now; throws the
 * 401 when it is revoked or its secret changed), or null when the request was verified before the route ran.
 */
export function confirmApiKey(request: FastifyRequest): Promise<Principal> | null {
  return pending.get(request) ?? null;
}
