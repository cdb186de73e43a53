/**
 * Self-hosted model chat (docs/chat.md#routes): POST /api/<model_name>/v1/chat (X-DID) for the configured models
 * of kind `local`, with the kernel prompt injected first (services/chat/local-model-chat.ts). OpenAI-like request and
 * answer (a chat.completion); errors in the service's one shape.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ChatConfig } from '../../../core/config.node';
import type { ChatServices } from '../../../services/chat/chat-services';
import { createLocalModelChat } from '../../../services/chat/local-model-chat';
import { ERROR_BODY } from '../../response-docs';
import { chatMessage } from './openai-shape';

const body = z.looseObject({
  messages: z.array(chatMessage).min(1).max(2000),
  temperature: z.number().min(0).max(2).default(1),
  max_tokens: z.number().int().min(1).max(1_000_000).optional()
});

const completion = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  model: z.string(),
  choices: z.array(z.looseObject({}))
});

export const localModelChatRoutes: FastifyPluginAsyncZod<{
  chat: ChatServices;
  config: Pick<ChatConfig, 'KERNEL_PROMPT_FILE'>;
}> = async (app, { chat, config }) => {
  const localChat = createLocalModelChat({ chat, config });
  app.post(
    '/api/:model_name/v1/chat',
    {
      config: { auth: 'did' },
      schema: {
        params: z.object({ model_name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'a local model id') }),
        body,
        response: {
          200: completion.describe('A chat.completion'),
          502: ERROR_BODY.describe('The local model (and its fallbacks) failed; retry later')
        }
      }
    },
    async (request, reply) => {
      const ac = new AbortController();
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) ac.abort();
      });
      return localChat.complete(request.params.model_name, request.body, ac.signal);
    }
  );
};
