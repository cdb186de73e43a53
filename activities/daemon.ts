/**
 * The local daemon's activities. On the core queue: the identity re-check right before each task's model call
 * (current credential state: revoked, isolated, order root digest, version), audit chain appends
 * (DATA_DIR/daemon_audit.jsonl, core/daemon/audit.node.ts) and the chain root mirrored to the ledger
 * (`hub.daemon.dag_finished`). On the models queue: one model call through the openai SDK with the chat gateway's
 * provider configuration (core/chat/upstream.node.ts), no retries (each failed call counts once for the breaker),
 * bounded by DAEMON_CALL_TIMEOUT_S. Provider keys are read from the environment at call time and never returned,
 * written or logged; error messages are redacted.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { Db } from 'mongodb';
import type { Config } from '../core/config.node';
import { loadProviderCatalog } from '../core/chat/providers.node';
import type { ProviderCatalog } from '../core/chat/providers';
import { ChatUpstreams } from '../core/chat/upstream.node';
import { costOf, estimatePromptTokens, estimateTokens, usageFrom } from '../core/chat/usage';
import { AuditHead, AuditRecord, auditChainFor, sha256Hex } from '../core/daemon/audit.node';
import type { ChatMessage, Usage } from '../core/daemon/dag';
import { daemonModelWhitelist, modelRefusal } from '../core/daemon/models';
import { CredentialStore } from '../store/credentials';
import { DaemonAssets } from '../store/daemon/assets';
import type { Ledger } from '../store/ledger/ledger';

export interface DaemonActivityDeps {
  dataDir: string;
  protocolVersion: number;
  catalog: ProviderCatalog;
  whitelist: string[] | undefined;
  /** DAEMON_AUDIT_CLEARTEXT: prompts and outputs enter the audit file in clear too. */
  cleartext: boolean;
  serviceDid: string;
  env?: NodeJS.ProcessEnv;
}

export function daemonActivityDeps(config: Config): DaemonActivityDeps {
  return {
    dataDir: config.dataDir,
    protocolVersion: config.DAEMON_PROTOCOL_VERSION,
    catalog: loadProviderCatalog(config),
    whitelist: config.DAEMON_MODEL_WHITELIST,
    cleartext: config.DAEMON_AUDIT_CLEARTEXT,
    serviceDid: config.SERVICE_DID
  };
}

export interface IdentityCheckInput {
  asset_id: string;
  order_root_sha256: string;
  order_root_version: number | null;
  dag_id: string;
  task_id: string;
}

export interface ModelCallInput {
  dag_id: string;
  task_id: string;
  model: string;
  messages: ChatMessage[];
  max_tokens: number | null;
  timeout_s: number;
}

export interface ModelCallResult {
  output: string;
  output_sha256: string;
  usage: Usage;
  cost: number;
  upstream_model: string;
}

export interface MirrorInput {
  dag_id: string;
  workflow_id: string;
  status: string;
  audit_root: string | null;
  audit_seq: number | null;
  tasks: { task_id: string; status: string; output_sha256: string | null }[];
}

/** Not retried: the model was never called or the call failed; the breaker counts it. */
export const MODEL_CALL_FAILED = 'DaemonModelCallFailed';
export const MODEL_NOT_ALLOWED = 'DaemonModelNotAllowed';
/** How often a model call records a heartbeat (the SDK sends them to the server at most every 24 s: 0.8 × the DAG workflow's 30 s heartbeat timeout). */
const HEARTBEAT_EVERY_MS = 2_000;

export function createDaemonCoreActivities(deps: { db: Db; ledger: Ledger; daemon: DaemonActivityDeps }) {
  const assets = new DaemonAssets(new CredentialStore(deps.db).daemonAssets);
  const chain = auditChainFor(deps.daemon.dataDir);
  return {
    async checkDaemonIdentity(input: IdentityCheckInput): Promise<{ ok: boolean; reason: string | null }> {
      const verdict = await assets.check(
        input.asset_id,
        input.order_root_sha256,
        input.order_root_version,
        deps.daemon.protocolVersion
      );
      if (verdict.ok) return { ok: true, reason: null };
      await chain.append({
        event: 'rejected',
        stage: 'execution',
        asset_id: input.asset_id,
        dag_id: input.dag_id,
        task_id: input.task_id,
        reason: verdict.reason
      });
      if (verdict.isolated_now)
        await chain.append({ event: 'isolated', asset_id: input.asset_id, reason: verdict.reason });
      return { ok: false, reason: verdict.reason };
    },

    async appendDaemonAudit(record: AuditRecord): Promise<AuditHead> {
      return chain.append(record);
    },

    async mirrorDaemonRoot(input: MirrorInput): Promise<{ seq: number }> {
      const { entry } = await deps.ledger.append({
        kind: 'event',
        key: 'hub.daemon.dag_finished',
        value: {
          dag_id: input.dag_id,
          workflow_id: input.workflow_id,
          status: input.status,
          audit_root: input.audit_root,
          audit_seq: input.audit_seq,
          tasks: input.tasks
        },
        truth_type: null,
        did: deps.daemon.serviceDid,
        idempotencyKey: input.workflow_id
      });
      return { seq: entry.seq };
    }
  };
}

export function createDaemonModelActivities(daemon: DaemonActivityDeps) {
  const whitelist = daemonModelWhitelist(daemon.catalog, daemon.whitelist);
  // Retries and the per-provider breaker of the chat gateway are off: the daemon's own breaker counts each call.
  const upstreams = new ChatUpstreams(daemon.catalog, {
    retries: 0,
    retryMaxWaitMs: 0,
    breakerFailures: 1_000_000,
    breakerCooldownMs: 1000,
    ...(daemon.env ? { env: daemon.env } : {})
  });
  const chain = auditChainFor(daemon.dataDir);
  return {
    async callDaemonModel(input: ModelCallInput): Promise<ModelCallResult> {
      const refusal = modelRefusal(daemon.catalog, whitelist, input.model);
      if (refusal) throw ApplicationFailure.nonRetryable(refusal, MODEL_NOT_ALLOWED);
      const model = daemon.catalog.model(input.model)!;
      // Heartbeats let the server notice a worker that died mid-call within the heartbeat timeout, and deliver a
      // cancellation (the DAG's, or this worker's shutdown after its grace time), which aborts the call.
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
      const timeout = AbortSignal.timeout(input.timeout_s * 1000);
      const signal = AbortSignal.any([timeout, ctx.cancellationSignal]);
      try {
        const res = await upstreams.complete(
          [model],
          { messages: input.messages, ...(input.max_tokens ? { max_tokens: input.max_tokens } : {}) },
          signal
        );
        const output = res.value.choices[0]?.message?.content ?? '';
        const u = usageFrom(res.value.usage, () => ({
          prompt: estimatePromptTokens(input.messages),
          completion: estimateTokens(output)
        }));
        const usage = {
          prompt_tokens: u.prompt_tokens,
          completion_tokens: u.completion_tokens,
          total_tokens: u.total_tokens
        };
        if (daemon.cleartext)
          await chain.append({
            event: 'cleartext',
            dag_id: input.dag_id,
            task_id: input.task_id,
            prompt: JSON.stringify(input.messages),
            output
          });
        return {
          output,
          output_sha256: sha256Hex(output),
          usage,
          cost: costOf(usage, model.price),
          upstream_model: model.upstream
        };
      } catch (err) {
        // Cancelled, not failed: this attempt ends as the SDK decides (a shutting-down worker's attempt is retried
        // on another worker; a cancelled DAG stops). Only the model's own answer is the task's failure.
        if (ctx.cancellationSignal.aborted) throw new CancelledFailure('the model call was cancelled');
        const why = timeout.aborted
          ? `the model call took longer than ${input.timeout_s} s`
          : upstreams.redact((err as Error).message ?? String(err));
        throw ApplicationFailure.nonRetryable(why.slice(0, 500), MODEL_CALL_FAILED);
      } finally {
        clearInterval(beat);
      }
    }
  };
}

export type DaemonCoreActivities = ReturnType<typeof createDaemonCoreActivities>;
export type DaemonModelActivities = ReturnType<typeof createDaemonModelActivities>;
