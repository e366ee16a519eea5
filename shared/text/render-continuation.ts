import type { ChatMessage, ToolSpec } from '../trajectory/messages';
import { locateAssistantSpans } from './assistant-spans';
import type { RenderOptions } from './chat-template';
import type { ChatTokenizer } from './chat-tokenizer';
import { rejection, type SampleRejection } from './sample-rejection';
import { templateInputForModel } from './served-prompt';

/** What follows the model's last turn before it samples again, as the template renders it. */
export interface RenderedContinuation {
  /** From just after the last assistant turn's end-of-turn token through the next generation header. */
  text: string;
  /** `text` tokenized alone (no BOS/EOS added). */
  ids: number[];
  /** The whole conversation rendered with the generation prompt (what a fresh render would serve). */
  fullText: string;
}

export type ContinuationOptions = Pick<RenderOptions, 'enableThinking' | 'now'>;

/**
 * The environment's part of a multi-turn episode (tool results, viewer follow-ups, hook
 * injections, then the next assistant header), tokenized exactly as the chat template renders
 * that continuation: the conversation is rendered whole with the generation prompt, the last
 * assistant turn located in that rendering (assistant-spans: from its header through its
 * end-of-turn token), and everything after it is the continuation. Cutting in the full rendering,
 * not by subtracting a prefix rendering, keeps templates that re-render earlier turns (Qwen3
 * dropping old reasoning) from leaking into the continuation; the re-rendering itself is what the
 * episode's drift check measures.
 */
export function renderContinuation(
  tokenizer: ChatTokenizer,
  messages: ChatMessage[],
  tools: ToolSpec[],
  options: ContinuationOptions,
): { ok: true; continuation: RenderedContinuation } | SampleRejection {
  // Hook system messages normalized for this template, as served prompts and training views are.
  let input: ReturnType<typeof templateInputForModel>;
  try {
    input = templateInputForModel(tokenizer, messages, tools);
  } catch (error) {
    return rejection('HOOK_NOT_FOLDABLE', (error as Error).message);
  }
  let last = input.messages.length - 1;
  while (last >= 0 && input.messages[last].role !== 'assistant') last--;
  if (last < 0) return rejection('NO_ASSISTANT_TURN', 'the conversation has no assistant turn to continue from');
  if (last === input.messages.length - 1)
    return rejection(
      'NO_CONTINUATION',
      'the conversation ends with the assistant turn: there is no environment message to render',
      last,
    );
  const renderOptions: RenderOptions = {
    tools: input.tools,
    addGenerationPrompt: true,
    ...(options.enableThinking === undefined ? {} : { enableThinking: options.enableThinking }),
    ...(options.now ? { now: options.now } : {}),
  };
  let fullText: string;
  try {
    fullText = tokenizer.render(input.messages, renderOptions);
  } catch (error) {
    return rejection('TEMPLATE_ERROR', `rendering the conversation: ${(error as Error).message}`);
  }
  const located = locateAssistantSpans({
    render: (templateMessages, templateOptions) => tokenizer.render(templateMessages, templateOptions),
    generationPrompt: (templateOptions) => tokenizer.generationPrompt(templateOptions),
    messages: input.messages,
    text: fullText,
    options: renderOptions,
    messageIndices: [last],
    endOfTurnTokens: tokenizer.endOfTurnTokens,
    addedTokens: tokenizer.addedTokens,
  });
  if (!located.ok) return located;
  const text = fullText.slice(located.spans[0].end);
  return { ok: true, continuation: { text, ids: tokenizer.encode(text), fullText } };
}
