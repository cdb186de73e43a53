/** Every workflow the worker runs; the worker bundles this file (and only what it imports). */
export { truthApprovalWorkflow } from './ledger/truth-approval';
export { nodeLifecycleWorkflow } from './federation/node-lifecycle';
export { nodeSweeperWorkflow } from './federation/node-lifecycle-sweeper';
export { treeProposalWorkflow } from './federation/tree-proposal';
export { deployWorkflow } from './deploy/deploy';
export { deployConfigWorkflow } from './deploy/config';
export { workOrderWorkflow } from './deploy/work-order';
export { taskLeasesWorkflow } from './federation/task-lease';
export { groupConsensusWorkflow } from './compute/group-consensus';
export { daemonDagWorkflow } from './daemon/dag';
export { daemonBreakerWorkflow } from './daemon/breaker';
export { tlogWitnessWorkflow } from './tlog/witness';
