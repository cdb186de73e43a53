/** Every workflow the worker runs; the worker bundles this file (and only what it imports). */
export { truthApprovalWorkflow } from './truth-approval';
export { nodeLifecycleWorkflow } from './node-lifecycle';
export { treeProposalWorkflow } from './tree-proposal';
