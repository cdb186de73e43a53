/**
 * Deployment arbitration (SPEC §2.8, §4.8; README "Deployment arbitration").
 *   GET  /dal/health   (public) ok, service, version "V2.0", port (the deploy web port), 锚定, and the web server's state
 *   POST /dal/deploy   (X-DID) { action, … }: deploy { target, content | files } and rollback { target } run the
 *                      deploy/<target> workflow and answer its outcome; an unknown action is 400 listing the actions
 * Actions that need nginx answer 503 naming the package to install when DEPLOY_WEB=off or nginx is missing.
 */
import fs from 'node:fs';
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { AppError } from '../../../core/errors';
import {
  DEFAULT_FILE,
  FILE_PATH_PATTERN,
  MAX_FILE_BYTES,
  MAX_FILES,
  MAX_RELEASE_BYTES,
  TARGET_PATTERN
} from '../../../core/deploy/web';
import { SERVICE_NAME } from '../../../core/version';
import { runDeploy } from '../../../workflows/deploy/deploy.client';
import { runDeployConfig } from '../../../workflows/deploy/config.client';
import { FragmentError, MAX_FRAGMENT_BYTES, parseFragment } from '../../../core/deploy/fragment';
import { queryInt } from '../../../core/identifiers';
import type { PortPoolStore } from '../../../store/deploy/ports';
import type { DidRegistryStore, RegistryEntry } from '../../../store/deploy/registry';
import type { Ledger } from '../../../store/ledger/ledger';
import { didSchema, usedDidSchema } from '../../../core/identifiers';
import { digestsEqual, hashSecret } from '../../../core/credentials.node';
import type { FastifyRequest } from 'fastify';
import { randomBytes } from 'node:crypto';
import { canonicalJson } from '../../../core/ledger/canonical-json';
import { SEED_KEY_PREFIX } from '../../../core/ledger/truth-record';
import type { WorkOrderStore } from '../../../store/deploy/work-orders';
import { startWorkOrder } from '../../../workflows/deploy/work-order.client';

export const DAL_VERSION = 'V2.0' as const;
export const DAL_ANCHOR = 'zhongshu-hub deployment arbitration: releases are atomic, every outcome is in the ledger';
export const DEPLOY_ACTIONS = [
  'deploy',
  'rollback',
  'config',
  'port_alloc',
  'port_release',
  'port_register',
  'did_register',
  'did_revoke',
  'inbox_push',
  'inbox_ack'
] as const;
/** The registry channel that allows deploy, rollback, config and the port pool. */
export const DEPLOY_CHANNEL = 'deploy';
export const MAX_AUTONOMY_LEVEL = 5;
const INSTALL_HINT = 'apt-get install -y nginx';

const target = z
  .string()
  .regex(TARGET_PATTERN)
  .describe('one URL path segment: lower-case letters, digits, _ and -; served at /<target>/');
const fileContent = z.string().max(MAX_FILE_BYTES);
const deployBody = z
  .object({
    action: z.literal('deploy'),
    target,
    content: fileContent.optional().describe(`becomes ${DEFAULT_FILE} (and is the only file when files is absent)`),
    files: z
      .record(z.string().regex(FILE_PATH_PATTERN).max(800), fileContent)
      .refine((files) => Object.keys(files).length > 0, 'files, when given, names at least one file')
      .meta({ minProperties: 1 })
      .optional()
      .describe(`more files: relative path → content (at most ${MAX_FILES}, ${MAX_RELEASE_BYTES} bytes in all)`)
  })
  .strict()
  // The handler refuses a deploy with neither (400 naming body.content); the document says so.
  .meta({ anyOf: [{ required: ['content'] }, { required: ['files'] }] });
const rollbackBody = z.object({ action: z.literal('rollback'), target }).strict();
const configBody = z
  .object({
    action: z.literal('config'),
    target,
    fragment: z
      .string()
      .max(MAX_FRAGMENT_BYTES)
      .describe(
        'nginx location and/or server blocks for this target (README "Deployment arbitration": locations under /<target>/, server blocks with a server_name and no listen, ' +
          'root/alias only @current[/path], proxy_pass only to a pool port; no include, load_module, listen, logs or files elsewhere); empty removes the fragment'
      )
  })
  .strict();
const app = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/)
  .describe('an application name (letters, digits, . _ -; at most 64)');
const anyPort = z.number().int().min(1).max(65535);
const portAllocBody = z.object({ action: z.literal('port_alloc'), app }).strict();
const portReleaseBody = z
  .object({ action: z.literal('port_release'), app: app.optional(), port: anyPort.optional() })
  .strict()
  .describe('exactly one of app and port')
  // What the handler enforces, stated in the document too, so a client (and the fuzzer) knows both together are refused.
  .meta({ oneOf: [{ required: ['app'] }, { required: ['port'] }] });
const portRegisterBody = z.object({ action: z.literal('port_register'), app, port: anyPort }).strict();
const didRegisterBody = z
  .object({
    action: z.literal('did_register'),
    did: didSchema,
    node_id: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/)
      .describe('the node this DID belongs to (letters, digits, . _ : -; at most 128)'),
    public_key: z
      .string()
      .min(1)
      .max(4096)
      .regex(/^[\x20-\x7e\n\r]+$/, 'printable ASCII (PEM, multibase, base64url)')
      .optional()
      .describe("the node's public key, as text"),
    autonomy_level: z
      .number()
      .int()
      .min(0)
      .max(MAX_AUTONOMY_LEVEL)
      .describe(
        `0-${MAX_AUTONOMY_LEVEL}; at or above DEPLOY_ARBITRATOR_LEVEL the DID is an arbitrator (may use did_register and did_revoke)`
      ),
    channels: z
      .array(z.string().regex(/^[a-z][a-z0-9_.-]{0,31}$/))
      .max(16)
      .refine((c) => new Set(c).size === c.length, 'channels are distinct')
      .meta({ uniqueItems: true })
      .describe(`capability channels; "${DEPLOY_CHANNEL}" allows deploy, rollback, config and the port pool`)
  })
  .strict();
const nodeId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/);
const inboxPushBody = z
  .object({
    action: z.literal('inbox_push'),
    key: z
      .string()
      .max(256)
      .regex(/^KERNEL\.EVOLUTION\.DIRECTIVE\.[A-Za-z0-9_:+-]+(\.[A-Za-z0-9_:+-]+)*$/)
      .describe(`an execution-seed key: ${SEED_KEY_PREFIX}<name>`),
    value: z
      .object({ directive_action: z.string().min(1).max(200) })
      .passthrough()
      .describe('the work order: directive_action and any other members'),
    node_id: nodeId.describe('the node whose queue (GET /api/instructions/<node_id>) receives the order once approved')
  })
  .strict();
const inboxAckBody = z
  .object({
    action: z.literal('inbox_ack'),
    id: z
      .string()
      .regex(/^wo_[0-9a-f]{24}$/)
      .describe('the instruction_id')
  })
  .strict();
const didRevokeBody = z.object({ action: z.literal('did_revoke'), did: usedDidSchema }).strict();
const dalBody = z.discriminatedUnion(
  'action',
  [
    deployBody,
    rollbackBody,
    configBody,
    portAllocBody,
    portReleaseBody,
    portRegisterBody,
    didRegisterBody,
    didRevokeBody,
    inboxPushBody,
    inboxAckBody
  ],
  {
    error: () => `action must be one of: ${DEPLOY_ACTIONS.join(', ')}`
  }
);
const portAnswer = z.object({
  ok: z.literal(true),
  action: z.enum(['port_alloc', 'port_release', 'port_register']),
  app: z.string(),
  port: z.number().int(),
  existing: z.boolean().describe('port_alloc/port_register: the app already held this port')
});

const registryAnswer = z.object({
  ok: z.literal(true),
  action: z.enum(['did_register', 'did_revoke']),
  did: z.string(),
  node_id: z.string().nullable(),
  autonomy_level: z.number().int(),
  channels: z.array(z.string()),
  created: z.boolean().describe('did_register: the DID was not registered before'),
  revoked: z.boolean(),
  ledger_seq: z.number().int()
});
const inboxPushAnswer = z.object({
  ok: z.literal(true),
  action: z.literal('inbox_push'),
  pending: z.literal(true),
  instruction_id: z.string(),
  approval_id: z.string(),
  node_id: z.string(),
  workflow_id: z.string(),
  approval_workflow_id: z.string(),
  status_url: z.string().describe('the approval: GET it; approvers decide it there like any held write'),
  message: z.string()
});
const inboxAckAnswer = z.object({
  ok: z.literal(true),
  action: z.literal('inbox_ack'),
  instruction_id: z.string(),
  node_id: z.string(),
  acked_at: z.string(),
  already_acked: z.boolean(),
  ledger_seq: z.number().int().nullable()
});
const configAnswer = z.object({
  ok: z.literal(true),
  action: z.literal('config'),
  outcome: z.literal('configured'),
  target: z.string(),
  removed: z.boolean().describe('the fragment was empty: the target has no fragment now'),
  steps: z.array(z.object({ step: z.string(), ok: z.boolean(), error: z.string().optional() })),
  workflow_id: z.string(),
  ledger_seq: z.number().int().nullable()
});
const configFailed = z
  .object({
    ok: z.literal(false),
    error: z.literal('config_failed'),
    message: z.string(),
    trace_id: z.string(),
    outcome: z.literal('compensated'),
    failed_step: z.string(),
    nginx_error: z.string().nullable()
  })
  .passthrough();
const stepSchema = z.object({ step: z.string(), ok: z.boolean(), error: z.string().optional() });
const deployAnswer = z.object({
  ok: z.boolean().describe('true when the release is live; false when a step failed and was compensated'),
  action: z.enum(DEPLOY_ACTIONS),
  outcome: z.enum(['deployed', 'compensated']),
  target: z.string(),
  release_id: z.string(),
  previous_release: z.string().nullable(),
  current_release: z.string().nullable(),
  failed_step: z.string().nullable(),
  error: z.string().nullable(),
  url: z.string().describe('where nginx serves the target'),
  files: z.array(z.object({ path: z.string(), sha256: z.string() })),
  pruned: z.array(z.string()),
  steps: z.array(stepSchema),
  workflow_id: z.string(),
  ledger_seq: z.number().int().nullable()
});
const failedAnswer = deployAnswer
  .omit({ ok: true, error: true })
  .extend({
    ok: z.literal(false),
    error: z.literal('deploy_failed'),
    message: z.string(),
    trace_id: z.string(),
    reason: z.string().describe('why the failed step failed')
  })
  .passthrough();

const errorShape = z
  .object({ ok: z.literal(false), error: z.string(), message: z.string(), trace_id: z.string() })
  .passthrough();

export const deployRoutes: FastifyPluginAsyncZod<{
  temporal: Client;
  config: Config;
  ports: PortPoolStore;
  registry: DidRegistryStore;
  ledger: Ledger;
  adminTokenHash: string;
  orders: WorkOrderStore;
}> = async (app, { temporal, config, ports, registry, ledger, adminTokenHash, orders }) => {
  /**
   * Who may do what (README "Deployment arbitration"): X-DID authenticates (auth model did); the registry entry then
   * decides. The administrator token (Authorization: Bearer, beside X-DID) allows everything.
   */
  const isAdmin = (request: FastifyRequest): boolean => {
    const m = /^Bearer\s+(\S+)$/i.exec(String(request.headers.authorization ?? ''));
    return m !== null && digestsEqual(adminTokenHash, hashSecret(m[1]!));
  };
  const allow = async (
    request: FastifyRequest,
    need: 'deploy' | 'arbitrator'
  ): Promise<{ admin: boolean; entry: RegistryEntry | null }> => {
    const admin = isAdmin(request);
    const entry = await registry.get(request.principal!.id);
    if (admin) return { admin, entry };
    if (need === 'deploy' && !(entry?.channels ?? []).includes(DEPLOY_CHANNEL)) {
      throw new AppError(
        'forbidden',
        `${request.principal!.id} has no "${DEPLOY_CHANNEL}" channel in the registry (did_register by an arbitrator, or the admin token)`
      );
    }
    if (need === 'arbitrator' && (entry?.autonomy_level ?? 0) < config.DEPLOY_ARBITRATOR_LEVEL) {
      throw new AppError(
        'forbidden',
        `registry actions need an arbitrator: autonomy level ${config.DEPLOY_ARBITRATOR_LEVEL} or above (or the admin token); ${request.principal!.id} has ${entry?.autonomy_level ?? 0}`
      );
    }
    return { admin, entry };
  };

  const webHost = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  const webUrl = `http://${webHost}:${config.DEPLOY_WEB_PORT}`;
  /** Why nginx-needing actions cannot run, or null. Checked per request: installing nginx needs no API restart. */
  const webUnavailable = (): string | null => {
    if (config.DEPLOY_WEB === 'off')
      return `DEPLOY_WEB=off: the deploy web server is switched off (set DEPLOY_WEB=on and install nginx: ${INSTALL_HINT})`;
    try {
      fs.accessSync(config.NGINX_BIN, fs.constants.X_OK);
      return null;
    } catch {
      return `nginx is not installed (${config.NGINX_BIN} missing): install it with ${INSTALL_HINT}, then restart`;
    }
  };

  app.get(
    '/dal/health',
    {
      config: { auth: 'none' },
      schema: {
        response: {
          200: z.object({
            ok: z.boolean(),
            service: z.string(),
            version: z.literal(DAL_VERSION),
            port: z.number().int().describe('the deploy web server port (DEPLOY_WEB_PORT)'),
            锚定: z.string(),
            web: z
              .enum(['up', 'down', 'off', 'not_installed'])
              .describe('the hub nginx: answering, not answering, DEPLOY_WEB=off, or not installed'),
            web_detail: z.string().nullable()
          })
        }
      }
    },
    async () => {
      const why = webUnavailable();
      let web: 'up' | 'down' | 'off' | 'not_installed' =
        config.DEPLOY_WEB === 'off' ? 'off' : why ? 'not_installed' : 'down';
      if (!why) {
        web = await fetch(`${webUrl}/`, { signal: AbortSignal.timeout(1000) }).then(
          (r) => (r.ok ? 'up' : 'down'),
          () => 'down'
        );
      }
      return {
        ok: true,
        service: `${SERVICE_NAME}-dal`,
        version: DAL_VERSION,
        port: config.DEPLOY_WEB_PORT,
        锚定: DAL_ANCHOR,
        web,
        web_detail: why
      };
    }
  );

  app.post(
    '/dal/deploy',
    {
      config: { auth: 'did' },
      // SPEC §4.8: Content-Type application/json or 415 (Fastify would parse text/plain and answer 400).
      preValidation: async (request) => {
        const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (type !== 'application/json')
          throw new AppError('unsupported_media_type', 'POST /dal/deploy takes Content-Type: application/json');
      },
      schema: {
        body: dalBody,
        response: {
          200: z.union([deployAnswer, configAnswer, portAnswer, registryAnswer, inboxAckAnswer]),
          202: inboxPushAnswer.describe('inbox_push: the order is held for approval'),
          403: errorShape.describe(
            'The DID lacks the deploy channel (or, for did_register/did_revoke, the arbitrator level)'
          ),
          404: errorShape,
          409: errorShape,
          502: z.union([failedAnswer, configFailed])
        }
      }
    },
    async (request, reply) => {
      const body = request.body;
      if (body.action === 'did_register' || body.action === 'did_revoke') {
        const who = await allow(request, 'arbitrator');
        const by = who.admin ? 'admin' : request.principal!.id;
        if (body.action === 'did_register') {
          // An arbitrator cannot make a DID more autonomous than itself.
          if (!who.admin && body.autonomy_level > (who.entry?.autonomy_level ?? 0)) {
            throw new AppError(
              'forbidden',
              `an arbitrator of level ${who.entry?.autonomy_level ?? 0} cannot grant level ${body.autonomy_level}`
            );
          }
          const { entry, created } = await registry.register({
            did: body.did,
            node_id: body.node_id,
            public_key: body.public_key ?? null,
            autonomy_level: body.autonomy_level,
            channels: body.channels,
            by
          });
          const { entry: recorded } = await ledger.append({
            kind: 'event',
            key: 'hub.deploy.did_registered',
            value: {
              did: body.did,
              node_id: body.node_id,
              public_key: body.public_key ?? null,
              autonomy_level: body.autonomy_level,
              channels: body.channels,
              created,
              by
            },
            did: config.SERVICE_DID,
            truth_type: 'config'
          });
          return {
            ok: true as const,
            action: body.action,
            did: body.did,
            node_id: entry.node_id ?? null,
            autonomy_level: entry.autonomy_level ?? 0,
            channels: entry.channels ?? [],
            created,
            revoked: false,
            ledger_seq: recorded.seq
          };
        }
        const entry = await registry.get(body.did);
        if (!entry || entry.revoked_at !== null || !(await registry.revoke(body.did, by)))
          throw new AppError('not_found', `no active DID ${body.did}`);
        const { entry: recorded } = await ledger.append({
          kind: 'event',
          key: 'hub.deploy.did_revoked',
          value: { did: body.did, node_id: entry.node_id ?? null, by },
          did: config.SERVICE_DID,
          truth_type: 'config'
        });
        return {
          ok: true as const,
          action: body.action,
          did: body.did,
          node_id: entry.node_id ?? null,
          autonomy_level: entry.autonomy_level ?? 0,
          channels: entry.channels ?? [],
          created: false,
          revoked: true,
          ledger_seq: recorded.seq
        };
      }
      if (body.action === 'inbox_ack') {
        // Only the node the order is for (its DID's registry node_id), or the admin token.
        const order = await orders.get(body.id);
        if (!order)
          throw new AppError('not_found', `no work order ${body.id} in any queue (not approved yet, or unknown)`);
        const admin = isAdmin(request);
        const entry = await registry.get(request.principal!.id);
        if (!admin && entry?.node_id !== order.node_id)
          throw new AppError(
            'forbidden',
            `work order ${body.id} is for node ${order.node_id}; ${request.principal!.id} is not that node's DID`
          );
        const { order: after, acked } = await orders.ack(body.id, request.principal!.id);
        let seq: number | null = null;
        if (acked) {
          const { entry: recorded } = await ledger.append({
            kind: 'event',
            key: 'hub.deploy.inbox_acked',
            value: {
              instruction_id: body.id,
              node_id: order.node_id,
              key: order.key,
              by: request.principal!.id,
              acked_at: after!.acked_at
            },
            did: config.SERVICE_DID,
            truth_type: null
          });
          seq = recorded.seq;
        }
        return {
          ok: true as const,
          action: body.action,
          instruction_id: body.id,
          node_id: order.node_id,
          acked_at: after!.acked_at!,
          already_acked: !acked,
          ledger_seq: seq
        };
      }
      await allow(request, 'deploy');
      if (body.action === 'inbox_push') {
        const valueJson = canonicalJson(body.value);
        if (Buffer.byteLength(valueJson) > config.TRUTH_MAX_VALUE_BYTES)
          throw new AppError(
            'payload_too_large',
            `value is ${Buffer.byteLength(valueJson)} bytes as canonical JSON; the limit is ${config.TRUTH_MAX_VALUE_BYTES}`
          );
        const hex = randomBytes(12).toString('hex');
        const instructionId = `wo_${hex}`;
        const approvalId = `apr_${randomBytes(12).toString('hex')}`;
        const started = await startWorkOrder(temporal, config.TEMPORAL_TASK_QUEUE, {
          version: 1,
          instruction_id: instructionId,
          node_id: body.node_id,
          approval: {
            version: 1,
            approval_id: approvalId,
            truth: {
              key: body.key,
              value_json: valueJson,
              truth_type: null,
              did: request.principal!.id,
              idempotency_key: `work-order:${instructionId}`
            },
            held_because: `key prefix ${SEED_KEY_PREFIX} (work order for node ${body.node_id})`,
            requested_at: new Date().toISOString(),
            timeout_seconds: config.TRUTH_APPROVAL_TIMEOUT_S,
            hub_did: config.SERVICE_DID
          },
          hub_did: config.SERVICE_DID,
          actor: request.principal!.id
        });
        return reply.code(202).send({
          ok: true as const,
          action: body.action,
          pending: true as const,
          instruction_id: instructionId,
          approval_id: approvalId,
          node_id: body.node_id,
          ...started,
          status_url: `${config.publicUrl}/api/truth/approvals/${approvalId}`,
          message: `held for approval (${approvalId}); once approved it is queued at GET /api/instructions/${body.node_id}`
        });
      }
      // The port pool needs no web server.
      if (body.action === 'port_alloc')
        return { ok: true as const, action: body.action, ...(await ports.allocate(body.app)) };
      if (body.action === 'port_register')
        return { ok: true as const, action: body.action, ...(await ports.register(body.app, body.port)) };
      if (body.action === 'port_release') {
        if ((body.app === undefined) === (body.port === undefined)) {
          throw new AppError('invalid_request', 'port_release takes exactly one of app and port', {
            fields: [{ field: 'body', message: 'exactly one of app and port' }]
          });
        }
        const released = await ports.release(body.app !== undefined ? { app: body.app } : { port: body.port! });
        if (!released)
          throw new AppError(
            'not_found',
            `no port is held by ${body.app !== undefined ? `app ${body.app}` : `port ${body.port}`}`
          );
        return { ok: true as const, action: body.action, app: released.app, port: released._id, existing: true };
      }
      const why = webUnavailable();
      if (why) throw new AppError('unavailable', why, { install: INSTALL_HINT });
      if (body.action === 'config') {
        try {
          parseFragment(body.fragment, {
            target: body.target,
            poolFirst: config.PORT_POOL.first,
            poolLast: config.PORT_POOL.last
          });
        } catch (err) {
          if (!(err instanceof FragmentError)) throw err;
          throw new AppError('invalid_request', `fragment refused: ${err.message}`, {
            fields: [{ field: 'body.fragment', message: err.message }]
          });
        }
        const result = await runDeployConfig(temporal, config.TEMPORAL_TASK_QUEUE, {
          target: body.target,
          fragment: body.fragment,
          pool: config.PORT_POOL,
          hub_did: config.SERVICE_DID,
          actor: request.principal!.id
        });
        const common = {
          target: result.target,
          removed: result.removed,
          steps: result.steps,
          workflow_id: result.workflow_id,
          ledger_seq: result.ledger_seq
        };
        if (result.outcome === 'configured')
          return { ok: true as const, action: 'config' as const, outcome: 'configured' as const, ...common };
        if (result.outcome === 'rejected') {
          // nginx -t refused the merged config: the previous files are back and nginx serves as before.
          throw new AppError(
            'invalid_request',
            `nginx -t refused the merged config; the previous configuration was restored: ${result.nginx_error ?? ''}`,
            {
              fields: [{ field: 'body.fragment', message: result.nginx_error ?? 'nginx -t failed' }],
              nginx_error: result.nginx_error,
              outcome: 'rejected',
              restored: true,
              ...common
            }
          );
        }
        return reply.code(502).send({
          ok: false as const,
          error: 'config_failed' as const,
          outcome: 'compensated' as const,
          failed_step: result.failed_step ?? 'unknown',
          nginx_error: result.nginx_error,
          message: `config_failed: ${result.failed_step} failed (${result.nginx_error ?? 'unknown'}); the previous configuration was restored`,
          trace_id: String(request.id),
          ...common
        });
      }
      let files: { path: string; content: string }[] | undefined;
      if (body.action === 'deploy') {
        const map = new Map<string, string>();
        if (body.content !== undefined) map.set(DEFAULT_FILE, body.content);
        for (const [p, c] of Object.entries(body.files ?? {})) map.set(p, c);
        if (map.size === 0)
          throw new AppError('invalid_request', 'deploy needs content or files', {
            fields: [{ field: 'body.content', message: 'content or files is required' }]
          });
        if (map.size > MAX_FILES)
          throw new AppError('invalid_request', `at most ${MAX_FILES} files`, {
            fields: [{ field: 'body.files', message: `at most ${MAX_FILES} files` }]
          });
        const paths = [...map.keys()];
        // A path that is also a directory of another (a and a/b) cannot both be files.
        const clash = paths.find((p) => paths.some((q) => q.startsWith(`${p}/`)));
        if (clash)
          throw new AppError('invalid_request', `${clash} is both a file and a directory`, {
            fields: [{ field: 'body.files', message: `${clash} is both a file and a directory` }]
          });
        const total = [...map.values()].reduce((n, c) => n + Buffer.byteLength(c), 0);
        if (total > MAX_RELEASE_BYTES)
          throw new AppError('payload_too_large', `a release holds at most ${MAX_RELEASE_BYTES} bytes (got ${total})`);
        files = [...map].map(([path, content]) => ({ path, content }));
      }
      const result = await runDeploy(temporal, config.TEMPORAL_TASK_QUEUE, {
        mode: body.action,
        target: body.target,
        files,
        keep: config.DEPLOY_KEEP_RELEASES,
        hub_did: config.SERVICE_DID,
        actor: request.principal!.id
      });
      const answer = {
        ok: result.outcome === 'deployed',
        action: body.action,
        outcome: result.outcome,
        target: result.target,
        release_id: result.release_id,
        previous_release: result.previous_release,
        current_release: result.current_release,
        failed_step: result.failed_step,
        error: result.error,
        url: `${webUrl}/${result.target}/`,
        files: result.files,
        pruned: result.pruned,
        steps: result.steps,
        workflow_id: result.workflow_id,
        ledger_seq: result.ledger_seq
      };
      if (result.outcome === 'deployed') return answer;
      // The one error shape, with the outcome beside it: which step failed, why, and that it was compensated.
      const { ok: _ok, error: _error, ...rest } = answer;
      const reason = result.error ?? 'unknown';
      return reply.code(502).send({
        ...rest,
        ok: false as const,
        error: 'deploy_failed' as const,
        reason,
        message: `deploy_failed: ${result.failed_step} failed (${reason}); compensated, ${result.previous_release ?? 'no release'} is current`,
        trace_id: String(request.id)
      });
    }
  );

  app.get(
    '/dal/ports',
    {
      config: { auth: 'did' },
      schema: {
        querystring: z.object({ limit: queryInt(1, 1000).default(200), offset: queryInt(0, 100_000).default(0) }),
        response: {
          403: errorShape.describe('The DID lacks the deploy channel'),
          200: z.object({
            ok: z.literal(true),
            pool: z.object({ first: z.number().int(), last: z.number().int() }),
            total: z.number().int(),
            ports: z.array(
              z.object({
                port: z.number().int(),
                app: z.string(),
                kind: z.enum(['pool', 'registered']),
                at: z.string()
              })
            )
          })
        }
      }
    },
    async (request) => {
      await allow(request, 'deploy');
      const { total, ports: list } = await ports.list(request.query.limit, request.query.offset);
      return {
        ok: true as const,
        pool: config.PORT_POOL,
        total,
        ports: list.map(({ _id, ...rest }) => ({ port: _id, ...rest }))
      };
    }
  );
};
