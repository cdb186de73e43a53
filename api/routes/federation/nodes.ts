/**
 * The node directory and the live network view (no auth; never an API key or its digest):
 *   GET /a2a/nodes?state=&brand=&limit=&offset=   paginated directory, with last-seen time and latest sample
 *   GET /a2a/nodes/:node_id                        one node, with its down-sampled heartbeat history
 *   GET /a2a/dashboard                             online rate, counts by state and brand, resource aggregates,
 *                                                  heartbeats in the last minute
 * The use cases are services/federation/node-directory.ts.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { queryInt } from '../../../core/identifiers';
import type { FederationConfig } from '../../../core/config.node';
import { BRAND_CODES, NODE_STATES, nodeIdParam } from '../../../core/federation/vocabulary';
import type { HeartbeatHistoryStore } from '../../../store/federation/heartbeat-history';
import type { PresenceStore } from '../../../store/federation/presence';
import type { NodeStore } from '../../../store/federation/nodes';
import { createNodeDirectory } from '../../../services/federation/node-directory';
import { dashboardResponse, listResponse, nodeResponse } from './nodes.schema';

export const nodeDirectoryRoutes: FastifyPluginAsyncZod<{
  nodes: NodeStore;
  presence: PresenceStore;
  heartbeatHistory: HeartbeatHistoryStore;
  config: Pick<FederationConfig, 'NODE_OFFLINE_AFTER_S'>;
}> = async (app, deps) => {
  const directory = createNodeDirectory(deps);
  app.get(
    '/a2a/nodes',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'a2a_standard',
          summary: 'Node directory (never api_key); filter by state and brand; paginated'
        }
      },
      schema: {
        querystring: z.object({
          state: z.enum(NODE_STATES).optional(),
          brand: z.enum(BRAND_CODES).optional(),
          limit: queryInt(1, 200).default(50),
          offset: queryInt(0).default(0)
        }),
        response: { 200: listResponse }
      }
    },
    async (request) => directory.list(request.query)
  );

  app.get(
    '/a2a/nodes/:node_id',
    {
      config: { auth: 'none' },
      schema: { params: z.object({ node_id: nodeIdParam }), response: { 200: nodeResponse } }
    },
    async (request) => directory.node(request.params.node_id)
  );

  app.get(
    '/a2a/dashboard',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'a2a_standard',
          summary: 'Live network state: online rate, states, brands, resources, heartbeats per minute'
        }
      },
      schema: { response: { 200: dashboardResponse } }
    },
    async () => directory.dashboard()
  );
};
