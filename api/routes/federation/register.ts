/**
 * POST /a2a/register (no auth): a node joins the federation (services/federation/node-registration.ts).
 * 201 { node_id, api_key (shown once; only its digest is stored), state, workflow_id, heartbeat, endpoints }.
 * The node id takes the next hub-wide sequence number; the unique seq index is what guarantees no two nodes share
 * one (see NodeStore.insertWithNextSequence), so concurrent registrations never collide. A number lost to another
 * API process is retried with the next one inside the store; a registration that cannot get one answers 503.
 * The node document is stored first, then node/<node_id> is started; if Temporal cannot be reached the document is
 * removed again and the answer is 503 (nothing half-registered). An optional `did` links the node's DID to it (400
 * unknown or revoked, 409 linked to another node; see the service).
 */
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { FederationConfig } from '../../../core/config.node';
import { registrationBody } from '../../../core/federation/vocabulary';
import type { NodeStore } from '../../../store/federation/nodes';
import type { DidRegistryStore } from '../../../store/deploy/registry';
import { ERROR_BODY } from '../../response-docs';
import { createNodeRegistration, type RegistrationConfig } from '../../../services/federation/node-registration';
import type { EndpointDirectory } from '../../directory';

const registeredResponse = z
  .object({
    ok: z.literal(true),
    node_id: z.string(),
    api_key: z.string().describe('shown once; only its digest is stored'),
    state: z.enum(['pending_review', 'offline']),
    workflow_id: z.string(),
    did: z.string().nullable().describe('the DID linked to the node (X-DID alone authenticates as it), or null'),
    message: z.string(),
    heartbeat: z.object({
      url: z.string(),
      headers: z.record(z.string(), z.string()),
      offline_after_s: z.number().int(),
      recommended_interval_s: z.number().int()
    }),
    endpoints: z.object({
      full_directory_url: z.string(),
      summary_url: z.string(),
      agent_card_url: z.string(),
      entries: z.array(
        z.object({ method: z.string(), path: z.string(), group: z.string(), auth: z.string(), url: z.string() })
      )
    })
  })
  .describe('Registered');

export const registerRoutes: FastifyPluginAsyncZod<{
  nodes: NodeStore;
  didRegistry: DidRegistryStore;
  temporal: Client;
  directory: EndpointDirectory;
  config: RegistrationConfig & Pick<FederationConfig, 'REGISTER_RATE_LIMIT_PER_MIN'>;
}> = async (app, deps) => {
  const { config } = deps;
  const registration = createNodeRegistration(deps);

  app.post(
    '/a2a/register',
    {
      config: {
        auth: 'none',
        directory: {
          group: 'a2a_standard',
          summary: 'Node self-registration: returns node_id, api_key (once) and the endpoint directory'
        },
        // Anonymous and creates state: limited per client address (429 rate_limited with Retry-After).
        rateLimit: { max: config.REGISTER_RATE_LIMIT_PER_MIN, timeWindow: 60_000 }
      },
      schema: {
        body: registrationBody,
        response: {
          201: registeredResponse,
          409: ERROR_BODY.describe('The DID in `did` is linked to another node (did_register moves links)')
        }
      }
    },
    async (request, reply) => reply.code(201).send(await registration.register(request.body, request.log))
  );
};
