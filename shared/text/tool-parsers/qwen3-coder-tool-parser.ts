import type { ToolSpec } from '../../trajectory/messages';
import { isPlainObject, parseTaggedCalls, type ToolCallParser } from './tool-call-parser';

const open = '<tool_call>';
const close = '</tool_call>';

/**
 * Qwen3-Coder / Qwen3.5 XML calls (vLLM's `qwen3_coder` parser):
 *
 *     <tool_call>
 *     <function=NAME>
 *     <parameter=P>
 *     value
 *     </parameter>
 *     </function>
 *     </tool_call>
 *
 * Values are text; each is typed by the tool's JSON schema for that parameter as vLLM does:
 * `null` is null; string types stay text; integer types parse as integers, number types as
 * numbers (integral values as integers); booleans from `true`/`false`; anything else (object,
 * array, unknown) as JSON when it parses. A value that does not fit its type stays text (vLLM
 * does the same and warns; here it is also listed as malformed, the call is still returned).
 * Missing closing tags mean the output was cut inside the call: malformed, truncated.
 */
export const qwen3CoderToolParser: ToolCallParser = {
  name: 'qwen3_coder',
  startMarkers: [open],
  parse(text, options) {
    return parseTaggedCalls(text, { open, close }, options, (body, unclosed) => {
      const parsed = parseFunctionBlock(body, unclosed, options?.tools);
      return 'error' in parsed
        ? parsed
        : { call: { name: parsed.name, arguments: JSON.stringify(parsed.arguments) }, problems: parsed.problems };
    });
  },
};

type FunctionBlock =
  { name: string; arguments: Record<string, unknown>; problems: string[] } | { error: string; truncated: boolean };

function parseFunctionBlock(body: string, unclosed: boolean, tools: readonly ToolSpec[] | undefined): FunctionBlock {
  const functionMatch = /<function=([^>\n]*)>/.exec(body);
  if (!functionMatch) {
    return unclosed
      ? { error: `the output ends inside a tool call before <function=NAME>`, truncated: true }
      : { error: 'tool call has no <function=NAME> block', truncated: false };
  }
  const name = (functionMatch[1] ?? '').trim();
  if (name === '') return { error: 'tool call has an empty function name', truncated: false };
  const functionEnd = body.indexOf('</function>', functionMatch.index);
  if (functionEnd < 0) return { error: `the output ends inside tool call "${name}": no </function>`, truncated: true };
  if (unclosed) return { error: `the output ends inside tool call "${name}": no ${close}`, truncated: true };
  const inner = body.slice(functionMatch.index + functionMatch[0].length, functionEnd);
  const schema = tools?.find((tool) => tool.function.name === name)?.function.parameters;
  const properties = isPlainObject(schema?.properties) ? schema.properties : undefined;
  const argumentsObject: Record<string, unknown> = {};
  const problems: string[] = [];
  const parameterPattern = /<parameter=([^>\n]*)>/g;
  let match: RegExpExecArray | null;
  while ((match = parameterPattern.exec(inner))) {
    const parameter = (match[1] ?? '').trim();
    const valueStart = match.index + match[0].length;
    const closeAt = inner.indexOf('</parameter>', valueStart);
    // vLLM also ends a value at the next <parameter= when </parameter> is missing.
    const nextOpen = inner.indexOf('<parameter=', valueStart);
    if (closeAt < 0 && nextOpen < 0)
      return { error: `parameter "${parameter}" of "${name}" has no </parameter>`, truncated: false };
    const valueEnd = closeAt < 0 || (nextOpen >= 0 && nextOpen < closeAt) ? nextOpen : closeAt;
    const rawValue = stripOneNewline(inner.slice(valueStart, valueEnd));
    const typed = typedValue(rawValue, properties?.[parameter]);
    if (typed.problem) problems.push(`parameter "${parameter}" of "${name}": ${typed.problem}`);
    argumentsObject[parameter] = typed.value;
    parameterPattern.lastIndex = valueEnd;
  }
  return { name, arguments: argumentsObject, problems };
}

/** The template writes values as `>\nvalue\n<`: one newline on each side belongs to the markup. */
function stripOneNewline(value: string): string {
  return value.replace(/^\n/, '').replace(/\n$/, '');
}

function schemaType(schema: unknown): string | undefined {
  if (!isPlainObject(schema)) return undefined;
  const type = schema.type;
  if (typeof type === 'string') return type.toLowerCase();
  // ["integer", "null"]: the first non-null type.
  if (Array.isArray(type))
    return (type.find((entry) => typeof entry === 'string' && entry !== 'null') as string | undefined)?.toLowerCase();
  if (Array.isArray(schema.enum)) return 'string';
  return undefined;
}

/** A parameter's text typed by its schema, vLLM's qwen3_coder conventions; `problem` when it does not fit. */
export function typedValue(text: string, schema: unknown): { value: unknown; problem?: string } {
  if (text.toLowerCase() === 'null') return { value: null };
  if (schema === undefined) return { value: text };
  const type = schemaType(schema) ?? 'object';
  if (['string', 'str', 'text', 'varchar', 'char', 'enum'].includes(type)) return { value: text };
  if (['int', 'uint', 'long', 'short', 'unsigned'].some((prefix) => type.startsWith(prefix))) {
    const trimmed = text.trim();
    return /^[+-]?\d+$/.test(trimmed)
      ? { value: Number.parseInt(trimmed, 10) }
      : { value: text, problem: `"${text}" is not an integer` };
  }
  if (type.startsWith('num') || type.startsWith('float')) {
    const number = Number(text.trim());
    if (text.trim() === '' || !Number.isFinite(number)) return { value: text, problem: `"${text}" is not a number` };
    return { value: number };
  }
  if (['boolean', 'bool', 'binary'].includes(type)) {
    const lower = text.trim().toLowerCase();
    if (lower === 'true' || lower === 'false') return { value: lower === 'true' };
    return { value: text, problem: `"${text}" is not true or false` };
  }
  try {
    return { value: JSON.parse(text) };
  } catch {
    return { value: text, problem: `"${text.slice(0, 80)}" is not valid JSON for a ${type} parameter` };
  }
}
