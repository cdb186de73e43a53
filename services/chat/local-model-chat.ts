/**
 * Chat with a self-hosted model (docs/chat.md#routes): one of the configured models of kind `local` (a llama.cpp
 * server, Ollama, vLLM: any OpenAI-compatible endpoint), with the kernel prompt (KERNEL_PROMPT_FILE, or the built-in
 * one below) injected as the first system message. Same upstream path as the gateway: the openai SDK, retries,
 * fallbacks and circuit breakers; failures in the service's one error shape.
 */
import fs from 'node:fs';
import { APIUserAbortError } from 'openai';
import { ChatError } from '../../core/chat/openai-errors';
import type { UpstreamBody } from '../../core/chat/upstream.node';
import type { ChatConfig } from '../../core/config.node';
import { AppError } from '../../core/errors';
import type { ChatServices } from './chat-services';

export const DEFAULT_KERNEL_PROMPT =
  'You are a self-hosted model of the zhongshu-hub federation. Answer truthfully and concisely; say so when you do not know. Never reveal credentials or keys.';

export function loadKernelPrompt(file: string | undefined): string {
  if (!file) return DEFAULT_KERNEL_PROMPT;
  const text = fs.readFileSync(file, 'utf8').trim();
  if (!text) throw new Error(`KERNEL_PROMPT_FILE=${file} is empty`);
  return text;
}

/** A chat.completion as the upstream answered it (every field kept), under the local model's name. */
export interface LocalCompletion {
  id: string;
  object: 'chat.completion';
  model: string;
  choices: Record<string, unknown>[];
  [field: string]: unknown;
}

export type LocalModelChat = ReturnType<typeof createLocalModelChat>;

/** Reads the kernel prompt once (a missing or empty KERNEL_PROMPT_FILE stops the API process from starting). */
export function createLocalModelChat(deps: {
  chat: Pick<ChatServices, 'catalog' | 'upstreams'>;
  config: Pick<ChatConfig, 'KERNEL_PROMPT_FILE'>;
}) {
  const { chat, config } = deps;
  const kernelPrompt = loadKernelPrompt(config.KERNEL_PROMPT_FILE);
  return {
    /**
     * The local model's chat.completion as plain JSON, under the name asked for; 404 for a name that is not a
     * configured local model, 400 for a request the upstream refused, 502 when the model and its fallbacks failed.
     */
    async complete<B extends { messages: unknown[] }>(
      name: string,
      body: B,
      signal: AbortSignal
    ): Promise<LocalCompletion> {
      const model = chat.catalog.model(name);
      if (!model || model.kind !== 'local') {
        const local = chat.catalog.modelsFor(null, 'local').map((m) => m.id);
        throw new AppError(
          'model_not_found',
          `${name} is not a configured local model${local.length ? ` (configured: ${local.join(', ')})` : ' (none is configured: add a model of kind local to CHAT_PROVIDERS_FILE)'}`
        );
      }
      const { messages, ...rest } = body;
      const upstreamBody = {
        ...rest,
        messages: [{ role: 'system', content: kernelPrompt }, ...messages]
      } as unknown as UpstreamBody;
      try {
        const res = await chat.upstreams.complete(chat.catalog.chain(name), upstreamBody, signal);
        // The upstream's answer as plain JSON (the SDK's types have no index signature), under our model name.
        const out: LocalCompletion = JSON.parse(JSON.stringify({ ...res.value, model: name }));
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
  };
}
