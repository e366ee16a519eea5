import {
  argumentsJson,
  contentAround,
  isPlainObject,
  parseTaggedCalls,
  writeArguments,
  type ToolCallParseOptions,
  type ToolCallParser,
} from './tool-call-parser';
import { parseJsonKeepingFloats } from '../python-values';

const open = '<tool_call>';
const close = '</tool_call>';

/**
 * Qwen2.5 / Qwen3 / Hermes: each call is a JSON object `{"name": …, "arguments": {…}}` between
 * `<tool_call>` and `</tool_call>` (vLLM's `hermes` parser). A block whose JSON does not parse,
 * lacks a name or has non-object arguments is malformed; then, as vLLM has it, the reply has no
 * calls at all and its whole text is the content. An output that ends inside a block whose JSON
 * is complete gives the call (vLLM reads to the end), listed as truncated; one that ends inside
 * the JSON is a truncated malformed call.
 */
export const hermesToolParser: ToolCallParser = {
  name: 'hermes',
  startMarkers: [open],
  parse(text, options) {
    let blockFailed = false;
    const result = parseTaggedCalls(text, { open, close }, options, (body, unclosed) => {
      const call = parseJsonCall(body.trim(), 'arguments', options);
      blockFailed ||= 'error' in call;
      if (unclosed) {
        const reason = `the output ends inside a tool call: no ${close} after ${open}`;
        return 'error' in call ? { error: reason, truncated: true } : { call, problems: [{ reason, truncated: true }] };
      }
      return 'error' in call ? { error: call.error, truncated: false } : { call };
    });
    // vLLM drops every call of a reply when one block fails: the reply is then plain content.
    if (blockFailed && result.toolCalls.length > 0)
      return { content: contentAround(text, [text], 0), toolCalls: [], malformed: result.malformed };
    return result;
  },
};

/** `{"name", "arguments"}` (or `parameters`) JSON of one call. */
export function parseJsonCall(
  body: string,
  argumentsField: 'arguments' | 'parameters' = 'arguments',
  options?: ToolCallParseOptions,
): { name: string; arguments: string } | { error: string } {
  let value: unknown;
  try {
    value = parseJsonKeepingFloats(body);
  } catch (error) {
    return { error: `tool call is not valid JSON: ${(error as Error).message}` };
  }
  if (!isPlainObject(value)) return { error: 'tool call JSON must be an object with "name" and "arguments"' };
  if (options?.arguments !== 'checked') {
    // vLLM: the name must be a string and the arguments field there (Hermes reads only "arguments",
    // Llama "arguments" else "parameters"); whatever JSON it holds is json.dumps-ed back.
    if (typeof value.name !== 'string') return { error: 'tool call has no "name" string' };
    const field = argumentsField === 'arguments' ? ['arguments'] : ['arguments', 'parameters'];
    const present = field.find((name) => Object.hasOwn(value, name));
    if (present === undefined)
      return { error: `tool call "${value.name}" has no "${field.join('" or "')}" (vLLM reads none then)` };
    return { name: value.name, arguments: writeArguments(value[present], options) };
  }
  if (typeof value.name !== 'string' || value.name === '') return { error: 'tool call has no "name" string' };
  const other = argumentsField === 'arguments' ? 'parameters' : 'arguments';
  const args = argumentsJson(value[argumentsField] ?? value[other], options);
  if ('error' in args) return { error: `tool call "${value.name}": ${args.error}` };
  return { name: value.name, arguments: args.json };
}
