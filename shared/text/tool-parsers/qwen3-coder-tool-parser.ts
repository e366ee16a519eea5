import type { ToolSpec } from '../../trajectory/messages';
import { parseJsonKeepingFloats } from '../python-values';
import {
  isPlainObject,
  parseTaggedCalls,
  writeArguments,
  type TaggedCallBlock,
  type ToolCallParseOptions,
  type ToolCallParser,
} from './tool-call-parser';

const open = '<tool_call>';
const close = '</tool_call>';
const functionPrefix = '<function=';
const functionClose = '</function>';
const parameterPrefix = '<parameter=';
const parameterClose = '</parameter>';

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
 * Closing tags count where vLLM counts them, so a value may hold the markup itself (code that
 * writes tool calls): a `</parameter>` ends a value only when the next thing after it is another
 * parameter of the tool, `</function>`, `</tool_call>` or the end; `</function>` and
 * `</tool_call>` close the call only after its parameters. Values are typed by the tool's JSON
 * schema as vLLM types them (typedValue). An output that ends inside a call still gives the call,
 * as vLLM gives it, listed as malformed and truncated; a value that does not fit its type or a
 * parameter without `</parameter>` is listed as malformed beside the call.
 */
export const qwen3CoderToolParser: ToolCallParser = {
  name: 'qwen3_coder',
  startMarkers: [open],
  parse(text, options) {
    return parseTaggedCalls(
      text,
      { open, close, closeAt: (from) => toolCallClose(text, from, options?.tools) },
      options,
      (body, unclosed) => parseFunctionBlock(body, unclosed, options),
    );
  },
};

/** The tool's parameter names, when its schema lists properties (vLLM's find_tool_properties). */
function parameterNames(tools: readonly ToolSpec[] | undefined, name: string): Set<string> | undefined {
  const properties = propertiesOf(tools, name);
  return properties && Object.keys(properties).length > 0 ? new Set(Object.keys(properties)) : undefined;
}

function propertiesOf(tools: readonly ToolSpec[] | undefined, name: string): Record<string, unknown> | undefined {
  const schema = tools?.find((tool) => tool.function.name === name)?.function.parameters;
  return isPlainObject(schema?.properties) ? schema.properties : undefined;
}

/** The next `<parameter=` at a line start (the text's start or after a newline), with a name in `names` when given. */
function parameterStart(text: string, from: number, names?: ReadonlySet<string>): number {
  for (let index = text.indexOf(parameterPrefix, from); index >= 0; index = text.indexOf(parameterPrefix, index + 1)) {
    if (index > 0 && text[index - 1] !== '\n') continue;
    if (names === undefined) return index;
    const nameEnd = text.indexOf('>', index + parameterPrefix.length);
    if (nameEnd >= 0 && names.has(text.slice(index + parameterPrefix.length, nameEnd))) return index;
  }
  return -1;
}

/**
 * Where a value's `</parameter>` is: the first one, not paired with a nested `<parameter=` at a
 * line start, followed by another parameter of the tool (any parameter without a schema),
 * `</function>`, `</tool_call>`, or (unless `needsNext`) the end. -1 when there is none.
 */
function parameterEnd(value: string, names: ReadonlySet<string> | undefined, needsNext: boolean): number {
  let depth = 0;
  let position = 0;
  for (;;) {
    const nextOpen = parameterStart(value, position);
    const nextClose = value.indexOf(parameterClose, position);
    if (nextClose < 0) return -1;
    if (nextOpen >= 0 && nextOpen < nextClose) {
      depth++;
      position = nextOpen + parameterPrefix.length;
      continue;
    }
    position = nextClose + parameterClose.length;
    if (depth > 0) {
      depth--;
      continue;
    }
    const after = value.slice(position).trimStart();
    const nextParameter =
      after.startsWith(parameterPrefix) && (names === undefined || parameterStart(after, 0, names) === 0);
    if ((after === '' && !needsNext) || nextParameter || after.startsWith(functionClose) || after.startsWith(close))
      return nextClose;
  }
}

/** The first `</function>` followed only by whitespace before `</tool_call>` or the end; -1 when none. */
function looseFunctionEnd(text: string): number {
  for (let index = text.indexOf(functionClose); index >= 0; index = text.indexOf(functionClose, index + 1)) {
    const after = text.slice(index + functionClose.length).trimStart();
    if (after === '' || after.startsWith(close)) return index;
  }
  return -1;
}

/**
 * Where the `</function>` of a function body (the text after `<function=NAME>`) is, walking its
 * parameters so that markup inside values is stepped over; a parameter without `</parameter>`
 * ends at the next parameter of the tool not seen yet. -1 when the body is incomplete.
 */
function functionEnd(body: string, names: ReadonlySet<string> | undefined): number {
  const seen = new Set<string>();
  let position = 0;
  for (;;) {
    while (position < body.length && ' \t\n\r'.includes(body[position])) position++;
    if (position >= body.length) return -1;
    if (body.startsWith(functionClose, position)) return position;
    if (!body.startsWith(parameterPrefix, position)) {
      const rest = looseFunctionEnd(body.slice(position));
      return rest < 0 ? -1 : position + rest;
    }
    const nameEnd = body.indexOf('>', position + parameterPrefix.length);
    if (nameEnd < 0) return -1;
    const name = body.slice(position + parameterPrefix.length, nameEnd);
    const valueStart = body[nameEnd + 1] === '\n' ? nameEnd + 2 : nameEnd + 1;
    const end = parameterEnd(body.slice(valueStart), names, true);
    if (end >= 0) position = valueStart + end + parameterClose.length;
    else {
      const unseen = names && new Set([...names].filter((known) => !seen.has(known) && known !== name));
      const implicit = parameterStart(body.slice(valueStart), 0, unseen);
      if (implicit < 0) return -1;
      position = valueStart + implicit;
    }
    seen.add(name);
  }
}

/**
 * Where the `</tool_call>` of the call opened before `from` is: after its function's structural
 * end when the function is complete; else the first one followed by another call or the end;
 * else the first one. -1 when the output ends inside the call.
 */
function toolCallClose(text: string, from: number, tools: readonly ToolSpec[] | undefined): number {
  const functionOpen = text.indexOf(functionPrefix, from);
  const nameEnd = functionOpen < 0 ? -1 : text.indexOf('>', functionOpen + functionPrefix.length);
  if (nameEnd >= 0) {
    const names = parameterNames(tools, text.slice(functionOpen + functionPrefix.length, nameEnd));
    const end = functionEnd(text.slice(nameEnd + 1), names);
    if (end >= 0) {
      const after = nameEnd + 1 + end + functionClose.length;
      const gap = /^\s*/.exec(text.slice(after))![0].length;
      if (text.startsWith(close, after + gap)) return after + gap;
    }
  }
  for (let index = text.indexOf(close, from); index >= 0; index = text.indexOf(close, index + 1)) {
    const after = text.slice(index + close.length).trimStart();
    if (after === '' || after.startsWith(open)) return index;
  }
  return text.indexOf(close, from);
}

/** vLLM refuses names with template or markup characters (`<function={{ name }}>`): not a call. */
function isFunctionName(name: string): boolean {
  return name !== '' && !/[{}<>"'\s]/.test(name);
}

function parseFunctionBlock(
  body: string,
  unclosed: boolean,
  options: ToolCallParseOptions | undefined,
): TaggedCallBlock {
  const tools = options?.tools;
  const functionOpen = body.indexOf(functionPrefix);
  if (functionOpen < 0) {
    return unclosed
      ? { error: `the output ends inside a tool call before <function=NAME>`, truncated: true }
      : { error: 'tool call has no <function=NAME> block', truncated: false };
  }
  const nameEnd = body.indexOf('>', functionOpen + functionPrefix.length);
  if (nameEnd < 0) {
    return unclosed
      ? { error: 'the output ends inside a tool call before its function name ends', truncated: true }
      : { error: 'tool call has no ">" after <function=', truncated: false };
  }
  const name = body.slice(functionOpen + functionPrefix.length, nameEnd);
  if (!isFunctionName(name))
    return { error: `tool call has no function name but ${JSON.stringify(name.slice(0, 80))}`, truncated: false };
  const names = parameterNames(tools, name);
  const properties = propertiesOf(tools, name);
  const rest = body.slice(nameEnd + 1);
  let end = functionEnd(rest, names);
  if (end < 0) end = looseFunctionEnd(rest);
  const inner = end < 0 ? rest : rest.slice(0, end);
  const problems: Array<{ reason: string; truncated: boolean }> = [];
  if (unclosed) {
    const what = end < 0 ? `no ${functionClose}` : `no ${close}`;
    problems.push({
      reason: `the output ends inside tool call "${name}" (${what}); parsed as vLLM parses it`,
      truncated: true,
    });
  } else if (end < 0) problems.push({ reason: `tool call "${name}" has no ${functionClose}`, truncated: false });
  const argumentsObject: Record<string, unknown> = {};
  let position = 0;
  for (;;) {
    const start = parameterStart(inner, position);
    if (start < 0) break;
    const parameterNameEnd = inner.indexOf('>', start + parameterPrefix.length);
    if (parameterNameEnd < 0) break;
    const parameter = inner.slice(start + parameterPrefix.length, parameterNameEnd);
    const valueText = inner.slice(parameterNameEnd + 1);
    const valueEnd = parameterEnd(valueText, names, false);
    let value: string;
    if (valueEnd >= 0) {
      value = valueText.slice(0, valueEnd);
      position = parameterNameEnd + 1 + valueEnd + parameterClose.length;
    } else {
      // No </parameter> that closes it: the next parameter of the tool ends it, else the function's end.
      const next = parameterStart(valueText, 0, names);
      value = next >= 0 ? valueText.slice(0, next) : valueText;
      position = next >= 0 ? parameterNameEnd + 1 + next : inner.length;
      if (!unclosed)
        problems.push({ reason: `parameter "${parameter}" of "${name}" has no ${parameterClose}`, truncated: false });
    }
    const typed = typedValue(stripOneNewline(value), properties, parameter);
    if (typed.problem)
      problems.push({ reason: `parameter "${parameter}" of "${name}": ${typed.problem}`, truncated: false });
    Object.defineProperty(argumentsObject, parameter, {
      value: typed.value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  // json.dumps as vLLM writes the arguments (floats keep `.0`; spacing as options.argumentsSpacing says).
  return { call: { name, arguments: writeArguments(argumentsObject, options) }, problems };
}

/** The template writes values as `>\nvalue\n<`: one newline on each side belongs to the markup. */
function stripOneNewline(value: string): string {
  return value.replace(/^\n/, '').replace(/\n$/, '');
}

/** A parameter schema's type as vLLM reads it, and whether it admits null. */
function schemaType(schema: unknown): { type: string; nullable: boolean } {
  if (!isPlainObject(schema)) return { type: 'string', nullable: false };
  if ('type' in schema) {
    const type = schema.type;
    // ["integer", "null"] (vLLM reads the list's Python text, typed by nothing): the first non-null type.
    if (Array.isArray(type)) {
      const first = type.find((entry) => typeof entry === 'string' && entry.toLowerCase() !== 'null') as
        string | undefined;
      return { type: (first ?? 'null').trim().toLowerCase(), nullable: type.includes('null') };
    }
    const text = String(type).trim().toLowerCase();
    return { type: text, nullable: text === 'null' };
  }
  if (Array.isArray(schema.anyOf)) {
    let type: string | undefined;
    let nullable = false;
    for (const option of schema.anyOf as unknown[]) {
      if (!isPlainObject(option) || !('type' in option)) continue;
      const text = String(option.type).trim().toLowerCase();
      if (text === 'null') nullable = true;
      else type ??= text;
    }
    return { type: type ?? 'string', nullable };
  }
  // No type (a description only, an enum): a string, as vLLM reads it.
  return { type: 'string', nullable: false };
}

const pythonInteger = /^\s*[+-]?\d+(?:_\d+)*\s*$/;
const pythonFloat = /^\s*[+-]?(?:(?:\d+(?:_\d+)*)?\.?\d+(?:_\d+)*(?:e[+-]?\d+)?|\d+\.|inf|infinity|nan)\s*$/i;

/**
 * A parameter's text typed by its schema, vLLM's qwen3_coder conventions: a parameter the schema
 * does not list, or one without a type, is text; a type that admits null (`"null"`, an `anyOf`
 * with null) reads `null`/`None` as null; string types keep the text (`null` included); other
 * types read `null`/`None` as null; integers parse as integers; numbers as numbers (integral
 * values as integers); booleans from `true`/`false` (anything else is false, as vLLM has it);
 * objects and arrays as JSON, then as a Python literal; other types as a Python literal. A value
 * that does not fit is listed as a `problem` (vLLM only logs it).
 */
export function typedValue(
  text: string,
  properties: Record<string, unknown> | undefined,
  parameter: string,
): { value: unknown; problem?: string } {
  if (!properties || !Object.prototype.hasOwnProperty.call(properties, parameter)) return { value: text };
  const { type, nullable } = schemaType(properties[parameter]);
  const isNull = ['null', 'none'].includes(text.toLowerCase());
  if (nullable && isNull) return { value: null };
  if (['string', 'str', 'text', 'varchar', 'char', 'enum'].includes(type)) return { value: text };
  if (isNull) return { value: null };
  if (['int', 'uint', 'long', 'short', 'unsigned'].some((prefix) => type.startsWith(prefix))) {
    return pythonInteger.test(text)
      ? { value: Number.parseInt(text.replace(/_/g, ''), 10) }
      : { value: text, problem: `"${text}" is not an integer` };
  }
  if (type.startsWith('num') || type.startsWith('float')) {
    const number = Number(text.trim().replace(/_/g, ''));
    if (!pythonFloat.test(text) || !Number.isFinite(number))
      return { value: text, problem: `"${text}" is not a number` };
    return { value: number };
  }
  if (['boolean', 'bool', 'binary'].includes(type)) {
    const lower = text.toLowerCase();
    if (lower === 'true' || lower === 'false') return { value: lower === 'true' };
    return { value: false, problem: `"${text}" is not true or false (read as false, as vLLM reads it)` };
  }
  const container = ['object', 'array', 'arr'].includes(type) || type.startsWith('dict') || type.startsWith('list');
  if (container) {
    try {
      // Floats stay floats (`[99.0]`), as vLLM's json.loads and json.dumps keep them.
      return { value: parseJsonKeepingFloats(text) };
    } catch {
      // a Python literal below
    }
  }
  const literal = pythonLiteral(text);
  if (literal.ok) return { value: literal.value };
  return container
    ? { value: text, problem: `"${text.slice(0, 80)}" is not valid JSON for a ${type} parameter` }
    : { value: text };
}

/**
 * The Python literals vLLM's ast.literal_eval fallback meets in practice: True/False/None, numbers,
 * quoted strings, and JSON-shaped lists and dicts (with Python's constants). Not a Python parser:
 * anything else is not a literal here.
 */
function pythonLiteral(text: string): { ok: true; value: unknown } | { ok: false } {
  const trimmed = text.replace(/^[ \t]+/, '');
  // JSON's own constants are not Python's.
  if (/^(?:true|false|null)$/.test(trimmed)) return { ok: false };
  const constants: Record<string, unknown> = { True: true, False: false, None: null };
  if (Object.prototype.hasOwnProperty.call(constants, trimmed)) return { ok: true, value: constants[trimmed] };
  if (/^'(?:[^'\\\n]|\\.)*'$/.test(trimmed)) {
    const inner = trimmed.slice(1, -1).replace(/\\'/g, "'").replace(/"/g, '\\"');
    try {
      return { ok: true, value: JSON.parse(`"${inner}"`) as unknown };
    } catch {
      return { ok: false };
    }
  }
  const jsonShaped = trimmed.replace(/\b(True|False|None)\b(?=(?:[^"]*"[^"]*")*[^"]*$)/g, (word) =>
    word === 'True' ? 'true' : word === 'False' ? 'false' : 'null',
  );
  try {
    const value = JSON.parse(jsonShaped) as unknown;
    return typeof value === 'string' && !trimmed.startsWith('"') ? { ok: false } : { ok: true, value };
  } catch {
    return { ok: false };
  }
}
