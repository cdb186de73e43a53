/**
 * The A2A v1.0 agent card (built by services/a2a/agent-card.ts), served at the documented path
 * (/a2a/.well-known/agent.json, docs/a2a.md#discovery-the-agent-card-and-the-endpoint-directory) and where A2A v1.0
 * clients look (/.well-known/agent-card.json), with an ETag, a Last-Modified (when its text last changed) and a
 * Cache-Control as long as the card is kept. This plugin also registers the bindings the card advertises
 * (./a2a-binding.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { A2aConfig, Config } from '../../../core/config.node';
import type { EndpointDirectory } from '../../directory';
import type { HubKeys } from '../../../store/keys/hub-keys';
import type { TaskStore } from '../../../store/federation/tasks';
import type { NodeStore } from '../../../store/federation/nodes';
import { CARD_TTL_MS, createAgentCard } from '../../../services/a2a/agent-card';
import { a2aBindingRoutes } from './a2a-binding';
import { noBody } from '../../response-docs';

type CardDeps = {
  config: Pick<Config, 'publicUrl' | 'JSON_MAX_DEPTH'> &
    Pick<A2aConfig, 'A2A_SEND_WAIT_S' | 'A2A_STREAM_MAX_S' | 'TASK_LEASE_S'>;
  directory: EndpointDirectory;
  keys: HubKeys;
  tasks: TaskStore;
  nodes: NodeStore;
};

/** The card as documented (the A2A v1.0 AgentCard's required members; the rest is described by the spec). */
const cardResponse = z
  .looseObject({
    name: z.string(),
    description: z.string(),
    supportedInterfaces: z
      .array(z.looseObject({ url: z.string(), protocolBinding: z.string(), protocolVersion: z.string() }))
      .min(1),
    version: z.string(),
    capabilities: z.looseObject({
      streaming: z.boolean(),
      pushNotifications: z.boolean(),
      extendedAgentCard: z.boolean()
    }),
    defaultInputModes: z.array(z.string()),
    defaultOutputModes: z.array(z.string()),
    skills: z.array(
      z.looseObject({ id: z.string(), name: z.string(), description: z.string(), tags: z.array(z.string()) })
    )
  })
  .describe('A2A v1.0 agent card');

export const agentCardRoutes: FastifyPluginAsyncZod<CardDeps> = async (app, deps) => {
  const card = createAgentCard(deps, (err) =>
    app.log.warn(
      { err: err instanceof Error ? err.message : String(err) },
      'agent card: online capabilities not read; serving the last card'
    )
  );
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const { body, etag, modified } = await card.current();
    reply
      .header('Cache-Control', `public, max-age=${CARD_TTL_MS / 1000}`)
      .header('ETag', etag)
      .header('Last-Modified', new Date(modified).toUTCString());
    if (request.headers['if-none-match'] === etag) return reply.code(304).send();
    return reply.type('application/json').send(body);
  };
  const schema = {
    response: { 200: cardResponse, 304: noBody('Not modified: If-None-Match carried the current ETag') }
  };
  app.get(
    '/a2a/.well-known/agent.json',
    {
      config: {
        auth: 'none',
        directory: { group: 'a2a_standard', summary: 'Agent discovery: capability declaration and endpoint directory' }
      },
      schema
    },
    handler
  );
  app.get('/.well-known/agent-card.json', { config: { auth: 'none' }, schema }, handler);
  // The interface the card advertises, in a context of its own (its errors take the binding's shape).
  await app.register(a2aBindingRoutes, { config: deps.config, tasks: deps.tasks });
};
