/**
 * The chat gateway's shared parts, as the API process's context builds them (api/context.ts); they live in
 * services/chat/chat-services.ts beside the chat use cases that read them.
 */
export { createChatServices } from '../services/chat/chat-services';
export type { ChatServices, ChatServicesConfig } from '../services/chat/chat-services';
