/**
 * The shared architecture directory tree: immutable numbered versions (the _id is the version number, so two
 * merges racing for the same next version cannot both win) and the proposals against them. Trees and patches are
 * kept as canonical JSON text (any JSON a node sends survives FerretDB). Proposal state is owned by the
 * tree-proposal/<id> workflow; this module only stores.
 */
import { Collection, Db } from 'mongodb';
import { canonicalJson, JsonValue } from '../../core/ledger/canonical-json';
import { isDuplicateKey } from '../mongo';

export type ProposalState = 'open' | 'merged' | 'rejected' | 'superseded';

export interface TreeVersionDocument {
  _id: number; // version
  tree_json: string;
  created_at: string;
  proposal_id: string | null;
  merged_by: string | null;
  title: string;
}

export interface ProposalDocument {
  _id: string; // proposal id
  base_version: number;
  title: string;
  rationale: string;
  patch_json: string;
  author: string;
  author_model: string;
  state: ProposalState;
  created_at: string;
  decided_at: string | null;
  decided_by: string | null;
  reason: string | null;
  merged_version: number | null;
  superseded_by: string | null;
  supersedes: string | null;
}

/** Version 1: the federation's architecture as the hub knows it at first start. Proposals grow it from here. */
export const INITIAL_TREE: JsonValue = {
  federation: {
    hub: {
      listeners: {
        main: 'federation, truth ledger, OAuth, admin',
        backup: 'truth write + short status',
        hub: 'task submission',
        commercial: 'commercial gateway',
        memory: 'memory gateway',
        daemon: 'local daemon (127.0.0.1)'
      },
      flows: {
        node_lifecycle: 'node/<node_id>',
        truth_approval: 'truth-approval/<id>',
        tree_proposal: 'tree-proposal/<id>'
      }
    },
    nodes: {},
    gateways: {}
  }
};

export class DirectoryTreeStore {
  private readonly versions: Collection<TreeVersionDocument>;
  private readonly proposals: Collection<ProposalDocument>;
  constructor(db: Db) {
    this.versions = db.collection('directory_tree_versions');
    this.proposals = db.collection('tree_proposals');
  }

  /** Creates version 1 if the tree is empty (safe to call from every process at start). */
  async ensureInitialVersion(): Promise<void> {
    try {
      await this.versions.insertOne({
        _id: 1,
        tree_json: canonicalJson(INITIAL_TREE),
        created_at: new Date().toISOString(),
        proposal_id: null,
        merged_by: null,
        title: 'initial tree'
      });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  async latest(): Promise<TreeVersionDocument> {
    const [doc] = await this.versions.find({}).sort({ _id: -1 }).limit(1).toArray();
    if (!doc) throw new Error('directory tree has no version; ensureInitialVersion was not called');
    return doc;
  }

  version(version: number): Promise<TreeVersionDocument | null> {
    return this.versions.findOne({ _id: version });
  }

  versionMergedFrom(proposalId: string): Promise<TreeVersionDocument | null> {
    return this.versions.findOne({ proposal_id: proposalId });
  }

  /** Inserts the next version; false if another merge took that number first. */
  async insertVersion(doc: TreeVersionDocument): Promise<boolean> {
    try {
      await this.versions.insertOne(doc);
      return true;
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
  }

  async insertProposal(doc: ProposalDocument): Promise<void> {
    await this.proposals.insertOne(doc);
  }

  async deleteProposal(id: string): Promise<void> {
    await this.proposals.deleteOne({ _id: id });
  }

  findProposal(id: string): Promise<ProposalDocument | null> {
    return this.proposals.findOne({ _id: id });
  }

  listProposals(state: ProposalState, limit: number): Promise<ProposalDocument[]> {
    return this.proposals.find({ state }).sort({ created_at: 1 }).limit(limit).toArray();
  }

  async setProposalState(
    id: string,
    fields: Pick<
      ProposalDocument,
      'state' | 'decided_at' | 'decided_by' | 'reason' | 'merged_version' | 'superseded_by'
    >
  ): Promise<void> {
    await this.proposals.updateOne({ _id: id }, { $set: fields });
  }
}
