/**
 * What the agent card says is off, answered with A2A's typed refusals (inside the binding's plugin, under /a2a):
 *   /a2a/tasks/{id}/pushNotificationConfigs[/{config}]   PushNotificationNotSupported (pushNotifications: false)
 *   GET /a2a/extendedAgentCard                           ExtendedAgentCardNotConfigured (extendedAgentCard: false)
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { configParams, errors, taskParams } from './a2a-binding.schema';
import { refuse } from './a2a-replies';

export const a2aUnsupportedRoutes: FastifyPluginAsyncZod = async (app) => {
  const none = { auth: 'none' as const };
  const pushSummary = 'A2A push notification configs: not supported (capabilities.pushNotifications is false)';
  app.post(
    '/tasks/:task/pushNotificationConfigs',
    {
      config: none,
      schema: { summary: pushSummary, params: taskParams, response: errors(400, 413, 415, 500, 503) }
    },
    async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
  );
  app.get(
    '/tasks/:task/pushNotificationConfigs',
    { config: none, schema: { summary: pushSummary, params: taskParams, response: errors(400, 500, 503) } },
    async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
  );
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/tasks/:task/pushNotificationConfigs/:config',
      config: none,
      schema: { summary: pushSummary, params: configParams, response: errors(400, 413, 415, 500, 503) },
      handler: async (_r, reply) => refuse(reply, 'PUSH_NOTIFICATION_NOT_SUPPORTED')
    });
  }

  app.get(
    '/extendedAgentCard',
    {
      config: none,
      schema: {
        summary: 'A2A GetExtendedAgentCard: not configured (capabilities.extendedAgentCard is false)',
        response: errors(400, 500, 503)
      }
    },
    async (_r, reply) => refuse(reply, 'EXTENDED_AGENT_CARD_NOT_CONFIGURED')
  );
};
