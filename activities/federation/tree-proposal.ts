/**
 * Activities of the tree-proposal/<id> workflow.
 *
 * mergeTreeProposal applies a proposal's JSON Patch to the latest tree and stores the result as the next version.
 * When the tree moved on since the proposal's base version, the merge is refused (conflicts listed) if the patch
 * no longer applies, or if it writes to a path that a later version changed (a three-way check: base → latest).
 * Versions are numbered by their _id, so concurrent merges cannot take the same number: the loser re-reads the
 * latest version and checks again. A retried activity finds the version it already created.
 */
import { canonicalJson, JsonValue } from '../../core/ledger/canonical-json';
import {
  applyPatch,
  changedPaths,
  PatchError,
  PatchOperation,
  pathsOverlap,
  touchedPaths
} from '../../core/federation/json-patch';
import { DirectoryTreeStore, ProposalState } from '../../store/federation/directory-tree';
import { Ledger } from '../../store/ledger/ledger';

export interface TreeConflict {
  path: string;
  reason: string;
  /** The operation of the proposal's patch (index) that conflicts, when known. */
  operation?: number;
}

export type MergeOutcome =
  | { merged: true; version: number }
  | { merged: false; latest_version: number; base_version: number; conflicts: TreeConflict[] };

export interface ProposalDecisionRecord {
  proposal_id: string;
  state: Exclude<ProposalState, 'open'>;
  at: string;
  by: string;
  reason: string | null;
  merged_version: number | null;
  superseded_by: string | null;
  hub_did: string;
}

const MAX_VERSION_RACES = 8;

export function createDirectoryTreeActivities(deps: { ledger: Ledger; tree: DirectoryTreeStore }) {
  return {
    async mergeTreeProposal(input: { proposal_id: string; merged_by: string; at: string }): Promise<MergeOutcome> {
      const already = await deps.tree.versionMergedFrom(input.proposal_id);
      if (already) return { merged: true, version: already._id };
      const proposal = await deps.tree.findProposal(input.proposal_id);
      if (!proposal) throw new Error(`proposal ${input.proposal_id} is not stored`);
      const patch = JSON.parse(proposal.patch_json) as PatchOperation[];

      for (let race = 0; race < MAX_VERSION_RACES; race++) {
        const latest = await deps.tree.latest();
        const latestTree = JSON.parse(latest.tree_json) as JsonValue;
        const conflicts: TreeConflict[] = [];
        if (latest._id !== proposal.base_version) {
          const base = await deps.tree.version(proposal.base_version);
          const changed = changedPaths(JSON.parse(base!.tree_json) as JsonValue, latestTree);
          patch.forEach((op, index) => {
            const writes = touchedPaths([op]);
            for (const c of changed) {
              if (writes.some((w) => pathsOverlap(w, c)))
                conflicts.push({
                  path: c,
                  operation: index,
                  reason: `changed between version ${proposal.base_version} and ${latest._id}`
                });
            }
          });
        }
        let next: JsonValue | null = null;
        try {
          next = applyPatch(latestTree, patch);
        } catch (err) {
          if (!(err instanceof PatchError)) throw err;
          conflicts.push({ path: err.op.path, operation: err.index, reason: err.message });
        }
        if (conflicts.length > 0 || next === null)
          return { merged: false, latest_version: latest._id, base_version: proposal.base_version, conflicts };
        const stored = await deps.tree.insertVersion({
          _id: latest._id + 1,
          tree_json: canonicalJson(next),
          created_at: input.at,
          proposal_id: proposal._id,
          merged_by: input.merged_by,
          title: proposal.title
        });
        if (stored) return { merged: true, version: latest._id + 1 };
      }
      throw new Error(`could not take a version number after ${MAX_VERSION_RACES} concurrent merges; retrying`);
    },

    /** Records a proposal's final state: a ledger event, then the proposal document. */
    async recordProposalDecision(record: ProposalDecisionRecord): Promise<{ seq: number }> {
      const { entry } = await deps.ledger.append({
        kind: 'event',
        key: `hub.directory_tree.${record.state}`,
        value: {
          proposal_id: record.proposal_id,
          state: record.state,
          at: record.at,
          by: record.by,
          reason: record.reason,
          merged_version: record.merged_version,
          superseded_by: record.superseded_by
        },
        truth_type: 'decision',
        did: record.hub_did,
        idempotencyKey: `tree-proposal:${record.proposal_id}`
      });
      await deps.tree.setProposalState(record.proposal_id, {
        state: record.state,
        decided_at: record.at,
        decided_by: record.by,
        reason: record.reason,
        merged_version: record.merged_version,
        superseded_by: record.superseded_by
      });
      return { seq: entry.seq };
    }
  };
}
