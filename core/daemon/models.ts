/**
 * Which models the daemon may call: DAEMON_MODEL_WHITELIST when set, otherwise every configured model marked
 * `free_tier` (core/chat/providers.ts). A model outside it is refused with 403 before anything runs, and the model
 * call activity checks again.
 */
import type { ProviderCatalog } from '../chat/providers';

export function daemonModelWhitelist(catalog: ProviderCatalog, configured: string[] | undefined): Set<string> {
  if (configured && configured.length) return new Set(configured);
  return new Set([...catalog.models.values()].filter((m) => m.free_tier).map((m) => m.id));
}

/** Why a model may not be called, or null when it may. */
export function modelRefusal(catalog: ProviderCatalog, whitelist: Set<string>, model: string): string | null {
  if (!whitelist.has(model))
    return `model ${model} is not on the daemon's free-tier whitelist (${[...whitelist].sort().join(', ') || 'empty'})`;
  if (!catalog.model(model)) return `model ${model} is whitelisted but no provider declares it`;
  return null;
}
