import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BadInputError } from '../../errors';
import type { ChatMessage, ToolSpec } from '../../trajectory/messages';
import { ChatTemplate } from '../../text/chat-template';
import { hookMessageFormFor, normalizeHookMessages, probeSystemMessagePlacement } from '../../text/hook-messages';
import { parseJsonKeepingFloats } from '../../text/python-values';
import type { TemplateMessage } from '../../text/template-input';
import { specialTokenContent } from './tokenizer-source';

/** Renders a conversation to the prompt text the model was trained on. */
export interface ChatRenderer {
  render(messages: ChatMessage[], options: { tools?: ToolSpec[]; addGenerationPrompt: boolean }): string;
  /** The template's text (what the tool-call format is detected from). */
  readonly templateText: string;
}

/**
 * The model's own chat template (tokenizer_config.json `chat_template`, or `chat_template.jinja`
 * beside it) rendered with @huggingface/jinja printing values as Python does (ChatTemplate): never
 * a hand-written chat format, so prompts match what serving the model would build. Tool-call arguments stored as JSON strings are parsed
 * first, because templates `tojson` objects and print strings verbatim.
 */
export function createChatTemplateRenderer(directory: string, tokenizerConfig: Record<string, unknown>): ChatRenderer {
  const tokenString = (field: string): string | undefined => specialTokenContent(tokenizerConfig, field);
  const templateText = chatTemplateSource(directory, tokenizerConfig);
  const template = new ChatTemplate(templateText, {
    bos_token: tokenString('bos_token'),
    eos_token: tokenString('eos_token'),
    pad_token: tokenString('pad_token'),
    unk_token: tokenString('unk_token'),
  });
  const renderAsIs = (messages: ChatMessage[], options: { tools?: ToolSpec[]; addGenerationPrompt: boolean }) =>
    template.render(messages.map(templateMessage), {
      tools: options.tools,
      addGenerationPrompt: options.addGenerationPrompt,
    });
  // Hook system messages reach the template as shard and rl train them (shared/text/hook-messages.ts).
  const form = hookMessageFormFor(
    probeSystemMessagePlacement((messages) => renderAsIs(messages as ChatMessage[], { addGenerationPrompt: false })),
  );
  return {
    templateText,
    render(messages, options) {
      const normalized = normalizeHookMessages(messages, form);
      if (!normalized.ok) throw new BadInputError('HOOK_NOT_FOLDABLE', normalized.reason);
      return renderAsIs(normalized.messages, options);
    },
  };
}

function chatTemplateSource(directory: string, tokenizerConfig: Record<string, unknown>): string {
  const file = join(directory, 'chat_template.jinja');
  if (existsSync(file)) return readFileSync(file, 'utf8');
  const template = tokenizerConfig.chat_template;
  if (typeof template === 'string') return template;
  // Some configs hold named templates: [{ name: 'default', template }, { name: 'tool_use', ... }].
  if (Array.isArray(template)) {
    const named = template as Array<{ name?: unknown; template?: unknown }>;
    const chosen = named.find((entry) => entry.name === 'default') ?? named[0];
    if (typeof chosen?.template === 'string') return chosen.template;
  }
  throw new BadInputError(
    'ONNX_CHAT_TEMPLATE_MISSING',
    `${join(directory, 'tokenizer_config.json')} has no chat_template and ${file} does not exist; copy the chat template of the model's tokenizer into the model directory`,
  );
}

function templateMessage(message: ChatMessage): TemplateMessage {
  if (message.role !== 'assistant') return { ...message };
  return {
    ...message,
    role: 'assistant',
    // Templates test `'</think>' in message.content`; vLLM renders a null content as '' too.
    content: message.content ?? '',
    tool_calls: message.tool_calls?.map((call) => ({
      ...call,
      function: { ...call.function, arguments: parsedArguments(call.function.arguments) },
    })),
  };
}

function parsedArguments(text: string): unknown {
  try {
    // Floats stay floats (`99.0`), as Python's json.loads reads them at serving time.
    const value: unknown = parseJsonKeepingFloats(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : text;
  } catch {
    return text;
  }
}
