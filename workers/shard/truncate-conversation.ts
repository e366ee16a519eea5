import type { ChatTokenizer } from '../../shared/text/chat-tokenizer';
import {
  tokenizeConversation,
  type TokenizedSample,
  type TokenizeOptions,
} from '../../shared/text/tokenize-conversation';
import type { ChatMessage, ToolSpec } from '../../shared/trajectory/messages';

export interface Truncation {
  sample: TokenizedSample;
  /** The conversation as trained: a prefix ending with an assistant turn. */
  messages: ChatMessage[];
  /** Messages cut from the end. */
  droppedMessages: number;
}

/**
 * Cuts an over-length conversation at a turn boundary: the longest prefix that ends with an
 * assistant turn and, rendered and tokenized again on its own, fits in `maxTokens`. The prefix is
 * re-rendered rather than cut from the long sample's tokens because a rendering of a prefix is not
 * a prefix of the rendering (Qwen3 adds an empty think block to assistant turns after the last
 * user query, and the cut moves that point). Undefined when not even the first assistant turn fits.
 *
 * Binary search over the assistant turns (a longer prefix never renders shorter), so a long
 * conversation costs a few tokenizations, not one per turn.
 */
export function truncateToFit(
  tokenizer: ChatTokenizer,
  messages: readonly ChatMessage[],
  tools: ToolSpec[],
  options: TokenizeOptions,
  maxTokens: number,
): Truncation | undefined {
  const ends = messages.flatMap((message, index) => (message.role === 'assistant' ? [index + 1] : []));
  // The whole conversation is known to be too long.
  if (ends.at(-1) === messages.length) ends.pop();
  let best: Truncation | undefined;
  let low = 0;
  let high = ends.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const prefix = messages.slice(0, ends[middle]);
    const result = tokenizeConversation(tokenizer, prefix, tools, options);
    if (result.ok && result.sample.inputIds.length <= maxTokens) {
      best = { sample: result.sample, messages: prefix, droppedMessages: messages.length - prefix.length };
      low = middle + 1;
    } else high = middle - 1;
  }
  return best;
}
