/**
 * Directory-tree collaboration (group directory_tree_collab; reads are public):
 *   GET  /a2a/directory-tree/latest[?version=N]  the current (or an older) version and its tree
 *   POST /a2a/directory-tree/propose             (approved node or homologous) { base_version, title, rationale,
 *                                                patch: RFC 6902 operations, supersedes? } → 201 { proposal_id }.
 *                                                A malformed body is 400; a well-formed patch that does not
 *                                                apply to the base version, or a base version that does not
 *                                                exist, is 409 (the tree's state, not the request, is at odds).
 *                                                Nothing is stored either way. Starts tree-proposal/<id>.
 *   GET  /a2a/directory-tree/review[?state=open] proposals with their diffs (the patch, the paths it writes, and
 *                                                whether it still applies to the latest version)
 *   POST /a2a/directory-tree/merge               (homologous) { proposal_id, decision: merge|reject, reason }
 *                                                merge → a new version; 409 with the conflicts if the tree moved
 *                                                on and the patch no longer applies cleanly (the proposal stays
 *                                                open); 409 if the proposal is already closed.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../core/config.node';
import { humanText, queryInt } from '../../../core/identifiers';
import { canonicalJson, JsonValue } from '../../../core/ledger/canonical-json';
import { AppError, notFound } from '../../../core/errors';
import { NODE_PERMISSIONS } from '../../../core/federation/vocabulary';
import { applyPatch, jsonPatch, PatchError, PatchOperation, touchedPaths } from '../../../core/federation/json-patch';
import { RawJson, rawJsonSchema } from '../../../core/raw-json';
import type { DirectoryTreeStore, ProposalDocument } from '../../../store/federation/directory-tree';
import type { NodeStore } from '../../../store/federation/nodes';
import { TreeProposalInput, treeProposalWorkflowId } from '../../../contracts/federation/tree-proposal.contract';
import {
  decideTreeProposal,
  openTreeProposal,
  supersedeTreeProposal
} from '../../../workflows/federation/tree-proposal.client';
import { ERROR_BODY } from '../../response-docs';

const proposalId = z.string().regex(/^tp_[a-f0-9]{16}$/, 'a proposal id such as tp_0123456789abcdef');
const PROPOSAL_STATES = ['open', 'merged', 'rejected', 'superseded'] as const;

const proposeBody = z
  .object({
    base_version: z.number().int().min(1),
    title: humanText(200),
    rationale: humanText(5000, { multiline: true }),
    patch: jsonPatch,
    supersedes: proposalId.optional()
  })
  .strict();

const mergeBody = z
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

const latestResponse = z.object({
  ok: z.literal(true),
  version,
  latest_version: version,
  tree: tree('the directory tree at this version'),
  created_at: z.string(),
  title: z.string(),
  proposal_id: z.string().nullable().describe('the proposal merged into this version (null for version 1)'),
  merged_by: z.string().nullable()
});
const proposedResponse = z.object({
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
const reviewResponse = z.object({
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
const mergeResponse = z.object({
  ok: z.literal(true),
  proposal: proposalStatus,
  version: version.nullable().describe('the merged version'),
  tree: tree('the merged tree').nullable()
});
const mergeConflict = ERROR_BODY.extend({
  proposal_id: z.string().optional(),
  state: z.enum(PROPOSAL_STATES).optional().describe("the proposal's state, when it is already closed"),
  base_version: version.optional(),
  latest_version: version.optional(),
  conflicts: z
    .array(z.looseObject({ path: z.string(), reason: z.string(), operation: z.number().int().optional() }))
    .optional()
    .describe('what no longer applies to the latest version')
}).describe('Already closed, or the patch conflicts with the latest version (conflicts)');

const proposeConflict = ERROR_BODY.extend({
  base_version: version.optional(),
  latest_version: version.optional(),
  conflicts: z
    .array(z.looseObject({ path: z.string(), reason: z.string(), operation: z.number().int().optional() }))
    .optional()
    .describe('the first operation that does not apply to the base version')
}).describe(
  'The base version does not exist, the patch does not apply to it (conflicts), or the superseded proposal is closed'
);

export const directoryTreeRoutes: FastifyPluginAsyncZod<{
  tree: DirectoryTreeStore;
  nodes: NodeStore;
  temporal: Client;
  config: Config;
}> = async (app, deps) => {
  const { tree: store, nodes, temporal, config } = deps;
  const group = (auth: 'none' | 'node_or_homologous' | 'homologous', summary: string) => ({
    auth,
    directory: { group: 'directory_tree_collab' as const, summary }
  });

  app.get(
    '/a2a/directory-tree/latest',
    {
      config: group('none', 'Latest version of the directory tree (older ones with ?version=N)'),
      schema: { querystring: z.object({ version: queryInt(1).optional() }), response: { 200: latestResponse } }
    },
    async (request) => {
      const { version } = request.query;
      const doc = version ? await store.version(version) : await store.latest();
      if (!doc) throw notFound(`No version ${version} of the directory tree`);
      const latest = version ? await store.latest() : doc;
      return {
        ok: true as const,
        version: doc._id,
        latest_version: latest._id,
        tree: new RawJson(doc.tree_json),
        created_at: doc.created_at,
        title: doc.title,
        proposal_id: doc.proposal_id,
        merged_by: doc.merged_by
      };
    }
  );

  app.post(
    '/a2a/directory-tree/propose',
    {
      config: group('node_or_homologous', 'Propose a change (RFC 6902 JSON Patch against a base version)'),
      schema: {
        body: proposeBody,
        response: {
          201: proposedResponse.describe('Proposal opened'),
          403: ERROR_BODY.describe("Node not reviewed, or the superseded proposal is another author's"),
          409: proposeConflict
        }
      }
    },
    async (request, reply) => {
      const { body } = request;
      const principal = request.principal!;
      if (principal.model === 'external_node') {
        // The authentication cache may be a moment behind a review decision; permissions use the stored state.
        const state = (await nodes.findPublic(principal.id))?.state ?? 'rejected';
        if (!NODE_PERMISSIONS[state].propose)
          throw new AppError('forbidden', `node ${principal.id} is ${state}; only reviewed nodes may propose`);
      }
      const author = principal.did ?? principal.id;
      const base = await store.version(body.base_version);
      if (!base) {
        const latest = await store.latest();
        throw new AppError(
          'conflict',
          `base_version ${body.base_version} does not exist (the latest version is ${latest._id})`,
          { base_version: body.base_version, latest_version: latest._id }
        );
      }
      const patch: PatchOperation[] = body.patch;
      try {
        applyPatch(JSON.parse(base.tree_json) as JsonValue, patch);
      } catch (err) {
        if (!(err instanceof PatchError)) throw err;
        const latest = await store.latest();
        throw new AppError('conflict', `patch does not apply to version ${body.base_version}: ${err.message}`, {
          base_version: body.base_version,
          latest_version: latest._id,
          conflicts: [{ operation: err.index, path: err.op.path, reason: err.message }]
        });
      }
      if (body.supersedes) {
        const old = await store.findProposal(body.supersedes);
        if (!old)
          throw new AppError('invalid_request', `supersedes: no proposal ${body.supersedes}`, {
            fields: [{ field: 'supersedes', message: 'no such proposal' }]
          });
        if (old.author !== author)
          throw new AppError('forbidden', `proposal ${body.supersedes} belongs to another author`);
        if (old.state !== 'open') throw new AppError('conflict', `proposal ${body.supersedes} is already ${old.state}`);
      }

      const id = `tp_${randomBytes(8).toString('hex')}`;
      const now = new Date().toISOString();
      const doc: ProposalDocument = {
        _id: id,
        base_version: body.base_version,
        title: body.title,
        rationale: body.rationale,
        patch_json: canonicalJson(patch as unknown as JsonValue),
        author,
        author_model: principal.model,
        state: 'open',
        created_at: now,
        decided_at: null,
        decided_by: null,
        reason: null,
        merged_version: null,
        superseded_by: null,
        supersedes: body.supersedes ?? null
      };
      await store.insertProposal(doc);
      const input: TreeProposalInput = {
        version: 1,
        proposal_id: id,
        base_version: body.base_version,
        title: body.title,
        author,
        created_at: now,
        hub_did: config.SERVICE_DID,
        history_limit: config.TREE_PROPOSAL_HISTORY_LIMIT
      };
      try {
        await openTreeProposal(temporal, config.TEMPORAL_TASK_QUEUE, input);
      } catch (err) {
        // Nothing half-done: without its workflow the proposal could never be decided.
        await store.deleteProposal(id).catch(() => undefined);
        throw err;
      }
      if (body.supersedes) await supersedeTreeProposal(temporal, body.supersedes, id);
      const latest = await store.latest();
      return reply.code(201).send({
        ok: true as const,
        proposal_id: id,
        workflow_id: treeProposalWorkflowId(id),
        state: 'open' as const,
        base_version: body.base_version,
        latest_version: latest._id,
        supersedes: body.supersedes ?? null
      });
    }
  );

  app.get(
    '/a2a/directory-tree/review',
    {
      config: group('none', 'Review queue: open proposals with their diffs'),
      schema: {
        querystring: z.object({ state: z.enum(PROPOSAL_STATES).default('open'), limit: queryInt(1, 200).default(50) }),
        response: { 200: reviewResponse }
      }
    },
    async (request) => {
      const { state, limit } = request.query;
      const [proposals, latest] = await Promise.all([store.listProposals(state, limit), store.latest()]);
      const latestTree = JSON.parse(latest.tree_json) as JsonValue;
      return {
        ok: true as const,
        state,
        latest_version: latest._id,
        count: proposals.length,
        proposals: proposals.map(({ _id, patch_json, ...p }) => {
          const patch = JSON.parse(patch_json) as PatchOperation[];
          let applies = true;
          try {
            applyPatch(latestTree, patch);
          } catch {
            applies = false;
          }
          return {
            proposal_id: _id,
            ...p,
            diff: { operations: new RawJson(patch_json), paths: touchedPaths(patch) },
            applies_to_latest: state === 'open' ? applies : null
          };
        })
      };
    }
  );

  app.post(
    '/a2a/directory-tree/merge',
    {
      config: group('homologous', 'Merge (or reject) a proposal; 409 with the conflicts if it no longer applies'),
      schema: { body: mergeBody, response: { 200: mergeResponse, 409: mergeConflict } }
    },
    async (request) => {
      const { proposal_id, decision, reason } = request.body;
      const reviewer = request.principal!.did ?? request.principal!.id;
      const stored = await store.findProposal(proposal_id);
      if (!stored) throw notFound(`No proposal ${proposal_id}`);
      if (stored.state !== 'open')
        throw new AppError('conflict', `proposal ${proposal_id} is already ${stored.state}`, { state: stored.state });
      const status = await decideTreeProposal(temporal, proposal_id, { decision, reviewer, reason });
      const merged = status.merged_version ? await store.version(status.merged_version) : null;
      return {
        ok: true as const,
        proposal: status,
        version: status.merged_version,
        tree: merged ? new RawJson(merged.tree_json) : null
      };
    }
  );
};
