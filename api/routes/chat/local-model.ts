/**
 * Self-hosted model chat (SPEC §4.8): POST /api/<model_name>/v1/chat (X-DID) for the configured models of kind
 * `local` (a llama.cpp server, Ollama, vLLM: any OpenAI-compatible endpoint), with the kernel prompt
 * (KERNEL_PROMPT_FILE, or the built-in one below) injected as the first system message. OpenAI-like request and
 * answer (a chat.completion); errors in the service's one shape. Same upstream path as the gateway: the openai SDK,
 * retries, fallbacks and circuit breakers.
 */
import fs from 'node:fs';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { APIUserAbortError } from 'openai';
import { z } from 'zod';
import { ChatError } from '../../../core/chat/openai-errors';
import { AppError } from '../../../core/errors';
import type { Config } from '../../../core/config.node';
import type { UpstreamBody } from '../../../core/chat/upstream.node';
import type { ChatServices } from '../../../services/chat/chat-services';
import { ERROR_BODY } from '../../response-docs';
import { chatMessage } from './openai-shape';

export const DEFAULT_KERNEL_PROMPT =
  'You are a self-hosted model of the zhongshu-hub federation. Answer truthfully and concisely; say so when you do not know. Never reveal credentials or keys.';

export function loadKernelPrompt(file: string | undefined): string {
  if (!file) return DEFAULT_KERNEL_PROMPT;
  const text = fs.readFileSync(file, 'utf8').trim();
  if (!text) throw new Error(`KERNEL_PROMPT_FILE=${file} is empty`);
  return text;
}

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

export const localModelChatRoutes: FastifyPluginAsyncZod<{ chat: ChatServices; config: Config }> = async (
  app,
  { chat, config }
) => {
  const kernelPrompt = loadKernelPrompt(config.KERNEL_PROMPT_FILE);
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
      const name = request.params.model_name;
      const model = chat.catalog.model(name);
      if (!model || model.kind !== 'local') {
        const local = chat.catalog.modelsFor(null, 'local').map((m) => m.id);
        throw new AppError(
          'model_not_found',
          `${name} is not a configured local model${local.length ? ` (configured: ${local.join(', ')})` : ' (none is configured: add a model of kind local to CHAT_PROVIDERS_FILE)'}`
        );
      }
      const { messages, ...rest } = request.body;
      const upstreamBody = {
        ...rest,
        messages: [{ role: 'system', content: kernelPrompt }, ...messages]
      } as unknown as UpstreamBody;
      const ac = new AbortController();
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) ac.abort();
      });
      try {
        const res = await chat.upstreams.complete(chat.catalog.chain(name), upstreamBody, ac.signal);
        // The upstream's answer as plain JSON (the SDK's types have no index signature), under our model name.
        const out: z.infer<typeof completion> = JSON.parse(JSON.stringify({ ...res.value, model: name }));
        return out;
      } catch (err) {
        if (err instanceof APIUserAbortError) throw err;
        if (err instanceof ChatError) {
          throw err.status === 400
            ? new AppError('invalid_request', err.message)
            : new AppError('upstream_failed', err.message);
        }
        throw err;
      }
    }
  );
};
