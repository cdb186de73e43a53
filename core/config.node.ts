/**
 * The service's configuration: one zod schema over the environment, shared by the API, the worker and the
 * local stack launcher, composed of one slice per capability (core/config/*.node.ts, each setting described there;
 * docs/configuration.md is generated from them by `npm run docs:config`). An invalid value stops the start with a
 * message naming the variable and what is allowed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { a2aSettings } from './config/a2a.node';
import { chatSettings } from './config/chat.node';
import { daemonSettings } from './config/daemon.node';
import { deploySettings } from './config/deploy.node';
import { federationSettings } from './config/federation.node';
import { gatewaySettings } from './config/gateways.node';
import { ledgerSettings } from './config/ledger.node';
import { listenerSettings } from './config/listeners.node';
import { mongoSettings } from './config/mongo.node';
import { oauthSettings } from './config/oauth.node';
import { serviceSettings } from './config/service.node';
import { temporalSettings } from './config/temporal.node';
import { tlogSettings } from './config/tlog.node';

export { isAddressOrRange } from './config/values.node';
export { LOG_LEVELS } from './config/service.node';
export type { A2aConfig } from './config/a2a.node';
export type { ChatConfig } from './config/chat.node';
export type { DaemonConfig } from './config/daemon.node';
export type { DeployConfig } from './config/deploy.node';
export type { FederationConfig } from './config/federation.node';
export type { GatewayConfig } from './config/gateways.node';
export type { LedgerConfig } from './config/ledger.node';
export type { ListenerConfig } from './config/listeners.node';
export type { MongoConfig } from './config/mongo.node';
export type { OauthConfig } from './config/oauth.node';
export type { ServiceConfig } from './config/service.node';
export type { TemporalConfig } from './config/temporal.node';
export type { TlogConfig } from './config/tlog.node';

/** The capabilities in the order docs/configuration.md lists them. */
export const CAPABILITIES = [
  serviceSettings,
  listenerSettings,
  mongoSettings,
  temporalSettings,
  federationSettings,
  a2aSettings,
  ledgerSettings,
  tlogSettings,
  oauthSettings,
  chatSettings,
  gatewaySettings,
  deploySettings,
  daemonSettings
] as const;

export const configSchema = z.object({
  ...serviceSettings.schema.shape,
  ...listenerSettings.schema.shape,
  ...mongoSettings.schema.shape,
  ...temporalSettings.schema.shape,
  ...federationSettings.schema.shape,
  ...a2aSettings.schema.shape,
  ...ledgerSettings.schema.shape,
  ...tlogSettings.schema.shape,
  ...oauthSettings.schema.shape,
  ...chatSettings.schema.shape,
  ...gatewaySettings.schema.shape,
  ...deploySettings.schema.shape,
  ...daemonSettings.schema.shape
});

export type Config = z.infer<typeof configSchema> & {
  /** DATA_DIR made absolute. */
  dataDir: string;
  /** Base URL of the main listener as clients see it. */
  publicUrl: string;
  /** Base URL of the hub gateway listener (HUB_PORT) as clients see it. */
  hubPublicUrl: string;
  /** The transparency log's checkpoint origin (TLOG_ORIGIN, or derived from PUBLIC_URL). */
  tlogOrigin: string;
  /** The name of the hub's cosigning key as a witness (TLOG_WITNESS_NAME, or `<tlogOrigin>/witness`). */
  tlogWitnessName: string;
  /**
   * How many witnesses make a checkpoint witnessed (TLOG_WITNESS_QUORUM), counted over TLOG_WITNESSES and the peer
   * registry's; null: all of those configured at the time (services/tlog/peer-witnesses.ts).
   */
  tlogWitnessQuorum: number | null;
};

export class ConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the environment; throws ConfigError naming each bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings mean "unset", as in most shells' `VAR= cmd`.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = configSchema.safeParse(cleaned);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => {
        const name = issue.path.join('.');
        return `${name}=${JSON.stringify(env[name] ?? '')}: ${issue.message}`;
      })
    );
  }
  const c = parsed.data;
  if (!c.TEMPORAL_TLS_CERT_FILE !== !c.TEMPORAL_TLS_KEY_FILE)
    throw new ConfigError([
      `TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE: a client certificate needs both (${c.TEMPORAL_TLS_CERT_FILE ? 'no key file' : 'no certificate file'})`
    ]);
  const tlogOrigin = c.TLOG_ORIGIN ?? defaultTlogOrigin(c.PUBLIC_URL ?? `http://localhost:${c.PORT}`);
  return {
    ...c,
    dataDir: path.resolve(c.DATA_DIR),
    publicUrl: (c.PUBLIC_URL ?? `http://localhost:${c.PORT}`).replace(/\/+$/, ''),
    hubPublicUrl: (c.HUB_PUBLIC_URL ?? `http://localhost:${c.HUB_PORT}`).replace(/\/+$/, ''),
    tlogOrigin,
    tlogWitnessName: c.TLOG_WITNESS_NAME ?? `${tlogOrigin}/witness`,
    tlogWitnessQuorum: c.TLOG_WITNESS_QUORUM ?? null
  };
}

/** PUBLIC_URL without its scheme and trailing slashes, then /tlog: where the log's tiles are (C2SP tlog-tiles). */
export function defaultTlogOrigin(publicUrl: string): string {
  const url = new URL(publicUrl);
  return `${url.host}${url.pathname.replace(/\/+$/, '')}/tlog`;
}

/** Where MongoDB is: MONGODB_URI, or the embedded FerretDB on loopback. */
export function mongoUri(config: Config): string {
  return config.MONGODB_URI ?? `mongodb://127.0.0.1:${config.FERRETDB_PORT}/`;
}

/** Where the commercial gateway reaches the memory gateway: MEMORY_GATEWAY_URL, or this process's memory listener. */
export function memoryGatewayUrl(config: Config): string {
  if (config.MEMORY_GATEWAY_URL) return config.MEMORY_GATEWAY_URL.replace(/\/+$/, '');
  const host = config.MEMORY_HOST === '0.0.0.0' || config.MEMORY_HOST === '::' ? '127.0.0.1' : config.MEMORY_HOST;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.MEMORY_PORT}`;
}

/** What a Temporal connection (the client's or the worker's native one) is given: TLS and an API key, as set. */
export interface TemporalConnectionSettings {
  address: string;
  tls?: {
    serverNameOverride?: string;
    serverRootCACertificate?: Buffer;
    clientCertPair?: { crt: Buffer; key: Buffer };
  };
  apiKey?: string;
}

type TemporalReach = Pick<
  Config,
  | 'TEMPORAL_ADDRESS'
  | 'TEMPORAL_PORT'
  | 'TEMPORAL_TLS'
  | 'TEMPORAL_TLS_CA_FILE'
  | 'TEMPORAL_TLS_CERT_FILE'
  | 'TEMPORAL_TLS_KEY_FILE'
  | 'TEMPORAL_TLS_SERVER_NAME'
  | 'TEMPORAL_API_KEY'
>;

/**
 * The address, TLS and API key of the connections to Temporal (api/context.ts, worker/worker.ts): the PEM files are
 * read here, at start, so a missing or unreadable one stops the process with a config error naming it.
 */
export function temporalConnectionSettings(config: TemporalReach): TemporalConnectionSettings {
  const read = (name: 'TEMPORAL_TLS_CA_FILE' | 'TEMPORAL_TLS_CERT_FILE' | 'TEMPORAL_TLS_KEY_FILE') => {
    const file = config[name];
    if (!file) return undefined;
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new ConfigError([
        `${name}=${JSON.stringify(file)}: cannot be read (${(err as NodeJS.ErrnoException).code})`
      ]);
    }
  };
  const ca = read('TEMPORAL_TLS_CA_FILE');
  const crt = read('TEMPORAL_TLS_CERT_FILE');
  const key = read('TEMPORAL_TLS_KEY_FILE');
  const tlsOn =
    config.TEMPORAL_TLS === 'on' ||
    ca !== undefined ||
    crt !== undefined ||
    key !== undefined ||
    !!config.TEMPORAL_TLS_SERVER_NAME;
  return {
    // TEMPORAL_ADDRESS, or the embedded dev server on loopback.
    address: config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_PORT}`,
    ...(tlsOn
      ? {
          tls: {
            ...(config.TEMPORAL_TLS_SERVER_NAME ? { serverNameOverride: config.TEMPORAL_TLS_SERVER_NAME } : {}),
            ...(ca ? { serverRootCACertificate: ca } : {}),
            ...(crt && key ? { clientCertPair: { crt, key } } : {})
          }
        }
      : {}),
    ...(config.TEMPORAL_API_KEY ? { apiKey: config.TEMPORAL_API_KEY } : {})
  };
}

/** Where the worker's deploy activities find the hub's nginx and the releases (docs/deploy.md#how-it-runs). */
export function deployActivityDeps(config: Config): { dataDir: string; nginxBin: string; webUrl: string } {
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  return {
    dataDir: config.dataDir,
    nginxBin: config.NGINX_BIN,
    webUrl: `http://${host.includes(':') ? `[${host}]` : host}:${config.DEPLOY_WEB_PORT}`
  };
}
