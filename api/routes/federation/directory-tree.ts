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
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { FederationConfig, ServiceConfig, TemporalConfig } from '../../../core/config.node';
import { queryInt } from '../../../core/identifiers';
import type { DirectoryTreeStore } from '../../../store/federation/directory-tree';
import type { NodeStore } from '../../../store/federation/nodes';
import { createTreeProposals } from '../../../services/federation/tree-proposals';
import { ERROR_BODY } from '../../response-docs';
import {
  latestResponse,
  mergeBody,
  mergeConflict,
  mergeResponse,
  proposeBody,
  proposeConflict,
  proposedResponse,
  PROPOSAL_STATES,
  reviewResponse
} from './directory-tree.schema';

export const directoryTreeRoutes: FastifyPluginAsyncZod<{
  tree: DirectoryTreeStore;
  nodes: NodeStore;
  temporal: Client;
  config: Pick<ServiceConfig, 'SERVICE_DID'> &
    Pick<TemporalConfig, 'TEMPORAL_TASK_QUEUE'> &
    Pick<FederationConfig, 'TREE_PROPOSAL_HISTORY_LIMIT'>;
}> = async (app, deps) => {
  const proposals = createTreeProposals(deps);
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
    async (request) => proposals.version(request.query.version)
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
    async (request, reply) => reply.code(201).send(await proposals.propose(request.principal!, request.body))
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
    async (request) => proposals.review(request.query.state, request.query.limit)
  );

  app.post(
    '/a2a/directory-tree/merge',
    {
      config: group('homologous', 'Merge (or reject) a proposal; 409 with the conflicts if it no longer applies'),
      schema: { body: mergeBody, response: { 200: mergeResponse, 409: mergeConflict } }
    },
    async (request) => proposals.decide(request.principal!, request.body)
  );
};
