/**
 * Custom search attributes the workflows set, so operators can filter in the Temporal Web UI
 * (e.g. `ApprovalState = "pending"`). Registered at start: by `temporal server start-dev --search-attribute`
 * locally, and by the worker through the operator service on a real cluster.
 */
export const SEARCH_ATTRIBUTES = {
  TruthKey: 'Keyword',
  TruthType: 'Keyword',
  ApprovalState: 'Keyword',
  NodeId: 'Keyword',
  Brand: 'Keyword',
  NodeState: 'Keyword',
  ProposalState: 'Keyword'
} as const;

export type SearchAttributeName = keyof typeof SEARCH_ATTRIBUTES;
