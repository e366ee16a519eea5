import { BadInputError } from '../errors';
import type { ChatMessage, ToolSpec } from '../trajectory/messages';
import type { ChatTokenizer } from './chat-tokenizer';
import { normalizeHookMessages, type HookMessageForm, type HookNormalization } from './hook-messages';
import { trajectoryToTemplateInput, type TemplateMessage, type TemplateTool } from './template-input';

/**
 * Stored messages as the target model's template must see them: hook system messages normalized
 * for this template (normalizeHookMessages with the tokenizer's form), then converted to the
 * template's input shape. Serving paths (distill prompts, the token-exact sampling path, replay)
 * call this, and the shard and rl token views do the same inside tokenizeConversation, so a
 * conversation is rendered the same way wherever the model is served or trained.
 */
export function templateInputForModel(
  tokenizer: Pick<ChatTokenizer, 'hookMessages' | 'templateFeatures'>,
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[],
  form: HookMessageForm = tokenizer.hookMessages,
): { messages: TemplateMessage[]; tools: TemplateTool[]; normalized: ChatMessage[]; normalization: HookNormalization } {
  const normalized = normalizeHookMessages(messages, form);
  if (!normalized.ok) throw new BadInputError('HOOK_NOT_FOLDABLE', normalized.reason);
  const input = trajectoryToTemplateInput(normalized.messages, [...tools], tokenizer.templateFeatures);
  return { ...input, normalized: normalized.messages, normalization: normalized.normalization };
}

/** The prompt a model is served for its next turn: normalized messages rendered with the generation prompt. */
export function renderServedPrompt(
  tokenizer: Pick<ChatTokenizer, 'hookMessages' | 'templateFeatures' | 'render'>,
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[],
  options: { enableThinking?: boolean; now?: Date } = {},
): { text: string; normalization: HookNormalization } {
  const input = templateInputForModel(tokenizer, messages, tools);
  const text = tokenizer.render(input.messages, {
    tools: input.tools,
    addGenerationPrompt: true,
    ...(options.enableThinking !== undefined ? { enableThinking: options.enableThinking } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  return { text, normalization: input.normalization };
}
