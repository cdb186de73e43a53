/**
 * What the API, operators and the deploy-config workflow share. The `config` action of POST /dal/deploy stores a
 * target's nginx fragment, tests the whole merged config with `nginx -t`, restores the previous files when the test
 * (or the reload) fails, and reloads nginx when it passes. All targets' fragments live in the one nginx config, so
 * one config change runs at a time across targets: the workflow id `deploy-config` is the lock (409 while one runs).
 * From the CLI (remove a target's fragment; the answer is the workflow result):
 *   temporal workflow execute --task-queue zhongshu-hub --type deployConfigWorkflow --workflow-id deploy-config \
 *     --input '{"version":1,"target":"site","fragment":"","operation_id":"c20261121T120000000-00000000","pool":{"first":18000,"last":18999},"hub_did":"did:zhongshu:hub","actor":"operator"}'
 * Search attributes: DeployTarget = the target, DeployState running → configured | rejected | compensated.
 */
import type { FlowTaskQueues } from '../task-queues';

export const DEPLOY_CONFIG_WORKFLOW_ID = 'deploy-config';
/** The workflow and its ledger record run on core; files, nginx -t and the reload on commands. */
export const DEPLOY_CONFIG_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core', 'commands'] };
export const CONFIG_STEPS = ['write_and_test', 'reload'] as const;
export type ConfigStep = (typeof CONFIG_STEPS)[number];

export interface DeployConfigInput {
  version: 1;
  target: string;
  /** The fragment as submitted (core/deploy/fragment.ts); empty removes the target's fragment. */
  fragment: string;
  operation_id: string;
  /** PORT_POOL: proxy_pass may only name a port of the pool. */
  pool: { first: number; last: number };
  hub_did: string;
  actor: string;
}

export interface DeployConfigResult {
  /** configured: tested and reloaded; rejected: nginx -t failed, previous files restored; compensated: the reload failed, restored. */
  outcome: 'configured' | 'rejected' | 'compensated';
  target: string;
  removed: boolean;
  failed_step: ConfigStep | null;
  /** nginx's own text: the test's errors (rejected) or the reload's failure (compensated). */
  nginx_error: string | null;
  steps: { step: ConfigStep | 'restore'; ok: boolean; error?: string }[];
  ledger_seq: number | null;
}
