/**
 * The service's configuration: one zod schema over the environment, shared by the API, the worker and the
 * local stack launcher. An invalid value stops the start with a message naming the variable and what is allowed.
 */
import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const positiveSeconds = z.coerce.number().int().positive();
const csv = z.string().transform((s) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)
);

/** An IP address or a CIDR range (IPv4 or IPv6), as the trusted proxy lists take them. */
export function isAddressOrRange(entry: string): boolean {
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = net.isIP(address);
  if (family === 0 || rest.length > 0) return false;
  // (A /0 would trust every address: refused.)
  return (
    prefix === undefined ||
    (/^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (family === 4 ? 32 : 128))
  );
}
/** Comma-separated proxy addresses and CIDR ranges (api/client-address.ts). */
const proxyList = csv.pipe(
  z.array(z.string().refine(isAddressOrRange, 'an IP address or a CIDR range such as 10.0.0.0/8 (not /0)'))
);

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** FERRETDB_BACKEND's settings (scripts/stack/postgres.ts chooseFerretBackend resolves `auto`). */
export const FERRETDB_BACKENDS = ['auto', 'sqlite', 'postgresql'] as const;
export type FerretBackendSetting = (typeof FERRETDB_BACKENDS)[number];

export const configSchema = z.object({
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  HOST: z.string().min(1).default('0.0.0.0'),
  PORT: port.default(8080),
  BACKUP_PORT: port.default(8081),
  HUB_PORT: port.default(9001),
  COMMERCIAL_PORT: port.default(9099),
  MEMORY_PORT: port.default(9120),
  DAEMON_PORT: port.default(9123),
  /** The memory gateway binds here (loopback by default: the commercial gateway proxies to it). */
  MEMORY_HOST: z.string().min(1).default('127.0.0.1'),
  /** Where the commercial gateway proxies memory calls; unset: this process's memory listener (memoryGatewayUrl). */
  MEMORY_GATEWAY_URL: z.url({ protocol: /^https?$/ }).optional(),
  MEMORY_GATEWAY_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(5000),
  /** The commercial gateway's product matrix (JSON); unset: core/commercial/products.default.json. */
  PRODUCTS_FILE: z.string().min(1).optional(),
  DATA_DIR: z.string().min(1).default('./.data'),
  PUBLIC_URL: z.url().optional(),
  HUB_PUBLIC_URL: z.url().optional(),

  MONGODB_URI: z
    .string()
    .regex(/^mongodb(\+srv)?:\/\//, 'must start with mongodb:// or mongodb+srv://')
    .optional(),
  MONGODB_DB: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,60}$/, 'letters, digits, _ and - only')
    .default('zhongshu_hub'),
  FERRETDB_PORT: port.default(27018),
  /**
   * FerretDB's storage (README "Storage backends"): SQLite files under DATA_DIR, or a PostgreSQL child server;
   * `auto` (the default): PostgreSQL where it is installed and can run on DATA_DIR, else SQLite
   * (scripts/stack/postgres.ts chooseFerretBackend).
   */
  FERRETDB_BACKEND: z.enum(FERRETDB_BACKENDS).default('auto'),
  /** The embedded PostgreSQL's port (loopback) with FERRETDB_BACKEND=postgresql. */
  POSTGRES_PORT: port.default(5433),
  /**
   * How the database answers a lookup by one `_id` (store/mongo.ts IdLookups): `indexed` (MongoDB; the embedded
   * FerretDB on PostgreSQL) or `scan` (FerretDB on SQLite). The launcher sets it for the processes it starts with the
   * embedded FerretDB; set `scan` for a FerretDB on SQLite of your own.
   */
  MONGODB_ID_LOOKUPS: z.enum(['indexed', 'scan']).default('indexed'),
  /** FerretDB's debug listener (loopback: /debug/metrics, Prometheus text, requests by command); 0 = off. */
  FERRETDB_DEBUG_PORT: port.default(0),

  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:]+:\d+$/, 'must be host:port')
    .optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('zhongshu-hub'),
  /** Task queue kinds this worker process polls (workflows/task-queues.ts): all by default; e.g. `models` alone. */
  WORKER_TASK_QUEUES: csv
    .pipe(z.array(z.enum(['core', 'models', 'commands'])).min(1))
    .default(['core', 'models', 'commands']),
  TEMPORAL_PORT: port.default(7233),
  TEMPORAL_UI_PORT: port.default(8233),
  WORKFLOW_BUNDLE_PATH: z.string().min(1).optional(),

  ADMIN_TOKEN: z.string().min(24, 'must be at least 24 characters').optional(),
  SERVICE_DID: z
    .string()
    .regex(/^did:[a-z0-9]+:.+$/, 'must be a DID such as did:zhongshu:hub')
    .default('did:zhongshu:hub'),
  OAUTH_TOKEN_TTL_S: positiveSeconds.default(3600),
  DAEMON_PROTOCOL_VERSION: z.coerce.number().int().positive().default(1),
  /** Local daemon (README "Local daemon"): models it may call (unset: the configured models marked free_tier), DAG
   * tasks run at once, the circuit breaker, the per-call timeout, and whether prompts/outputs enter the audit file. */
  DAEMON_MODEL_WHITELIST: csv.optional(),
  DAEMON_MAX_PARALLEL: z.coerce.number().int().min(1).max(64).default(4),
  DAEMON_BREAKER_THRESHOLD: z.coerce.number().int().min(1).max(1000).default(3),
  DAEMON_BREAKER_COOLDOWN_S: z.coerce.number().int().min(1).max(86_400).default(30),
  DAEMON_CALL_TIMEOUT_S: z.coerce.number().int().min(1).max(600).default(60),
  DAEMON_AUDIT_CLEARTEXT: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),

  TRUTH_DAILY_QUOTA: z.coerce.number().int().positive().default(2000),
  TRUTH_MAX_VALUE_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(64 * 1024),
  /** Deepest nesting of any JSON body (objects and arrays, the body itself is level 1); deeper bodies get 400. */
  JSON_MAX_DEPTH: z.coerce.number().int().min(8).max(512).default(64),
  TRUTH_HIGH_RISK_TYPES: csv.default(['meta_law', 'protocol', 'risk']),
  TRUTH_HIGH_RISK_KEY_PREFIXES: csv.default(['KERNEL.EVOLUTION.DIRECTIVE.']),
  TRUTH_APPROVAL_TIMEOUT_S: positiveSeconds.default(72 * 3600),
  TRUTH_WRITE_TIMEOUT_MS: z.coerce.number().int().positive().default(5000),
  /** A DID found active this recently is not read again for a truth write (api/plugins/auth/did.ts); 0: always read. */
  TRUTH_DID_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(1000),
  /** Truth writes in flight per API process (both listeners); one more is 503 overloaded at once. */
  TRUTH_MAX_IN_FLIGHT: z.coerce.number().int().positive().default(128),
  /**
   * One ledger writer across API replicas (README "Storage", store/ledger/writer-lease.ts): the secret every replica
   * shares (unset: each replica appends itself), where the others reach this one's main listener (unset: this
   * host's address and PORT), and the lease's period.
   */
  LEDGER_FORWARD_SECRET: z.string().min(24, 'must be at least 24 characters').optional(),
  LEDGER_WRITER_URL: z.url({ protocol: /^https?$/ }).optional(),
  LEDGER_WRITER_LEASE_S: z.coerce.number().int().min(3).max(300).default(10),

  /** Registrations (POST /a2a/register, the join form) per client address per calendar minute, across every API process. */
  REGISTER_RATE_LIMIT_PER_MIN: z.coerce.number().int().positive().default(60),
  /** Proxies (addresses, CIDR ranges) whose X-Forwarded-For names the client for per-address request limits. */
  TRUSTED_PROXIES: proxyList.default([]),
  NODE_OFFLINE_AFTER_S: positiveSeconds.default(90),
  NODE_REVIEW_REQUIRED: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  NODE_CACHE_TTL_MS: z.coerce.number().int().min(0).default(5000),
  PRESENCE_FLUSH_MS: z.coerce.number().int().min(0).max(500).default(100),
  /** An approved node's heartbeat is answered before its presence write while the write lag is at most this (0: never). */
  PRESENCE_ACK_LAG_MS: z.coerce.number().int().min(0).max(5000).default(1000),
  API_PROCESSES: z.coerce.number().int().min(1).max(64).default(1),
  NODE_WORKFLOW_HISTORY_LIMIT: z.coerce.number().int().min(20).default(2000),
  HEARTBEAT_HISTORY_INTERVAL_S: positiveSeconds.default(60),
  HEARTBEAT_HISTORY_SIZE: z.coerce.number().int().min(1).max(240).default(60),
  /** Work distribution (README "Work distribution"): a claim's lease, extended by each progress call, and claims per task. */
  TASK_LEASE_S: z.coerce.number().int().min(1).max(86_400).default(300),
  TASK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(3),
  /** A2A binding: how long a blocking SendMessage waits for a final state, and how long one SSE stream stays open. */
  A2A_SEND_WAIT_S: z.coerce.number().int().min(0).max(300).default(30),
  A2A_STREAM_MAX_S: z.coerce.number().int().min(1).max(86_400).default(900),
  TREE_PROPOSAL_HISTORY_LIMIT: z.coerce.number().int().min(20).default(2000),

  /** Chat gateway (README "Chat gateway"): providers from a file and/or inline JSON or YAML; keys only by env name. */
  CHAT_PROVIDERS_FILE: z.string().min(1).optional(),
  CHAT_PROVIDERS: z.string().min(1).optional(),
  /** JSON overriding plan numbers, e.g. {"S1":{"requests_per_minute":5}} (core/chat/plans.ts). */
  CHAT_PLANS: z.string().min(2).optional(),
  CHAT_UPSTREAM_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
  CHAT_RETRY_MAX_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(4000),
  CHAT_BREAKER_FAILURES: z.coerce.number().int().min(1).max(1000).default(5),
  CHAT_BREAKER_COOLDOWN_S: z.coerce.number().int().min(1).max(3600).default(30),
  /** An API key verified this recently is not read again for a completion (api/plugins/auth/api-key.ts); 0: always read. */
  CHAT_KEY_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(1000),
  KERNEL_PROMPT_FILE: z.string().min(1).optional(),
  /** Trial chat (README "Chat gateway"): requests per client address per window, and whose X-Forwarded-For to trust. */
  TRIAL_RATE_LIMIT: z.coerce.number().int().min(1).max(100_000).default(5),
  TRIAL_RATE_WINDOW_S: z.coerce.number().int().min(1).max(86_400).default(600),
  TRIAL_TRUSTED_PROXIES: proxyList.default([]),
  TRIAL_SEMANTIC_THRESHOLD: z.coerce.number().min(0).max(1).default(0.6),
  TRIAL_EXTERNAL_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(15_000),
  /** A model of the chat providers that serves /embeddings: vector similarity beside BM25 (unset: BM25 only). */
  TRIAL_EMBEDDINGS_MODEL: z.string().min(1).optional(),
  TRIAL_VECTOR_THRESHOLD: z.coerce.number().min(-1).max(1).default(0.8),
  /** `local`: a semantic answer is written by the first local model from the passages (else, or when it fails: the passages). */
  TRIAL_SEMANTIC_COMPOSE: z.enum(['passages', 'local']).default('passages'),
  /** The plan (models, limits) of OAuth clients on POST /v1/chat/stream. */
  CHAT_OAUTH_PLAN: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,20}$/, 'a plan name such as S1')
    .default('S1'),

  /** Deployment arbitration (README "Deployment arbitration"): the hub's own nginx and the releases it serves. */
  DEPLOY_WEB: z.enum(['on', 'off']).default('on'),
  DEPLOY_WEB_PORT: port.default(8090),
  NGINX_BIN: z.string().min(1).default('/usr/sbin/nginx'),
  DEPLOY_KEEP_RELEASES: z.coerce.number().int().min(1).max(100).default(5),
  /** The autonomy level (0-5) at or above which a registered DID is an arbitrator (did_register, did_revoke). */
  DEPLOY_ARBITRATOR_LEVEL: z.coerce.number().int().min(0).max(5).default(4),
  PORT_POOL: z
    .string()
    .regex(/^\d{1,5}-\d{1,5}$/, 'first-last, e.g. 18000-18999')
    .default('18000-18999')
    .transform((v) => {
      const [first, last] = v.split('-').map(Number) as [number, number];
      return { first, last };
    })
    .refine(
      (r) => r.first >= 1 && r.last <= 65535 && r.first <= r.last && r.last - r.first < 10_000,
      'PORT_POOL: first <= last, within 1-65535, at most 10,000 ports'
    )
});

export type Config = z.infer<typeof configSchema> & {
  /** DATA_DIR made absolute. */
  dataDir: string;
  /** Base URL of the main listener as clients see it. */
  publicUrl: string;
  /** Base URL of the hub gateway listener (HUB_PORT) as clients see it. */
  hubPublicUrl: string;
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
  return {
    ...c,
    dataDir: path.resolve(c.DATA_DIR),
    publicUrl: (c.PUBLIC_URL ?? `http://localhost:${c.PORT}`).replace(/\/+$/, ''),
    hubPublicUrl: (c.HUB_PUBLIC_URL ?? `http://localhost:${c.HUB_PORT}`).replace(/\/+$/, '')
  };
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

/** Where Temporal is: TEMPORAL_ADDRESS, or the embedded dev server on loopback. */
export function temporalAddress(config: Config): string {
  return config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_PORT}`;
}

/** Where the worker's deploy activities find the hub's nginx and the releases (README "Deployment arbitration"). */
export function deployActivityDeps(config: Config): { dataDir: string; nginxBin: string; webUrl: string } {
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  return {
    dataDir: config.dataDir,
    nginxBin: config.NGINX_BIN,
    webUrl: `http://${host.includes(':') ? `[${host}]` : host}:${config.DEPLOY_WEB_PORT}`
  };
}
