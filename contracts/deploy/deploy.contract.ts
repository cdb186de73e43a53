/**
 * What the API, operators and the deploy/<target> workflow share. One run per target at a time: the workflow id is
 * the deploy lock (a second request while one runs is refused with 409 by the client module). A run either deploys
 * a new release or rolls back to the newest earlier release not marked bad; any failed step is compensated
 * (`current` back to the previous release, the new release marked bad). From the CLI, a rollback:
 *   temporal workflow start --task-queue zhongshu-hub --type deployWorkflow --workflow-id deploy/<target> \
 *     --input '{"version":1,"mode":"rollback","target":"<target>","operation_id":"r20261121T120000000-00000000","keep":5,"hub_did":"did:zhongshu:hub","actor":"operator"}'
 * and every deploy of a target in the Web UI: `DeployTarget = "<target>"` (DeployState: running, deployed,
 * compensated, failed).
 */
import type { FlowTaskQueues } from '../task-queues';
import type { FileDigest, ReleaseFile } from '../../activities/deploy';

export const deployWorkflowId = (target: string): string => `deploy/${target}`;

/** The workflow and its ledger records run on core; files and nginx on commands. */
export const DEPLOY_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core', 'commands'] };
/** ApplicationFailure type: a rollback found no earlier release that is not marked bad. */
export const NO_ROLLBACK_TARGET = 'NoRollbackTarget';

export const DEPLOY_STEPS = ['write_release', 'switch_current', 'reload', 'health_check', 'prune'] as const;
export type DeployStep = (typeof DEPLOY_STEPS)[number];

export interface DeployInput {
  version: 1;
  mode: 'deploy' | 'rollback';
  target: string;
  /** Names the run; for a deploy it is also the new release's id (core/deploy/web.ts releaseId). */
  operation_id: string;
  /** deploy only. */
  files?: ReleaseFile[];
  keep: number;
  hub_did: string;
  actor: string;
}

export interface StepRecord {
  step: DeployStep | 'compensate';
  ok: boolean;
  error?: string;
}

export interface DeployResult {
  outcome: 'deployed' | 'compensated';
  mode: 'deploy' | 'rollback';
  target: string;
  /** The release `current` pointed to when the run ends. */
  current_release: string | null;
  /** The release the run tried to make current. */
  release_id: string;
  previous_release: string | null;
  failed_step: DeployStep | null;
  error: string | null;
  files: FileDigest[];
  pruned: string[];
  steps: StepRecord[];
  ledger_seq: number | null;
}
