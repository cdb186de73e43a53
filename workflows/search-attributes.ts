/** Typed keys of the custom search attributes (registered at start, see core/search-attributes.ts). */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const TruthKeyAttr = defineSearchAttributeKey('TruthKey', SearchAttributeType.KEYWORD);
export const TruthTypeAttr = defineSearchAttributeKey('TruthType', SearchAttributeType.KEYWORD);
export const ApprovalStateAttr = defineSearchAttributeKey('ApprovalState', SearchAttributeType.KEYWORD);
export const NodeIdAttr = defineSearchAttributeKey('NodeId', SearchAttributeType.KEYWORD);
export const BrandAttr = defineSearchAttributeKey('Brand', SearchAttributeType.KEYWORD);
export const NodeStateAttr = defineSearchAttributeKey('NodeState', SearchAttributeType.KEYWORD);
export const ProposalStateAttr = defineSearchAttributeKey('ProposalState', SearchAttributeType.KEYWORD);
