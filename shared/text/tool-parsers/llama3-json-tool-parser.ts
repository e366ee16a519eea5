import type { ToolCall } from '../../trajectory/messages';
import { parseJsonCall } from './hermes-tool-parser';
import { contentAround, toolCallId, type MalformedToolCall, type ToolCallParser } from './tool-call-parser';

const pythonTag = '<|python_tag|>';

/**
 * Llama 3.1 / 3.2 JSON calls (vLLM's `llama3_json` parser): the whole reply is
 * `{"name": …, "parameters": {…}}` (or `arguments`), optionally after `<|python_tag|>`, several
 * calls separated by `;`. A reply that starts otherwise is plain content. A reply that starts
 * like a call but does not parse is malformed (truncated when the JSON is cut short), and then,
 * as in vLLM, none of its calls count and it is all content; Llama's
 * built-in `<|python_tag|>tool.call(…)` syntax is reported as malformed (not supported).
 */
export const llama3JsonToolParser: ToolCallParser = {
  name: 'llama3_json',
  startMarkers: [pythonTag, '{'],
  callsOnlyAtStart: true,
  parse(text, options) {
    const trimmed = text.trimStart();
    const tagged = trimmed.startsWith(pythonTag);
    const body = (tagged ? trimmed.slice(pythonTag.length) : trimmed).trim();
    if (!tagged && !body.startsWith('{'))
      return { content: contentAround(text, [text], 0), toolCalls: [], malformed: [] };
    if (!body.startsWith('{')) {
      return {
        content: contentAround(text, [text], 0),
        toolCalls: [],
        malformed: [
          {
            text,
            reason: 'built-in tool call syntax (<|python_tag|>tool.call(...)) is not supported; use JSON calls',
            truncated: false,
          },
        ],
      };
    }
    const objects = splitJsonObjects(body);
    const toolCalls: ToolCall[] = [];
    const malformed: MalformedToolCall[] = [];
    const leftover: string[] = [];
    for (const piece of objects) {
      if (piece.unterminated) {
        malformed.push({ text: piece.text, reason: 'the output ends inside a JSON tool call', truncated: true });
        leftover.push(piece.text);
        continue;
      }
      const call = parseJsonCall(piece.text, 'parameters', options);
      if ('error' in call) {
        malformed.push({ text: piece.text, reason: call.error, truncated: false });
        leftover.push(piece.text);
      } else toolCalls.push({ id: toolCallId(text, toolCalls.length, options), type: 'function', function: call });
    }
    // vLLM drops every call of a reply when one of its JSON objects fails: the reply is then plain content.
    if (malformed.length > 0 && toolCalls.length > 0) {
      toolCalls.length = 0;
      leftover.splice(0, leftover.length, text);
    }
    if (objects.trailing.trim() !== '') {
      malformed.push({ text: objects.trailing, reason: 'text after the JSON tool calls', truncated: false });
      leftover.push(objects.trailing);
    }
    return { content: contentAround(text, leftover, toolCalls.length), toolCalls, malformed };
  },
};

/** Top-level JSON objects of `text` separated by `;` or whitespace; an unbalanced last one is unterminated. */
function splitJsonObjects(text: string): Array<{ text: string; unterminated: boolean }> & { trailing: string } {
  const objects: Array<{ text: string; unterminated: boolean }> = [];
  let index = 0;
  let trailing = '';
  while (index < text.length) {
    while (index < text.length && /[\s;]/.test(text[index])) index++;
    if (index >= text.length) break;
    if (text[index] !== '{') {
      trailing = text.slice(index);
      break;
    }
    let depth = 0;
    let inString = false;
    let escaped = false;
    let end = -1;
    for (let position = index; position < text.length; position++) {
      const character = text[position];
      if (inString) {
        if (escaped) escaped = false;
        else if (character === '\\') escaped = true;
        else if (character === '"') inString = false;
      } else if (character === '"') inString = true;
      else if (character === '{') depth++;
      else if (character === '}' && --depth === 0) {
        end = position + 1;
        break;
      }
    }
    if (end < 0) {
      objects.push({ text: text.slice(index), unterminated: true });
      break;
    }
    objects.push({ text: text.slice(index, end), unterminated: false });
    index = end;
  }
  return Object.assign(objects, { trailing });
}
