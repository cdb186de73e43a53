/**
 * API keys this process has verified, per process: what lets the chat gateway's completion routes skip (or overlap)
 * their key read (api/plugins/auth/api-key.ts). The same shape as store/active-dids.ts for the truth write's X-DID.
 *
 * An entry is the key's secret digest and plan as a store read found them, and when that read started. A request
 * presenting the same digest is answered from the entry while it is younger than CHAT_KEY_CACHE_MS; once it is
 * half that old the next such request reads the key again in the background, so a key in steady use never waits
 * for its read and no answer rests on a read that started more than CHAT_KEY_CACHE_MS ago. A revocation, a new
 * secret or a plan change made by this process counts at once (CredentialStore.revokeApiKey and regenerateApiKey
 * and KeyGroupStore.setPlan call forgetApiKey); one made by another process counts here within CHAT_KEY_CACHE_MS.
 */

export interface VerifiedApiKey {
  secretHash: string;
  plan: string;
  /** When the read that verified it started (ms). */
  checkedAt: number;
  /** A background read is under way. */
  refreshing: boolean;
}

const verified = new Map<string, VerifiedApiKey>();
const MAX_VERIFIED = 10_000;
/** Bumped by forgetApiKey: a read that started before a change made here must not put its key back. */
let generation = 0;

export function verifiedApiKey(keyId: string): VerifiedApiKey | undefined {
  return verified.get(keyId);
}

/** Where a key read starts: pass the result to rememberApiKey when it verifies the key. */
export function keyReadStarted(): { at: number; generation: number } {
  return { at: Date.now(), generation };
}

/** A read that started at `started` found the key unrevoked with this digest and plan. */
export function rememberApiKey(
  keyId: string,
  key: { secretHash: string; plan: string },
  started: { at: number; generation: number }
): void {
  if (started.generation !== generation) return; // the key changed here after the read began
  const known = verified.get(keyId);
  // An older read finishing late does not replace what a newer one found.
  if (known && known.checkedAt > started.at) return;
  if (verified.size >= MAX_VERIFIED && !known) verified.clear();
  verified.set(keyId, { secretHash: key.secretHash, plan: key.plan, checkedAt: started.at, refreshing: false });
}

/** The key was revoked, given a new secret or another plan (here or, as a read found, elsewhere): read it next time. */
export function forgetApiKey(keyId: string): void {
  generation++;
  verified.delete(keyId);
}
