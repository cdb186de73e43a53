/**
 * node-sweeper/<group>: runs the presence sweep of one group of presence shards (activities/federation/
 * node-lifecycle-sweeper.ts, sweepPresence: it decides and records the group's online ⇄ offline transitions) as one long
 * activity after another; Temporal restarts it on another worker
 * when the one running it stops heartbeating. Continues as new every NODE_SWEEPER_RUNS_PER_HISTORY activities.
 */
import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import {
  NodeSweeperInput,
  NODE_SWEEPER_RUNS_PER_HISTORY
} from '../../contracts/federation/node-lifecycle-sweeper.contract';

const { sweepPresence } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '5 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds' }
});

export async function nodeSweeperWorkflow(input: NodeSweeperInput): Promise<void> {
  for (let i = 0; i < NODE_SWEEPER_RUNS_PER_HISTORY; i++) {
    await sweepPresence({
      group: input.group,
      groups: input.groups,
      offline_after_s: input.offline_after_s,
      tick_ms: input.tick_ms,
      run_ms: input.run_ms,
      ...(input.hub_did ? { hub_did: input.hub_did } : {})
    });
  }
  return continueAsNew<typeof nodeSweeperWorkflow>({ ...input, runs: (input.runs ?? 0) + 1 });
}
