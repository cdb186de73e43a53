/**
 * What the API, operators and the node-sweeper/<group> workflows share. The presence sweeper replaces a durable
 * timer per node and decides liveness: NODE_SWEEPER_GROUPS workflows, each running one long activity that reads its
 * presence shards (store/federation/presence.ts) every tick, records every online ⇄ offline transition of the
 * approved nodes of its shards itself (node documents, node_changes, ledger events) and sends `livenessChanged` to
 * node/<id> as a mirror. A node that keeps beating costs Temporal nothing. Temporal keeps one attempt of each
 * group's activity running across workers (heartbeat timeout, retries), so several workers never sweep a group
 * twice.
 *   temporal workflow describe --workflow-id node-sweeper/zhongshu-hub/0
 *   temporal workflow list --query 'WorkflowType = "nodeSweeperWorkflow"'
 */
import type { FlowTaskQueues } from '../task-queues';

/** Sweeper workflows; group g sweeps the presence shards s with s % NODE_SWEEPER_GROUPS = g. */
export const NODE_SWEEPER_GROUPS = 4;
/** One set of sweepers per hub: the core task queue names the hub, as for task-leases/<queue> (hubs, or test
 * services, that share a Temporal namespace each sweep their own presence). */
export const nodeSweeperWorkflowId = (coreQueue: string, group: number): string => `node-sweeper/${coreQueue}/${group}`;
export const NODE_SWEEPER_TASK_QUEUES: FlowTaskQueues = { workflow: 'core', activities: ['core'] };

export interface NodeSweeperInput {
  version: 1;
  group: number;
  groups: number;
  /** NODE_OFFLINE_AFTER_S of the API that started the sweeper. */
  offline_after_s: number;
  /** Time between two reads of the group's shards. */
  tick_ms: number;
  /** One activity attempt sweeps this long, then returns (the workflow starts the next). */
  run_ms: number;
  /** The hub's DID, signing the liveness transitions' ledger events (SERVICE_DID; absent in older runs). */
  hub_did?: string;
  /** How many times the workflow continued as new. */
  runs?: number;
}

/** Tick of the sweeper (a silent node is reported at most this long after its deadline). */
export const NODE_SWEEPER_TICK_MS = 1000;
export const NODE_SWEEPER_RUN_MS = 10 * 60_000;
/** Activities per run before continuing as new (the history stays at a few hundred events). */
export const NODE_SWEEPER_RUNS_PER_HISTORY = 50;
