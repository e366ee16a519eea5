import { httpModelEndpoint } from '../model-endpoint';
import type { ModelAdapterFactory } from '../model-registry';
import { OpenAiChatClient } from './openai-chat-client';
import { openAiModelConfigSchema, type OpenAiModelConfig } from './openai-model-config';

/** The `openai` adapter: any OpenAI-compatible chat server (a chat client only). */
export const openAiAdapter: ModelAdapterFactory<OpenAiModelConfig> = {
  chat: {
    configSchema: openAiModelConfigSchema,
    create: (config, dependencies) => new OpenAiChatClient(config, dependencies),
  },
  endpoint: (config) => httpModelEndpoint('openai', config),
};
