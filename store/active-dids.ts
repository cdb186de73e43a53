/**
 * Recently active DIDs, per process: what lets a truth write skip its X-DID read (api/plugins/auth/did.ts).
 *
 * A DID this process found active (registered, unrevoked) within `ttl` ms is taken as active without a read. While
 * a DID keeps being checked, its entry is read again in the background once it is half that old, so a steady writer
 * never waits for the read, and no answer rests on a read that started more than `ttl` ms ago: a revocation made
 * by another process counts here at most `ttl` ms later. A revocation made by this process counts at once (both
 * revoking paths, CredentialStore.revokeDid and the deploy registry's revoke, call forgetDid). Only active DIDs are
 * kept: an unknown or revoked DID is read every time.
 */
import type { CredentialStore } from './credentials';

/** DID → when the read that found it active started (ms), and whether a background read is under way. */
const active = new Map<string, { checkedAt: number; refreshing: boolean }>();
const MAX_ACTIVE = 10_000;
/** Bumped by forgetDid: a read that started before a revocation here must not put its DID back. */
let forgetGeneration = 0;

/** Whether `did` is registered and unrevoked, trusting a read that started less than `ttl` ms ago (0: always read). */
export async function isRecentlyActiveDid(credentials: CredentialStore, did: string, ttl: number): Promise<boolean> {
  if (ttl <= 0) return (await credentials.activeDid(did)) !== null;
  const now = Date.now();
  const entry = active.get(did);
  if (entry && now - entry.checkedAt < ttl) {
    if (now - entry.checkedAt >= ttl / 2 && !entry.refreshing) {
      entry.refreshing = true;
      // A failed read leaves the entry to expire; the next request after that reads (and answers 503 if it cannot).
      readActive(credentials, did).catch(() => {
        entry.refreshing = false;
      });
    }
    return true;
  }
  return readActive(credentials, did);
}

/** This process revoked `did`: no answer from memory any more. */
export function forgetDid(did: string): void {
  forgetGeneration++;
  active.delete(did);
}

async function readActive(credentials: CredentialStore, did: string): Promise<boolean> {
  const startedAt = Date.now();
  const generation = forgetGeneration;
  const found = (await credentials.activeDid(did)) !== null;
  if (!found) {
    active.delete(did);
    return false;
  }
  if (generation !== forgetGeneration) return true; // answered from this read, but not remembered
  if (active.size >= MAX_ACTIVE && !active.has(did)) active.clear();
  active.set(did, { checkedAt: Math.max(startedAt, active.get(did)?.checkedAt ?? 0), refreshing: false });
  return true;
}
