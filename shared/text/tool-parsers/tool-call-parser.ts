import { shortHash } from '../../hash/hash';
import type { ToolCall, ToolSpec } from '../../trajectory/messages';
import { parseJsonKeepingFloats, pythonJson } from '../python-values';

/** Output the parser could not turn into a tool call: kept verbatim (it stays in `content` too) with why. */
export interface MalformedToolCall {
  /** The raw text of the attempted call. */
  text: string;
  reason: string;
  /** The output ended inside the call (length limit): a partial call, not a wrong one. */
  truncated: boolean;
}

/** A model output split into text and tool calls. */
export interface ToolCallParseResult {
  /** Everything that did not become a tool call (malformed calls included, verbatim); null when empty. See contentAround. */
  content: string | null;
  /** OpenAI shape; `arguments` is a JSON string of an object. */
  toolCalls: ToolCall[];
  malformed: MalformedToolCall[];
}

export interface ToolCallParseOptions {
  /** The request's tools: the XML format types parameter values by their JSON schema. */
  tools?: readonly ToolSpec[];
  /** Tool call ids are `<prefix><index>`. Default: `call_<hash of the text>_`, stable for the same output. */
  idPrefix?: string;
  /**
   * What `content` is beside tool calls. `vllm` (default), as vLLM's parsers return it: the text
   * before the first call, exactly as generated; text after or between calls, which vLLM leaves
   * out, is listed as malformed (never dropped silently). `around-calls`, stricter for training
   * data (docs/byte-exact.md): every text around the calls, joined and trimmed, so a reply's words
   * after its calls stay in the conversation.
   */
  content?: 'vllm' | 'around-calls';
  /**
   * How the arguments JSON is written. `vllm` (default): json.dumps as vLLM's parsers call it
   * (`{"city": "Paris"}`, non-ASCII kept); `compact`: without spaces (`{"city":"Paris"}`), the
   * form this project wrote before #34.
   */
  argumentsSpacing?: 'vllm' | 'compact';
  /**
   * Which JSON calls (Hermes, Llama) count. `vllm` (default): as vLLM reads them, a call needs its
   * arguments field (`arguments`; Llama also `parameters`) and any JSON value there is written
   * back with json.dumps (a string stays a JSON string, a list a list). `checked`, stricter for
   * training data: the arguments must be a JSON object (a string holding one is read as it), a
   * missing field is `{}`, either field name counts, and the name must not be empty.
   */
  arguments?: 'vllm' | 'checked';
}

/** One template family's tool-call format. */
export interface ToolCallParser {
  /** vLLM's `--tool-call-parser` name of the same format. */
  readonly name: string;
  /** Text that opens a tool call in this format; streaming holds back content from the first one on. */
  readonly startMarkers: readonly string[];
  /** Calls only count when the reply starts with a marker (Llama JSON); otherwise a marker anywhere opens one. */
  readonly callsOnlyAtStart?: boolean;
  parse(text: string, options?: ToolCallParseOptions): ToolCallParseResult;
}

/** The id of the index-th call of an output. */
export function toolCallId(text: string, index: number, options: ToolCallParseOptions | undefined): string {
  return `${options?.idPrefix ?? `call_${shortHash(text, 10)}_`}${index}`;
}

/**
 * The content of an output: with tool calls, the text around them joined and trimmed (the
 * newlines that separate calls are markup); without any, the text exactly as generated, so
 * streamed and non-streamed replies agree. Whitespace-only content is none.
 */
export function contentAround(text: string, pieces: string[], toolCallCount: number): string | null {
  if (toolCallCount === 0) return text.trim() === '' ? null : text;
  const content = pieces.join('').trim();
  return content === '' ? null : content;
}

/**
 * The content beside parsed calls under `options.content` (see ToolCallParseOptions), and the
 * malformed entries for the text vLLM leaves out: `before` is the text before the first call,
 * `after` the texts after it that are not part of a call (failed blocks are listed already).
 */
export function contentBesideCalls(
  text: string,
  pieces: { before: string; after: string[]; all: string[] },
  toolCallCount: number,
  options: ToolCallParseOptions | undefined,
): { content: string | null; dropped: MalformedToolCall[] } {
  if (toolCallCount === 0 || options?.content === 'around-calls')
    return { content: contentAround(text, pieces.all, toolCallCount), dropped: [] };
  const dropped = pieces.after
    .filter((piece) => piece.trim() !== '')
    .map((piece) => ({
      text: piece,
      reason: 'text after a tool call: vLLM leaves it out of the content (content: "around-calls" keeps it)',
      truncated: false,
    }));
  return { content: pieces.before === '' ? null : pieces.before, dropped };
}

/** What a format's block parser makes of one `<open>…<close>` block. */
export type TaggedCallBlock =
  | { call: ToolCall['function']; problems?: ReadonlyArray<{ reason: string; truncated: boolean }> }
  | { error: string; truncated: boolean };

/**
 * Splits an output on `open`…`close` blocks and parses each with `parseBlock` (`unclosed`: the
 * output ended inside the block). Text around the blocks, and blocks that fail, stay in the
 * content; a block's problems beside a call are listed as malformed with its text. `closeAt`:
 * where the block whose body starts at `from` closes (the index of its `close`, -1: unclosed),
 * for formats whose bodies may contain the close tag; default the first `close` after it.
 */
export function parseTaggedCalls(
  text: string,
  tags: { open: string; close: string; closeAt?: (from: number) => number },
  options: ToolCallParseOptions | undefined,
  parseBlock: (body: string, unclosed: boolean) => TaggedCallBlock,
): ToolCallParseResult {
  const { open, close } = tags;
  const pieces: string[] = [];
  const toolCalls: ToolCall[] = [];
  const malformed: MalformedToolCall[] = [];
  const firstOpen = text.indexOf(open);
  // Plain text after the first call's start (vLLM's content is the text before it).
  const after: string[] = [];
  let cursor = 0;
  for (;;) {
    const start = text.indexOf(open, cursor);
    if (start < 0) {
      pieces.push(text.slice(cursor));
      if (cursor > firstOpen) after.push(text.slice(cursor));
      break;
    }
    pieces.push(text.slice(cursor, start));
    if (cursor > firstOpen) after.push(text.slice(cursor, start));
    const end = tags.closeAt ? tags.closeAt(start + open.length) : text.indexOf(close, start + open.length);
    const raw = end < 0 ? text.slice(start) : text.slice(start, end + close.length);
    const parsed = parseBlock(
      end < 0 ? text.slice(start + open.length) : text.slice(start + open.length, end),
      end < 0,
    );
    if ('error' in parsed) {
      malformed.push({ text: raw, reason: parsed.error, truncated: parsed.truncated });
      pieces.push(raw);
    } else {
      toolCalls.push({ id: toolCallId(text, toolCalls.length, options), type: 'function', function: parsed.call });
      for (const problem of parsed.problems ?? []) malformed.push({ text: raw, ...problem });
    }
    if (end < 0) break;
    cursor = end + close.length;
  }
  const { content, dropped } = contentBesideCalls(
    text,
    { before: firstOpen < 0 ? text : text.slice(0, firstOpen), after, all: pieces },
    toolCalls.length,
    options,
  );
  return { content, toolCalls, malformed: [...malformed, ...dropped] };
}

/** Arguments JSON written as `options.argumentsSpacing` says (json.dumps' spacing by default, as vLLM writes it). */
export function writeArguments(value: unknown, options: ToolCallParseOptions | undefined): string {
  return pythonJson(value, options?.argumentsSpacing === 'compact' ? { separators: [',', ':'] } : {});
}

/** An object's JSON text, or why the value cannot be tool-call arguments. */
export function argumentsJson(value: unknown, options?: ToolCallParseOptions): { json: string } | { error: string } {
  if (typeof value === 'string') {
    // Some models write the arguments as a JSON string of the object.
    try {
      const parsed: unknown = parseJsonKeepingFloats(value);
      if (isPlainObject(parsed)) return { json: value };
    } catch {
      // reported below
    }
    return { error: 'arguments is a string that does not hold a JSON object' };
  }
  if (value === undefined) return { json: '{}' };
  if (!isPlainObject(value))
    return {
      error: `arguments must be a JSON object, got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`,
    };
  // Floats as the model wrote them (`99.0`): vLLM's json.dumps keeps them too.
  return { json: writeArguments(value, options) };
}

/** A JSON object (not an array, not a PythonFloat). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}
