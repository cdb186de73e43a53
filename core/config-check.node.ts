/**
 * Invalid configuration stops a process at once, before it connects to anything, with exit code 78 (EX_CONFIG) that
 * the launcher's supervisor does not restart (scripts/stack/supervisor.ts): restarting does not fix a setting.
 * The environment is checked by loadConfig (core/config.node.ts); the settings that name more configuration (the
 * chat provider file, CHAT_PLANS) are read here too, so their errors come before the database connection is open.
 * (Read later, inside the API's start-up, a bad provider file failed after background readers had started on the
 * connection, and closing it under them logged a MongoExpiredSessionError after the real message.)
 */
import type { Config } from './config.node';
import { ConfigError } from './config.node';
import { loadProviderCatalog, ProviderConfigError } from './chat/providers.node';
import { plansOverrideSchema } from './chat/plans';

/** sysexits.h EX_CONFIG: the process stopped on invalid configuration. */
export const EX_CONFIG = 78;

export class InvalidSetting extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidSetting';
  }
}

/** Reads the configuration that settings point at; throws InvalidSetting naming the setting (and file). */
export function checkReferencedConfiguration(
  config: Pick<Config, 'CHAT_PROVIDERS_FILE' | 'CHAT_PROVIDERS' | 'CHAT_PLANS'>
): void {
  try {
    loadProviderCatalog(config);
  } catch (err) {
    if (err instanceof ProviderConfigError) throw new InvalidSetting(err.message);
    throw err;
  }
  if (config.CHAT_PLANS) {
    let raw: unknown;
    try {
      raw = JSON.parse(config.CHAT_PLANS);
    } catch {
      throw new InvalidSetting('CHAT_PLANS: not JSON (e.g. {"S1":{"requests_per_minute":5}})');
    }
    const parsed = plansOverrideSchema.safeParse(raw);
    if (!parsed.success)
      throw new InvalidSetting(
        `CHAT_PLANS: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`
      );
  }
}

/** Whether `err` says the configuration is invalid (the environment, or a file a setting names). */
export function isConfigurationError(err: unknown): err is Error {
  return err instanceof ConfigError || err instanceof InvalidSetting || err instanceof ProviderConfigError;
}

/**
 * The one message of a process that stops on invalid configuration, on stderr, then exit code 78. Nothing was
 * connected yet, so nothing else is logged after it.
 */
export function exitOnInvalidConfiguration(processName: string, err: Error): never {
  const text = err instanceof ConfigError ? err.message : `Invalid configuration: ${err.message}`;
  process.stderr.write(`${processName}: ${text} (exit code ${EX_CONFIG})\n`);
  process.exit(EX_CONFIG);
}
