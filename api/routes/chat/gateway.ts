/**
 * The OpenAI-compatible chat gateway (auth `api_key`): GET /v1/models, POST /v1/chat/completions (JSON or SSE),
 * GET /v1/usage, and the federated nodes' always-streaming POST /v1/chat/stream. A client changes only its base URL:
 * answers, chunks and errors are in OpenAI's shapes.
 *
 * Per request: the key's plan (from its authentication), the model and the plan's permission for it, then the
 * limits (requests this minute and today, exact across processes; tokens today), then the upstream chain
 * (core/chat/upstream.node.ts): services/chat/admission.ts and services/chat/completions.ts.
 */
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { queryInt } from '../../../core/identifiers';
import { chatKeyOf, ChatCaller, createChatAdmission } from '../../../services/chat/admission';
import type { ChatServices } from '../../../services/chat/chat-services';
import { createChatCompletions } from '../../../services/chat/completions';
import { usageReport } from '../../../services/chat/usage-report';
import { confirmApiKey } from '../../plugins/auth/api-key';
import type { Principal } from '../../plugins/auth/principal';
import { completionResponse, modelList, SSE_DESCRIPTION, usageResponse } from './gateway.schema';
import { chatCompletionBody, installOpenAiErrorHandler, openAiErrorResponses } from './openai-shape';

/**
 * `oauthPlan`: the plan whose models and limits an OAuth client gets on POST /v1/chat/stream (CHAT_OAUTH_PLAN); its
 * limits and usage are counted per client id, as `oauth:<client_id>`.
 */
export const chatGatewayRoutes: FastifyPluginAsyncZod<{ chat: ChatServices; oauthPlan?: string }> = async (
  app,
  { chat, oauthPlan = 'S1' }
) => {
  installOpenAiErrorHandler(app);
  const auth = 'api_key' as const;
  const admission = createChatAdmission(chat);
  const completions = createChatCompletions(chat, admission);

  const keyOf = (request: FastifyRequest) =>
    chatKeyOf(request.principal, request.routeOptions.config.authAlso?.includes('oauth') ?? false, oauthPlan);
  /** The caller of a completion; a key answered from the auth cache carries the store's verdict still to come. */
  const callerOf = (request: FastifyRequest): ChatCaller<Principal> => ({
    ...keyOf(request),
    confirmation: confirmApiKey(request),
    confirmed: (principal) => {
      request.principal = principal;
    }
  });

  app.get(
    '/v1/models',
    {
      config: { auth },
      schema: {
        response: {
          200: modelList.describe('The models this key may use (OpenAI list shape)'),
          ...openAiErrorResponses([401, 429, 500, 503])
        }
      }
    },
    async (request, reply) => {
      const { keyId, plan } = keyOf(request);
      await admission.knownRateHeaders(reply, keyId, plan);
      const data = chat.catalog
        .modelsFor(plan)
        .map((m) => ({ id: m.id, object: 'model' as const, created: chat.catalog.created, owned_by: m.owned_by }));
      return { object: 'list' as const, data };
    }
  );

  app.post(
    '/v1/chat/completions',
    {
      config: { auth, apiKeyConfirmLater: true },
      schema: {
        body: chatCompletionBody,
        response: {
          200: {
            description: `A chat.completion (stream false), or with stream true ${SSE_DESCRIPTION}`,
            content: {
              'application/json': { schema: completionResponse },
              'text/event-stream': { schema: z.string().describe(SSE_DESCRIPTION) }
            }
          },
          ...openAiErrorResponses([400, 401, 403, 404, 413, 415, 429, 500, 502, 503])
        }
      }
    },
    async (request, reply) => completions.completions(request, reply, callerOf(request), request.body)
  );

  app.post(
    '/v1/chat/stream',
    {
      // Federated nodes may also use an OAuth access token (POST /v1/oauth/token) in place of an API key.
      config: {
        auth,
        authAlso: ['oauth'],
        apiKeyConfirmLater: true,
        directory: { group: 'federated_compute', summary: 'Streaming chat over the gateway providers (always SSE)' }
      },
      schema: {
        body: chatCompletionBody,
        response: {
          200: {
            description: SSE_DESCRIPTION,
            content: { 'text/event-stream': { schema: z.string().describe(SSE_DESCRIPTION) } }
          },
          ...openAiErrorResponses([400, 401, 403, 404, 413, 415, 429, 500, 502, 503])
        }
      }
    },
    async (request, reply) => completions.stream(request, reply, callerOf(request), request.body)
  );

  app.get(
    '/v1/usage',
    {
      // OAuth clients with the scope `chat` read what they used on POST /v1/chat/stream (as oauth:<client_id>).
      config: { auth, authAlso: ['oauth'] },
      schema: {
        querystring: z.object({
          days: queryInt(1, 90).optional().describe('how many days back, today included (default 7)')
        }),
        response: { 200: usageResponse, ...openAiErrorResponses([400, 401, 404, 429, 500, 503]) }
      }
    },
    async (request, reply) => {
      const { keyId, plan } = keyOf(request);
      await admission.knownRateHeaders(reply, keyId, plan);
      return usageReport(chat, keyId, plan, request.query.days ?? 7);
    }
  );
};
