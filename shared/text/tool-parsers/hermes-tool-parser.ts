import { argumentsJson, isPlainObject, contentAround, toolCallId, type MalformedToolCall, type ToolCallParser } from './tool-call-parser';
import type { ToolCall } from '../../trajectory/messages';

const open = '<tool_call>';
const close = '</tool_call>';

/**
 * Qwen2.5 / Qwen3 / Hermes: each call is a JSON object `{"name": …, "arguments": {…}}` between
 * `<tool_call>` and `</tool_call>` (vLLM's `hermes` parser). A block whose JSON does not parse,
 * lacks a name or has non-object arguments is malformed; an output that ends inside a block is
 * a truncated (partial) call.
 */
export const hermesToolParser: ToolCallParser = {
  name: 'hermes',
  startMarkers: [open],
  parse(text, options) {
    const pieces: string[] = [];
    const toolCalls: ToolCall[] = [];
    const malformed: MalformedToolCall[] = [];
    let cursor = 0;
    for (;;) {
      const start = text.indexOf(open, cursor);
      if (start < 0) {
        pieces.push(text.slice(cursor));
        break;
      }
      pieces.push(text.slice(cursor, start));
      const end = text.indexOf(close, start + open.length);
      if (end < 0) {
        const raw = text.slice(start);
        malformed.push({ text: raw, reason: `the output ends inside a tool call: no ${close} after ${open}`, truncated: true });
        pieces.push(raw);
        break;
      }
      const raw = text.slice(start, end + close.length);
      const body = text.slice(start + open.length, end).trim();
      const call = parseJsonCall(body);
      if ('error' in call) {
        malformed.push({ text: raw, reason: call.error, truncated: false });
        pieces.push(raw);
      } else {
        toolCalls.push({ id: toolCallId(text, toolCalls.length, options), type: 'function', function: call });
      }
      cursor = end + close.length;
    }
    return { content: contentAround(text, pieces, toolCalls.length), toolCalls, malformed };
  },
};

/** `{"name", "arguments"}` (or `parameters`) JSON of one call. */
export function parseJsonCall(body: string, argumentsField: 'arguments' | 'parameters' = 'arguments'): { name: string; arguments: string } | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    return { error: `tool call is not valid JSON: ${(error as Error).message}` };
  }
  if (!isPlainObject(value)) return { error: 'tool call JSON must be an object with "name" and "arguments"' };
  if (typeof value.name !== 'string' || value.name === '') return { error: 'tool call has no "name" string' };
  const other = argumentsField === 'arguments' ? 'parameters' : 'arguments';
  const args = argumentsJson(value[argumentsField] ?? value[other]);
  if ('error' in args) return { error: `tool call "${value.name}": ${args.error}` };
  return { name: value.name, arguments: args.json };
}
