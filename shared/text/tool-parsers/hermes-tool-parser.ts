import { argumentsJson, isPlainObject, parseTaggedCalls, type ToolCallParser } from './tool-call-parser';

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
    return parseTaggedCalls(text, { open, close }, options, (body, unclosed) => {
      if (unclosed) return { error: `the output ends inside a tool call: no ${close} after ${open}`, truncated: true };
      const call = parseJsonCall(body.trim());
      return 'error' in call ? { error: call.error, truncated: false } : { call };
    });
  },
};

/** `{"name", "arguments"}` (or `parameters`) JSON of one call. */
export function parseJsonCall(
  body: string,
  argumentsField: 'arguments' | 'parameters' = 'arguments',
): { name: string; arguments: string } | { error: string } {
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
