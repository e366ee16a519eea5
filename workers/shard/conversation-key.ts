import { canonicalJson, sha256Hex } from '../../shared/hash/hash';
import type { ChatMessage, ToolSpec } from '../../shared/trajectory/messages';

/**
 * Exact deduplication key of a conversation: sha256 of the canonical JSON (keys sorted) of its
 * messages and tools after normalization. Normalized: text fields trimmed, tool-call arguments
 * parsed (so `{"a":1}` and `{ "a": 1 }` are one call; arguments that are not JSON are compared
 * as trimmed text), tool-call ids left out (they are random per episode and no chat template that
 * renders them makes them part of what the model learns to say). Only the key is normalized; the
 * sample keeps the conversation exactly as recorded.
 */
export function conversationKey(
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[],
  /** canonicalJson(tools), when the caller already has it (a part sees a few distinct tool lists). */
  canonicalTools = canonicalJson(tools),
): string {
  const normalized = messages.map((message) => {
    switch (message.role) {
      case 'system':
      case 'user':
        return { role: message.role, content: message.content.trim() };
      case 'tool':
        return { role: 'tool', content: message.content.trim() };
      case 'assistant':
        return {
          role: 'assistant',
          content: message.content?.trim() ?? '',
          ...(message.reasoning_content !== undefined ? { reasoning: message.reasoning_content.trim() } : {}),
          calls: (message.tool_calls ?? []).map((call) => ({
            name: call.function.name.trim(),
            arguments: parsedArguments(call.function.arguments),
          })),
        };
    }
  });
  // canonicalJson({ messages, tools }) written out (keys sorted: messages, tools), so the tools'
  // canonical text can be reused.
  return sha256Hex(`{"messages":${canonicalJson(normalized)},"tools":${canonicalTools}}`);
}

function parsedArguments(raw: string): unknown {
  try {
    return { json: JSON.parse(raw) as unknown };
  } catch {
    return { text: raw.trim() };
  }
}
