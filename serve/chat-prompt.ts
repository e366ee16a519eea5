import { ChatTemplate, type ChatTemplateSource } from '../shared/text/chat-template';
import { trajectoryToTemplateInput } from '../shared/text/template-input';
import type { ChatMessage, ToolSpec } from '../shared/trajectory/messages';
import { specialTokenContent } from '../shared/models/onnx/tokenizer-source';
import type { ServeContext } from './serve-engine';
import { ServeRequestError } from './serve-errors';

/** Compiled once per served model, on the first request that needs it. */
const kwargsTemplates = new WeakMap<ServeContext['served'], ChatTemplate>();

/**
 * The prompt token ids of a chat request. Without `chat_template_kwargs` the conversation is
 * rendered exactly as the in-process ONNX client renders it; with them (e.g. `enable_thinking`)
 * through the text package's template renderer, which passes them to the template as variables,
 * as vLLM does.
 */
export function chatPromptIds(
  context: ServeContext,
  messages: ChatMessage[],
  tools: ToolSpec[] | undefined,
  addGenerationPrompt: boolean,
  templateKwargs: Record<string, unknown> | null | undefined,
): number[] {
  const { model } = context.served;
  try {
    if (!templateKwargs || Object.keys(templateKwargs).length === 0) {
      return model.tokenizer.encode(model.renderer.render(messages, { tools, addGenerationPrompt }));
    }
    let template = kwargsTemplates.get(context.served);
    if (!template) {
      const config = context.served.tokenizerConfig;
      const special = Object.fromEntries(
        ['bos_token', 'eos_token', 'pad_token', 'unk_token'].map((field) => [
          field,
          specialTokenContent(config, field),
        ]),
      );
      template = new ChatTemplate(context.served.chatTemplateSource, special);
      kwargsTemplates.set(context.served, template);
    }
    const input = trajectoryToTemplateInput(messages, tools ?? []);
    return model.tokenizer.encode(
      template.render(input.messages, { tools: input.tools, addGenerationPrompt, variables: templateKwargs }),
    );
  } catch (error) {
    throw new ServeRequestError(
      400,
      `the chat template failed to render these messages: ${(error as Error).message}`,
      'messages',
    );
  }
}

export type { ChatTemplateSource };
