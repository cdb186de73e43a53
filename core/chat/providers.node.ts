/**
 * Reads the provider configuration: the file named by CHAT_PROVIDERS_FILE (JSON or YAML, by content), or the JSON
 * or YAML text in CHAT_PROVIDERS; neither gives an empty catalogue (the service still starts; /v1/models is empty).
 * Provider keys come from the environment only, by the name each provider gives in `api_key_env`.
 */
import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ProviderCatalog, providersFileSchema, ProviderConfig } from './providers';

export class ProviderConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProviderConfigError';
  }
}

/** Parses one configuration text (JSON is YAML, so one parser reads both). */
export function parseProviders(text: string, where: string): ProviderConfig[] {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new ProviderConfigError(`${where}: not JSON or YAML (${(err as Error).message.split('\n')[0]})`);
  }
  if (raw === null || raw === undefined) return [];
  const parsed = providersFileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new ProviderConfigError(`${where}: ${problems}`);
  }
  return Array.isArray(parsed.data) ? parsed.data : parsed.data.providers;
}

/** The catalogue from CHAT_PROVIDERS_FILE and/or CHAT_PROVIDERS (both may be set; their providers are joined). */
export function loadProviderCatalog(env: { CHAT_PROVIDERS_FILE?: string; CHAT_PROVIDERS?: string }): ProviderCatalog {
  const providers: ProviderConfig[] = [];
  if (env.CHAT_PROVIDERS_FILE) {
    let text: string;
    try {
      text = fs.readFileSync(env.CHAT_PROVIDERS_FILE, 'utf8');
    } catch (err) {
      throw new ProviderConfigError(
        `CHAT_PROVIDERS_FILE=${env.CHAT_PROVIDERS_FILE}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`
      );
    }
    providers.push(...parseProviders(text, `CHAT_PROVIDERS_FILE=${env.CHAT_PROVIDERS_FILE}`));
  }
  if (env.CHAT_PROVIDERS) providers.push(...parseProviders(env.CHAT_PROVIDERS, 'CHAT_PROVIDERS'));
  try {
    return new ProviderCatalog(providers);
  } catch (err) {
    throw new ProviderConfigError(`chat providers: ${(err as Error).message}`);
  }
}

/** A provider's key, read from the environment at call time (never stored, never logged). */
export function providerKey(apiKeyEnv: string | null, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!apiKeyEnv) return undefined;
  const v = env[apiKeyEnv];
  return v && v.length > 0 ? v : undefined;
}
