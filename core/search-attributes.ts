/**
 * The custom search attributes the workflows set, defined once: the typed keys workflows and client modules use,
 * and the name → type map the dev server flags (scripts/stack/temporal.ts) and the worker's registration on a real
 * cluster (worker/search-attributes.ts) are built from. Operators filter on them in the Temporal Web UI, e.g.
 * `ApprovalState = "pending"`. Pure: safe in the workflow sandbox.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const TruthKeyAttr = defineSearchAttributeKey('TruthKey', SearchAttributeType.KEYWORD);
export const TruthTypeAttr = defineSearchAttributeKey('TruthType', SearchAttributeType.KEYWORD);
export const ApprovalStateAttr = defineSearchAttributeKey('ApprovalState', SearchAttributeType.KEYWORD);
export const NodeIdAttr = defineSearchAttributeKey('NodeId', SearchAttributeType.KEYWORD);
export const BrandAttr = defineSearchAttributeKey('Brand', SearchAttributeType.KEYWORD);
export const NodeStateAttr = defineSearchAttributeKey('NodeState', SearchAttributeType.KEYWORD);
export const ProposalStateAttr = defineSearchAttributeKey('ProposalState', SearchAttributeType.KEYWORD);
export const DeployTargetAttr = defineSearchAttributeKey('DeployTarget', SearchAttributeType.KEYWORD);
export const DeployStateAttr = defineSearchAttributeKey('DeployState', SearchAttributeType.KEYWORD);
/** The daemon's circuit breaker (daemon-breaker/<queue>): closed, open, half_open. */
export const BreakerStateAttr = defineSearchAttributeKey('BreakerState', SearchAttributeType.KEYWORD);

const ALL = [
  TruthKeyAttr,
  TruthTypeAttr,
  ApprovalStateAttr,
  NodeIdAttr,
  BrandAttr,
  NodeStateAttr,
  ProposalStateAttr,
  DeployTargetAttr,
  DeployStateAttr,
  BreakerStateAttr
];

/** Name → type as the dev server's `--search-attribute Name=Type` flag spells it (every one is a Keyword today). */
export const SEARCH_ATTRIBUTES: Record<string, 'Keyword'> = Object.fromEntries(
  ALL.map((key) => [key.name, 'Keyword' as const])
);

export type SearchAttributeName = (typeof ALL)[number]['name'];
