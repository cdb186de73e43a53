/**
 * deploy-config: a target's nginx fragment changed under a real `nginx -t`. Steps, activities on the commands queue:
 * write the fragment files and test the whole merged config (the activity restores the previous files itself when the
 * test fails, so nginx, not yet reloaded, keeps serving the old config), then `nginx -s reload`; a failed reload
 * restores the previous files too (compensation). The outcome is one ledger record `hub.deploy.config_<outcome>`.
 */
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { DeployStateAttr } from '../../core/search-attributes';
import { appendLedgerEntry, commandsProxy, stepError } from './saga-support';
import type { ConfigStep, DeployConfigInput, DeployConfigResult } from '../../contracts/deploy/config.contract';

const message = (err: unknown): string => stepError(err, 2000);

export async function deployConfigWorkflow(input: DeployConfigInput): Promise<DeployConfigResult> {
  const commands = commandsProxy(['InvalidFragment']);
  const steps: DeployConfigResult['steps'] = [];
  let failedStep: ConfigStep | null = null;
  let nginxError: string | null = null;
  let outcome: DeployConfigResult['outcome'] = 'configured';

  try {
    const test = await commands.applyConfig({
      target: input.target,
      operation_id: input.operation_id,
      fragment: input.fragment,
      pool: input.pool
    });
    if (test.ok) {
      steps.push({ step: 'write_and_test', ok: true });
    } else {
      failedStep = 'write_and_test';
      nginxError = test.nginx_error;
      outcome = 'rejected';
      steps.push({ step: 'write_and_test', ok: false, error: test.nginx_error });
      steps.push({ step: 'restore', ok: true });
    }
  } catch (err) {
    // The write itself failed (or was refused): put back whatever was replaced.
    failedStep = 'write_and_test';
    nginxError = message(err);
    outcome = 'compensated';
    steps.push({ step: 'write_and_test', ok: false, error: nginxError });
    await commands.restoreConfig({ target: input.target, operation_id: input.operation_id }).then(
      () => steps.push({ step: 'restore', ok: true }),
      (e: unknown) => steps.push({ step: 'restore', ok: false, error: message(e) })
    );
  }

  if (failedStep === null) {
    try {
      await commands.reloadConfirmed({ operation_id: input.operation_id, wait_ms: 10_000 });
      steps.push({ step: 'reload', ok: true });
      await commands.dropConfigBackup({ operation_id: input.operation_id });
    } catch (err) {
      failedStep = 'reload';
      nginxError = message(err);
      outcome = 'compensated';
      steps.push({ step: 'reload', ok: false, error: nginxError });
      // The previous files back, and nginx told to load them again: an unconfirmed reload may still have happened.
      await commands
        .restoreConfig({ target: input.target, operation_id: input.operation_id })
        .then(() => commands.reloadWeb().catch(() => undefined))
        .then(
          () => steps.push({ step: 'restore', ok: true }),
          (e: unknown) => steps.push({ step: 'restore', ok: false, error: message(e) })
        );
    }
  }

  const removed = input.fragment.trim() === '';
  const recorded = await appendLedgerEntry({
    kind: 'event',
    key: `hub.deploy.config_${outcome}`,
    value: {
      target: input.target,
      workflow_id: workflowInfo().workflowId,
      operation_id: input.operation_id,
      removed,
      failed_step: failedStep,
      nginx_error: nginxError,
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
    target: input.target,
    removed,
    failed_step: failedStep,
    nginx_error: nginxError,
    steps,
    ledger_seq: recorded.seq
  };
}
