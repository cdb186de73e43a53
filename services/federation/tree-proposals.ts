/**
 * The shared architecture directory tree: reading its versions, proposing RFC 6902 patches against a base version,
 * reviewing the open proposals and deciding them. A proposal is stored and its tree-proposal/<id> workflow started
 * (contracts/federation/tree-proposal.contract.ts), which merges or rejects it and records the decision; nothing is
 * stored for a proposal that cannot be decided. The routes are api/routes/federation/directory-tree.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FederationConfig, ServiceConfig, TemporalConfig } from '../../core/config.node';
import { canonicalJson, type JsonValue } from '../../core/ledger/canonical-json';
import { AppError, notFound } from '../../core/errors';
import { NODE_PERMISSIONS } from '../../core/federation/vocabulary';
import { applyPatch, PatchError, type PatchOperation, touchedPaths } from '../../core/federation/json-patch';
import { RawJson } from '../../core/raw-json';
import type { DirectoryTreeStore, ProposalDocument, ProposalState } from '../../store/federation/directory-tree';
import type { NodeStore } from '../../store/federation/nodes';
import { type TreeProposalInput, treeProposalWorkflowId } from '../../contracts/federation/tree-proposal.contract';
import {
  decideTreeProposal,
  openTreeProposal,
  supersedeTreeProposal
} from '../../workflows/federation/tree-proposal.client';

/** Who proposes or decides: the authenticated principal. */
export type TreeActor = { model: string; id: string; did?: string };

export type Proposal = {
  base_version: number;
  title: string;
  rationale: string;
  patch: PatchOperation[];
  supersedes?: string;
};

export type TreeProposals = ReturnType<typeof createTreeProposals>;

export function createTreeProposals({
  tree: store,
  nodes,
  temporal,
  config
}: {
  tree: DirectoryTreeStore;
  nodes: NodeStore;
  temporal: Client;
  config: Pick<ServiceConfig, 'SERVICE_DID'> &
    Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'> &
    Pick<FederationConfig, 'TREE_PROPOSAL_HISTORY_LIMIT'>;
}) {
  /** A well-formed proposal the tree's state is at odds with: 409, with what the caller needs to rebase. */
  const checkApplies = async (body: Proposal, author: string) => {
    const base = await store.version(body.base_version);
    if (!base) {
      const latest = await store.latest();
      throw new AppError(
        'conflict',
        `base_version ${body.base_version} does not exist (the latest version is ${latest._id})`,
        { base_version: body.base_version, latest_version: latest._id }
      );
    }
    try {
      applyPatch(JSON.parse(base.tree_json) as JsonValue, body.patch);
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
  };

  return {
    /** A version of the tree (the latest without one), with the latest version's number. */
    async version(version: number | undefined) {
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
    },

    /** Opens a proposal (and supersedes the author's earlier one, when it names it). */
    async propose(principal: TreeActor, body: Proposal) {
      if (principal.model === 'external_node') {
        // The authentication cache may be a moment behind a review decision; permissions use the stored state.
        const state = (await nodes.findPublic(principal.id))?.state ?? 'rejected';
        if (!NODE_PERMISSIONS[state].propose)
          throw new AppError('forbidden', `node ${principal.id} is ${state}; only reviewed nodes may propose`);
      }
      const author = principal.did ?? principal.id;
      await checkApplies(body, author);

      const id = `tp_${randomBytes(8).toString('hex')}`;
      const now = new Date().toISOString();
      const doc: ProposalDocument = {
        _id: id,
        base_version: body.base_version,
        title: body.title,
        rationale: body.rationale,
        patch_json: canonicalJson(body.patch as unknown as JsonValue),
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
      return {
        ok: true as const,
        proposal_id: id,
        workflow_id: treeProposalWorkflowId(id),
        state: 'open' as const,
        base_version: body.base_version,
        latest_version: latest._id,
        supersedes: body.supersedes ?? null
      };
    },

    /** The proposals in a state with their diffs, and (for open ones) whether they still apply to the latest. */
    async review(state: ProposalState, limit: number) {
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
    },

    /** Merges or rejects an open proposal (through its workflow); the merged tree when it was merged. */
    async decide(
      principal: TreeActor,
      { proposal_id, decision, reason }: { proposal_id: string; decision: 'merge' | 'reject'; reason: string }
    ) {
      const reviewer = principal.did ?? principal.id;
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
  };
}
