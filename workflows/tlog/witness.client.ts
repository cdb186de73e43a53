/**
 * The client side of witness/<core queue>/<witness name>, for the API's checkpoint publisher
 * (services/tlog/publisher.ts): signal-with-start of `configure` with the witness's settings, which starts the
 * workflow when absent and otherwise passes the settings and asks for a round now; `retire` to the workflows of
 * witnesses no longer configured. Not part of the workflow bundle.
 */
import type { Client } from '@temporalio/client';
import { taskQueueFor } from '../../contracts/task-queues';
import type { LogWitness } from '../../core/config/tlog.node';
import type { tlogWitnessWorkflow } from './witness';
import {
  DEFAULT_WITNESS_BACKOFF_MS,
  DEFAULT_WITNESS_HISTORY_LIMIT,
  DEFAULT_WITNESS_MAX_BACKOFF_MS,
  DEFAULT_WITNESS_POLL_MS,
  TlogWitnessSettings,
  tlogWitnessWorkflowId,
  TLOG_WITNESS_TASK_QUEUES,
  witnessConfigureSignal,
  witnessRetireSignal
} from '../../contracts/tlog/witness.contract';

export async function signalWitnesses(
  client: Client,
  coreQueue: string,
  origin: string,
  witnesses: LogWitness[]
): Promise<void> {
  await Promise.all(
    witnesses.map(async (w) => {
      const settings: TlogWitnessSettings = { origin, name: w.name, verifier_key: w.verifierKey, url: w.url };
      await client.workflow.signalWithStart<typeof tlogWitnessWorkflow, [TlogWitnessSettings]>('tlogWitnessWorkflow', {
        workflowId: tlogWitnessWorkflowId(coreQueue, w.name),
        taskQueue: taskQueueFor(coreQueue, TLOG_WITNESS_TASK_QUEUES.workflow),
        args: [
          {
            version: 1,
            ...settings,
            poll_ms: DEFAULT_WITNESS_POLL_MS,
            backoff_ms: DEFAULT_WITNESS_BACKOFF_MS,
            max_backoff_ms: DEFAULT_WITNESS_MAX_BACKOFF_MS,
            history_limit: DEFAULT_WITNESS_HISTORY_LIMIT
          }
        ],
        signal: witnessConfigureSignal,
        signalArgs: [settings]
      });
    })
  );
}

/**
 * Ends the witness workflows of this hub (witness/<coreQueue>/…) whose witness is not among `witnesses` any more:
 * lists the running ones (Temporal visibility, so one started a moment ago may be missed until the next call) and
 * sends each `retire`. Returns the names retired. Replicas configured differently during a rolling change retire and
 * start a witness's workflow in turn until they agree; they then settle on the new configuration.
 */
export async function retireRemovedWitnesses(
  client: Client,
  coreQueue: string,
  witnesses: LogWitness[]
): Promise<string[]> {
  const prefix = tlogWitnessWorkflowId(coreQueue, '');
  const configured = new Set(witnesses.map((w) => tlogWitnessWorkflowId(coreQueue, w.name)));
  const retired: string[] = [];
  const running = client.workflow.list({
    query: `WorkflowType = "tlogWitnessWorkflow" AND ExecutionStatus = "Running"`
  });
  for await (const wf of running) {
    if (!wf.workflowId.startsWith(prefix) || configured.has(wf.workflowId)) continue;
    const name = wf.workflowId.slice(prefix.length);
    await client.workflow
      .getHandle(wf.workflowId)
      .signal(witnessRetireSignal, { reason: `${name} is no longer a witness of this log (TLOG_WITNESSES, peers)` });
    retired.push(name);
  }
  return retired;
}
