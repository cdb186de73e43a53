/**
 * Task queues by kind of work, so a slow model call or a long external command (nginx, file deploys) can never
 * delay a truth approval or a node's state change: each kind has its own queue and its own pollers.
 *   core      every workflow, and the activities that only touch MongoDB (ledger appends, node state, the tree)
 *   models    activities that call model providers (the chat gateway and the daemon's DAG tasks)
 *   commands  activities that run long external commands
 * Queue names derive from TEMPORAL_TASK_QUEUE (the core queue): `zhongshu-hub`, `zhongshu-hub-models`,
 * `zhongshu-hub-commands`. A workflow derives them from its own queue (workflowInfo().taskQueue), so a flow's
 * contract names the kind its activities run on and nothing else is configured. Pure: safe in the sandbox.
 */
export const TASK_QUEUE_KINDS = ['core', 'models', 'commands'] as const;
export type TaskQueueKind = (typeof TASK_QUEUE_KINDS)[number];

export function taskQueueFor(coreQueue: string, kind: TaskQueueKind): string {
  return kind === 'core' ? coreQueue : `${coreQueue}-${kind}`;
}

/** What each flow's contract declares: the queue kind its workflow and its activities run on. */
export interface FlowTaskQueues {
  workflow: 'core';
  activities: readonly TaskQueueKind[];
}
