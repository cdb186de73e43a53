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

/**
 * A witness of the hub's log (witness/<queue>/<name>): pending, cosigned, unreachable, refused. A one-element
 * keyword list: the dev server's SQLite visibility store takes 10 Keyword attributes, all taken above
 * (`WitnessState = "unreachable"` matches it the same).
 */
export const WitnessStateAttr = defineSearchAttributeKey('WitnessState', SearchAttributeType.KEYWORD_LIST);
/** The largest checkpoint size that witness cosigned (a verified cosignature). */
export const WitnessCosignedSizeAttr = defineSearchAttributeKey('WitnessCosignedSize', SearchAttributeType.INT);

const KEYWORDS = [
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
const KEYWORD_LISTS = [WitnessStateAttr];
const INTS = [WitnessCosignedSizeAttr];

/** Name → type as the dev server's `--search-attribute Name=Type` flag spells it. */
export const SEARCH_ATTRIBUTES: Record<string, 'Keyword' | 'KeywordList' | 'Int'> = Object.fromEntries([
  ...KEYWORDS.map((key) => [key.name, 'Keyword' as const]),
  ...KEYWORD_LISTS.map((key) => [key.name, 'KeywordList' as const]),
  ...INTS.map((key) => [key.name, 'Int' as const])
]);

export type SearchAttributeName =
  (typeof KEYWORDS)[number]['name'] | (typeof KEYWORD_LISTS)[number]['name'] | (typeof INTS)[number]['name'];
