/** The directory tree routes' schemas (./directory-tree.ts): proposals, their diffs, decisions and conflicts. */
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { jsonPatch } from '../../../core/federation/json-patch';
import { rawJsonSchema } from '../../../core/raw-json';
import { ERROR_BODY } from '../../response-docs';

const proposalId = z.string().regex(/^tp_[a-f0-9]{16}$/, 'a proposal id such as tp_0123456789abcdef');
export const PROPOSAL_STATES = ['open', 'merged', 'rejected', 'superseded'] as const;

export const proposeBody = z
  .object({
    base_version: z.number().int().min(1),
    title: humanText(200),
    rationale: humanText(5000, { multiline: true }),
    patch: jsonPatch,
    supersedes: proposalId.optional()
  })
  .strict();

export const mergeBody = z
  .object({
    proposal_id: proposalId,
    decision: z.enum(['merge', 'reject']).default('merge'),
    reason: humanText(2000, { multiline: true, min: 0 }).default('')
  })
  .strict()
  .refine((b) => b.decision === 'merge' || b.reason.length > 0, {
    message: 'give a reason when rejecting',
    path: ['reason']
  });

const version = z.number().int();
const tree = (description: string) => rawJsonSchema(description);
/** A stored patch, served as its canonical JSON text: RFC 6902 operations. */
const PATCH_JSON_SCHEMA = {
  type: 'array',
  items: {
    type: 'object',
    required: ['op', 'path'],
    properties: {
      op: { type: 'string', enum: ['add', 'remove', 'replace', 'move', 'copy', 'test'] },
      path: { type: 'string' },
      from: { type: 'string' },
      value: {}
    }
  }
};

export const latestResponse = z.object({
  ok: z.literal(true),
  version,
  latest_version: version,
  tree: tree('the directory tree at this version'),
  created_at: z.string(),
  title: z.string(),
  proposal_id: z.string().nullable().describe('the proposal merged into this version (null for version 1)'),
  merged_by: z.string().nullable()
});
export const proposedResponse = z.object({
  ok: z.literal(true),
  proposal_id: z.string(),
  workflow_id: z.string(),
  state: z.literal('open'),
  base_version: version,
  latest_version: version,
  supersedes: z.string().nullable()
});
const proposalView = z.object({
  proposal_id: z.string(),
  base_version: version,
  title: z.string(),
  rationale: z.string(),
  author: z.string(),
  author_model: z.string(),
  state: z.enum(PROPOSAL_STATES),
  created_at: z.string(),
  decided_at: z.string().nullable(),
  decided_by: z.string().nullable(),
  reason: z.string().nullable(),
  merged_version: version.nullable(),
  superseded_by: z.string().nullable(),
  supersedes: z.string().nullable(),
  diff: z.object({
    operations: rawJsonSchema('the patch (RFC 6902 JSON Patch)', PATCH_JSON_SCHEMA),
    paths: z.array(z.string()).describe('the paths the patch writes')
  }),
  applies_to_latest: z
    .boolean()
    .nullable()
    .describe('for open proposals: whether the patch still applies to the latest version')
});
export const reviewResponse = z.object({
  ok: z.literal(true),
  state: z.enum(PROPOSAL_STATES),
  latest_version: version,
  count: z.number().int(),
  proposals: z.array(proposalView)
});
/** The tree-proposal workflow's view after the decision (contracts/federation/tree-proposal.contract.ts ProposalStatus). */
const proposalStatus = z.object({
  proposal_id: z.string(),
  state: z.enum(PROPOSAL_STATES),
  base_version: version,
  title: z.string(),
  author: z.string(),
  created_at: z.string(),
  decided_at: z.string().nullable(),
  decided_by: z.string().nullable(),
  reason: z.string().nullable(),
  merged_version: version.nullable(),
  superseded_by: z.string().nullable(),
  merge_attempts: z.number().int(),
  decision_seq: z.number().int().nullable().describe('the ledger seq of the recorded decision')
});
export const mergeResponse = z.object({
  ok: z.literal(true),
  proposal: proposalStatus,
  version: version.nullable().describe('the merged version'),
  tree: tree('the merged tree').nullable()
});
export const mergeConflict = ERROR_BODY.extend({
  proposal_id: z.string().optional(),
  state: z.enum(PROPOSAL_STATES).optional().describe("the proposal's state, when it is already closed"),
  base_version: version.optional(),
  latest_version: version.optional(),
  conflicts: z
    .array(z.looseObject({ path: z.string(), reason: z.string(), operation: z.number().int().optional() }))
    .optional()
    .describe('what no longer applies to the latest version')
}).describe('Already closed, or the patch conflicts with the latest version (conflicts)');

export const proposeConflict = ERROR_BODY.extend({
  base_version: version.optional(),
  latest_version: version.optional(),
  conflicts: z
    .array(z.looseObject({ path: z.string(), reason: z.string(), operation: z.number().int().optional() }))
    .optional()
    .describe('the first operation that does not apply to the base version')
}).describe(
  'The base version does not exist, the patch does not apply to it (conflicts), or the superseded proposal is closed'
);
