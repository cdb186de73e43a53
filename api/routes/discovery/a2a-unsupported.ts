/**
 * What the agent card says is off, answered with A2A's typed refusals (inside the binding's plugin, under /a2a):
 *   /a2a/tasks/{id}/pushNotificationConfigs[/{config}]   PushNotificationNotSupported (pushNotifications: false)
 *   GET /a2a/extendedAgentCard                           UnsupportedOperation (extendedAgentCard: false; A2A v1.0
 *                                                        §3.3.4: ExtendedAgentCardNotConfigured is for a card that
 *                                                        says it has one)
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { configParams, errors, taskParams, versionHeader } from './a2a-binding.schema';
import { EXTENDED_CARD_REFUSAL, refuse } from './a2a-replies';

export const a2aUnsupportedRoutes: FastifyPluginAsyncZod = async (app) => {
  const none = { auth: 'none' as const };
  const pushSummary = 'A2A push notification configs: not supported (capabilities.pushNotifications is false)';
  app.post(
    '/tasks/:task/pushNotificationConfigs',
    {
      config: none,
      schema: {
        summary: pushSummary,
        headers: versionHeader,
        params: taskParams,
        response: errors(400, 413, 415, 500, 503)
      }
    },
    async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
  );
  app.get(
    '/tasks/:task/pushNotificationConfigs',
    {
      config: none,
      schema: { summary: pushSummary, headers: versionHeader, params: taskParams, response: errors(400, 500, 503) }
    },
    async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
  );
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/tasks/:task/pushNotificationConfigs/:config',
      config: none,
      schema: {
        summary: pushSummary,
        headers: versionHeader,
        params: configParams,
        response: errors(400, 413, 415, 500, 503)
      },
      handler: async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
    });
  }

  app.get(
    '/extendedAgentCard',
    {
      config: none,
      schema: {
        summary: 'A2A GetExtendedAgentCard: not supported (capabilities.extendedAgentCard is false)',
        headers: versionHeader,
        response: errors(400, 500, 503)
      }
    },
    async (_r, reply) => refuse(reply, 'UNSUPPORTED_OPERATION', EXTENDED_CARD_REFUSAL)
  );
};
