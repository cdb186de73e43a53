/**
 * deploy/<target>: an atomic deploy (or rollback) with compensation, as a saga. Steps, each an activity on the
 * commands queue: write the release, switch `current`, reload nginx, check what nginx serves against the release's
 * SHA-256 digests, prune old releases. A failure from switch_current on puts `current` back to the previous release
 * and reloads; a failed deploy's release is marked bad. The outcome (with every step) is one ledger record
 * `hub.deploy.<outcome>`. Domain errors (no release to roll back to) fail the run with a non-retryable failure.
 */
import { ApplicationFailure, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { FileDigest } from '../../activities/deploy';
import { DeployStateAttr } from '../../core/search-attributes';
import { appendLedgerEntry, commandsProxy, stepError } from './saga-support';
import {
  DeployInput,
  DeployResult,
  DeployStep,
  NO_ROLLBACK_TARGET,
  StepRecord
} from '../../contracts/deploy/deploy.contract';

const message = (err: unknown): string => stepError(err, 1000);

export async function deployWorkflow(input: DeployInput): Promise<DeployResult> {
  const commands = commandsProxy();
  const steps: StepRecord[] = [];
  const previous = await commands.readCurrentRelease({ target: input.target });

  let releaseId = input.operation_id;
  let files: FileDigest[] = [];
  if (input.mode === 'rollback') {
    const pick = await commands.findRollbackRelease({ target: input.target });
    if (!pick) {
      upsertSearchAttributes([{ key: DeployStateAttr, value: 'failed' }]);
      throw ApplicationFailure.nonRetryable(
        `no release of ${input.target} older than ${previous ?? 'none'} that is not marked bad`,
        NO_ROLLBACK_TARGET
      );
    }
    releaseId = pick.release_id;
    files = pick.files;
  }

  let failedStep: DeployStep | null = null;
  let error: string | null = null;
  let pruned: string[] = [];
  const step = async <T>(name: DeployStep, fn: () => Promise<T>): Promise<T> => {
    try {
      const value = await fn();
      steps.push({ step: name, ok: true });
      return value;
    } catch (err) {
      failedStep = name;
      error = message(err);
      steps.push({ step: name, ok: false, error });
      throw err;
    }
  };

  let switched = false;
  try {
    if (input.mode === 'deploy')
      files = await step('write_release', () =>
        commands.writeRelease({ target: input.target, release_id: releaseId, files: input.files ?? [] })
      );
    await step('switch_current', () => commands.switchCurrent({ target: input.target, release_id: releaseId }));
    switched = true;
    await step('reload', () => commands.reloadWeb());
    await step('health_check', () => commands.checkServed({ target: input.target, files }));
  } catch {
    // Compensation: back to what was current, and the deploy's release is never picked again.
    const undo: string[] = [];
    if (switched) {
      await commands
        .switchCurrent({ target: input.target, release_id: previous })
        .catch((e: unknown) => undo.push(`switch back: ${message(e)}`));
      await commands.reloadWeb().catch((e: unknown) => undo.push(`reload: ${message(e)}`));
    }
    if (input.mode === 'deploy') {
      await commands
        .markReleaseBad({
          target: input.target,
          release_id: releaseId,
          reason: `${failedStep ?? 'unknown'}: ${error ?? ''}`
        })
        .catch((e: unknown) => undo.push(`mark bad: ${message(e)}`));
    }
    steps.push({ step: 'compensate', ok: undo.length === 0, ...(undo.length ? { error: undo.join('; ') } : {}) });
  }
  const outcome = failedStep === null ? ('deployed' as const) : ('compensated' as const);
  if (outcome === 'deployed') {
    // A prune that fails leaves extra releases behind; the deploy itself stands.
    pruned = await commands.pruneReleases({ target: input.target, keep: input.keep }).then(
      (removed) => {
        steps.push({ step: 'prune', ok: true });
        return removed;
      },
      (e: unknown) => {
        steps.push({ step: 'prune', ok: false, error: message(e) });
        return [];
      }
    );
  }
  const current = outcome === 'deployed' ? releaseId : previous;
  const recorded = await appendLedgerEntry({
    kind: 'event',
    key: `hub.deploy.${input.mode === 'rollback' && outcome === 'deployed' ? 'rolled_back' : outcome}`,
    value: {
      target: input.target,
      mode: input.mode,
      workflow_id: workflowInfo().workflowId,
      release_id: releaseId,
      previous_release: previous,
      current_release: current,
      failed_step: failedStep,
      error,
      actor: input.actor,
      steps: steps.map((s) => ({ step: s.step, ok: s.ok, error: s.error ?? null }))
    },
    truth_type: null,
    did: input.hub_did,
    idempotency_key: `${workflowInfo().workflowId}/${input.operation_id}`
  });
  upsertSearchAttributes([{ key: DeployStateAttr, value: outcome }]);
  return {
    outcome,
    mode: input.mode,
    target: input.target,
    current_release: current,
    release_id: releaseId,
    previous_release: previous,
    failed_step: failedStep,
    error,
    files,
    pruned,
    steps,
    ledger_seq: recorded.seq
  };
}
