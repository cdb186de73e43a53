/** Every activity the worker registers, built from dependencies created once by worker/. */
import { Db } from 'mongodb';
import type { TaskQueueKind } from '../contracts/task-queues';
import { Ledger } from '../store/ledger/ledger';
import { NodeStore } from '../store/federation/nodes';
import { PresenceStore } from '../store/federation/presence';
import { DirectoryTreeStore } from '../store/federation/directory-tree';
import { createLedgerActivities } from './ledger';
import { createNodeActivities } from './federation/node-lifecycle';
import { createNodeSweeperActivities } from './federation/node-lifecycle-sweeper';
import { createDirectoryTreeActivities } from './federation/tree-proposal';
import { createTaskLeaseActivities } from './federation/task-lease';
import { createDeployActivities, createWorkOrderActivities, DeployActivityDeps } from './deploy';
import { WorkOrderStore } from '../store/deploy/work-orders';
import { createDaemonCoreActivities, createDaemonModelActivities, DaemonActivityDeps } from './daemon';
import { createComputeActivities } from './compute';
import { createTlogWitnessActivities } from './tlog/witness';

export interface ActivityDeps {
  db: Db;
  ledger: Ledger;
  /** The deploy capability's files and nginx (commands queue); absent: no deploy activities. */
  deploy?: DeployActivityDeps;
  /** The local daemon's identity checks and audit chain (core) and model calls (models); absent: none. */
  daemon?: DaemonActivityDeps;
}

/** Every activity on the core task queue (MongoDB only). */
export function createActivities(deps: ActivityDeps) {
  // One node store for both: its queue of node-document writes keeps a node's state changes and liveness
  // transitions of this process in order.
  const nodes = new NodeStore(deps.db);
  const presence = new PresenceStore(deps.db);
  return {
    ...createLedgerActivities(deps.ledger),
    ...createNodeActivities({ ledger: deps.ledger, nodes, presence }),
    ...createNodeSweeperActivities({ ledger: deps.ledger, nodes, presence }),
    ...createDirectoryTreeActivities({ ledger: deps.ledger, tree: new DirectoryTreeStore(deps.db) }),
    ...createTaskLeaseActivities({ db: deps.db }),
    ...createComputeActivities({ ledger: deps.ledger }),
    ...createWorkOrderActivities({ orders: new WorkOrderStore(deps.db) }),
    ...createTlogWitnessActivities({ db: deps.db, ledger: deps.ledger })
  };
}

export type Activities = ReturnType<typeof createActivities>;

/**
 * The activities each task queue kind runs (contracts/task-queues.ts). Model calls (chat, daemon) and external
 * commands (deploys) register theirs under `models` and `commands`; a kind with no activities gets no worker.
 */
export function createActivitiesByQueue(
  deps: ActivityDeps
): Record<TaskQueueKind, Record<string, (...args: never[]) => Promise<unknown>>> {
  const daemon = deps.daemon;
  return {
    core: {
      ...createActivities(deps),
      ...(daemon ? createDaemonCoreActivities({ db: deps.db, ledger: deps.ledger, daemon }) : {})
    },
    models: { ...(daemon ? createDaemonModelActivities(daemon) : {}) },
    commands: { ...(deps.deploy ? createDeployActivities(deps.deploy) : {}) }
  };
}
