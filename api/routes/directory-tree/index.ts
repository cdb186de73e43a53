/**
 * Directory-tree collaboration (group directory_tree_collab; reads are public):
 *   GET  /a2a/directory-tree/latest[?version=N]  the current (or an older) version and its tree
 *   POST /a2a/directory-tree/propose             (approved node or homologous) { base_version, title, rationale,
 *                                                patch: RFC 6902 operations, supersedes? } → 201 { proposal_id }.
 *                                                The patch must apply to the base version, else 400 before
 *                                                anything is stored. Starts tree-proposal/<id>.
 *   GET  /a2a/directory-tree/review[?state=open] proposals with their diffs (the patch, the paths it writes, and
 *                                                whether it still applies to the latest version)
 *   POST /a2a/directory-tree/merge               (homologous) { proposal_id, decision: merge|reject, reason }
 *                                                merge → a new version; 409 with the conflicts if the tree moved
 *                                                on and the patch no longer applies cleanly (the proposal stays
 *                                                open); 409 if the proposal is already closed.
 */
import { randomBytes } from 'node:crypto';
import { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { humanText } from '../../../core/identifiers';
import { canonicalJson, JsonValue } from '../../../core/canonical-json';
import { AppError, notFound } from '../../../core/errors';
import { NODE_PERMISSIONS } from '../../../core/federation';
import { applyPatch, jsonPatch, PatchError, PatchOperation, touchedPaths } from '../../../core/json-patch';
import { ProposalDocument, ProposalState } from '../../../activities/store/directory-tree';
import { TreeProposalInput, treeProposalWorkflowId } from '../../../workflows/tree-proposal.contract';
import { decideTreeProposal, openTreeProposal, supersedeTreeProposal } from '../../../workflows/tree-proposal.client';
import { RawJson } from '../../../core/raw-json';
import type { ServiceContext } from '../../context';

const proposalId = z.string().regex(/^tp_[a-f0-9]{16}$/, 'a proposal id such as tp_0123456789abcdef');

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
  .object({ proposal_id: proposalId, decision: z.enum(['merge', 'reject']).default('merge'), reason: humanText(2000, { multiline: true, min: 0 }).default('') })
  .strict()
  .refine((b) => b.decision === 'merge' || b.reason.length > 0, { message: 'give a reason when rejecting', path: ['reason'] });

export async function directoryTreeRoutes(app: FastifyInstance, opts: { ctx: ServiceContext }): Promise<void> {
  const { ctx } = opts;
  const { config } = ctx;
  const group = (auth: 'none' | 'node_or_homologous' | 'homologous', summary: string) => ({ auth, directory: { group: 'directory_tree_collab' as const, summary } });

  app.get(
    '/a2a/directory-tree/latest',
    { config: group('none', 'Latest version of the directory tree (older ones with ?version=N)'), schema: { querystring: z.object({ version: z.coerce.number().int().min(1).optional() }) } },
    async (request) => {
      const { version } = request.query as { version?: number };
      const doc = version ? await ctx.tree.version(version) : await ctx.tree.latest();
      if (!doc) throw notFound(`No version ${version} of the directory tree`);
      const latest = version ? await ctx.tree.latest() : doc;
      return { ok: true, version: doc._id, latest_version: latest._id, tree: new RawJson(doc.tree_json), created_at: doc.created_at, title: doc.title, proposal_id: doc.proposal_id, merged_by: doc.merged_by };
    }
  );

  app.post('/a2a/directory-tree/propose', { config: group('node_or_homologous', 'Propose a change (RFC 6902 JSON Patch against a base version)'), schema: { body: proposeBody } }, async (request, reply) => {
    const body = request.body as z.infer<typeof proposeBody>;
    const principal = request.principal!;
    if (principal.model === 'external_node') {
      // The authentication cache may be a moment behind a review decision; permissions use the stored state.
      const state = (await ctx.nodes.findPublic(principal.id))?.state ?? 'rejected';
      if (!NODE_PERMISSIONS[state].propose) throw new AppError('forbidden', `node ${principal.id} is ${state}; only reviewed nodes may propose`);
    }
    const author = principal.did ?? principal.id;
    const base = await ctx.tree.version(body.base_version);
    if (!base) throw new AppError('invalid_request', `base_version ${body.base_version} does not exist`, { fields: [{ field: 'base_version', message: 'no such version' }] });
    const patch = body.patch as PatchOperation[];
    try {
      applyPatch(JSON.parse(base.tree_json) as JsonValue, patch);
    } catch (err) {
      if (!(err instanceof PatchError)) throw err;
      throw new AppError('invalid_patch', `patch does not apply to version ${body.base_version}: ${err.message}`, { operation: err.index, path: err.op.path });
    }
    if (body.supersedes) {
      const old = await ctx.tree.findProposal(body.supersedes);
      if (!old) throw new AppError('invalid_request', `supersedes: no proposal ${body.supersedes}`, { fields: [{ field: 'supersedes', message: 'no such proposal' }] });
      if (old.author !== author) throw new AppError('forbidden', `proposal ${body.supersedes} belongs to another author`);
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
    await ctx.tree.insertProposal(doc);
    const input: TreeProposalInput = { version: 1, proposal_id: id, base_version: body.base_version, title: body.title, author, created_at: now, hub_did: config.SERVICE_DID, history_limit: config.TREE_PROPOSAL_HISTORY_LIMIT };
    try {
      await openTreeProposal(ctx.temporal, config.TEMPORAL_TASK_QUEUE, input);
    } catch (err) {
      // Nothing half-done: without its workflow the proposal could never be decided.
      await ctx.tree.deleteProposal(id).catch(() => undefined);
      throw err;
    }
    if (body.supersedes) await supersedeTreeProposal(ctx.temporal, body.supersedes, id);
    const latest = await ctx.tree.latest();
    return reply.code(201).send({ ok: true, proposal_id: id, workflow_id: treeProposalWorkflowId(id), state: 'open', base_version: body.base_version, latest_version: latest._id, supersedes: body.supersedes ?? null });
  });

  app.get(
    '/a2a/directory-tree/review',
    {
      config: group('none', 'Review queue: open proposals with their diffs'),
      schema: { querystring: z.object({ state: z.enum(['open', 'merged', 'rejected', 'superseded']).default('open'), limit: z.coerce.number().int().min(1).max(200).default(50) }) }
    },
    async (request) => {
      const { state, limit } = request.query as { state: ProposalState; limit: number };
      const [proposals, latest] = await Promise.all([ctx.tree.listProposals(state, limit), ctx.tree.latest()]);
      const latestTree = JSON.parse(latest.tree_json) as JsonValue;
      return {
        ok: true,
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
          return { proposal_id: _id, ...p, diff: { operations: patch, paths: touchedPaths(patch) }, applies_to_latest: state === 'open' ? applies : null };
        })
      };
    }
  );

  app.post('/a2a/directory-tree/merge', { config: group('homologous', 'Merge (or reject) a proposal; 409 with the conflicts if it no longer applies'), schema: { body: mergeBody } }, async (request) => {
    const { proposal_id, decision, reason } = request.body as z.infer<typeof mergeBody>;
    const reviewer = request.principal!.did ?? request.principal!.id;
    const stored = await ctx.tree.findProposal(proposal_id);
    if (!stored) throw notFound(`No proposal ${proposal_id}`);
    if (stored.state !== 'open') throw new AppError('conflict', `proposal ${proposal_id} is already ${stored.state}`, { state: stored.state });
    const status = await decideTreeProposal(ctx.temporal, proposal_id, { decision, reviewer, reason });
    const version = status.merged_version ? await ctx.tree.version(status.merged_version) : null;
    return { ok: true, proposal: status, version: status.merged_version, tree: version ? new RawJson(version.tree_json) : null };
  });
}
