/**
 * Why a conversation was not turned into an SFT sample. Rejections are data, not exceptions:
 * the shard stage counts them by code and keeps going.
 */
export type RejectionCode =
  /** The conversation has no assistant turn to train on. */
  | 'NO_ASSISTANT_TURN'
  /** The template raised or failed on this conversation. */
  | 'TEMPLATE_ERROR'
  /** A trained turn has tool calls and the template never renders tool calls. */
  | 'TOOL_CALLS_NOT_RENDERED'
  /** A field of a trained assistant turn (content, a call's name or arguments) is missing from the rendering. */
  | 'FIELD_NOT_RENDERED'
  /** Message text contains special-token text or the private-use characters span location relies on. */
  | 'RESERVED_TEXT'
  /** The template's generation prompt is not the conversation rendering plus a suffix. */
  | 'GENERATION_PROMPT_MISMATCH'
  /** The generation header (e.g. `<|im_start|>assistant\n`) is not found before the turn. */
  | 'HEADER_NOT_FOUND'
  /** No end-of-turn token follows the turn, so the model would never learn to stop. */
  | 'NO_END_OF_TURN'
  /** A trained span would include another message's text (a tool result, a user turn). */
  | 'SPAN_OVERLAP'
  /** A span boundary falls inside a token of the whole-text tokenization. */
  | 'TOKEN_BOUNDARY'
  /** The masked tokens do not decode back to the assistant turn's rendered text. */
  | 'DECODE_MISMATCH'
  /** The conversation ends with the assistant: no environment message follows to render (token-exact episodes). */
  | 'NO_CONTINUATION'
  /** A hook system message has no user turn or tool result beside it to fold into (templates that accept system messages only first). */
  | 'HOOK_NOT_FOLDABLE';

export interface SampleRejection {
  ok: false;
  code: RejectionCode;
  /** One sentence for people: what went wrong, where, and what to do. */
  reason: string;
  /** Index of the message the problem is about, when there is one. */
  messageIndex?: number;
}

export function rejection(code: RejectionCode, reason: string, messageIndex?: number): SampleRejection {
  return messageIndex === undefined ? { ok: false, code, reason } : { ok: false, code, reason, messageIndex };
}
