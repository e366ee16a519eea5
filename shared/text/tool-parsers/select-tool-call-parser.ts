import { BadInputError } from '../../errors';
import { hermesToolParser } from './hermes-tool-parser';
import { llama3JsonToolParser } from './llama3-json-tool-parser';
import { qwen3CoderToolParser } from './qwen3-coder-tool-parser';
import type { ToolCallParser } from './tool-call-parser';

/** Parsers by vLLM's `--tool-call-parser` names (and the template families' names). */
export const toolCallParsers: Record<string, ToolCallParser> = {
  hermes: hermesToolParser,
  qwen3: hermesToolParser,
  qwen3_coder: qwen3CoderToolParser,
  qwen3_xml: qwen3CoderToolParser,
  'qwen3.5': qwen3CoderToolParser,
  llama3_json: llama3JsonToolParser,
};

/**
 * The tool-call format a chat template teaches, from its text: `<function=` … `<parameter=` is
 * the Qwen3-Coder / Qwen3.5 XML format; `<tool_call>` otherwise is Hermes/Qwen3 JSON;
 * `<|python_tag|>` or a `"parameters"` JSON instruction is Llama 3.1 JSON. Undefined: unknown.
 */
export function detectToolCallParser(templateText: string): ToolCallParser | undefined {
  if (templateText.includes('<function=') && templateText.includes('<parameter=')) return qwen3CoderToolParser;
  if (templateText.includes('<tool_call>')) return hermesToolParser;
  if (templateText.includes('<|python_tag|>') || /"parameters"/.test(templateText)) return llama3JsonToolParser;
  return undefined;
}

/**
 * A parser by name, or `auto`: detected from the template (null when the template shows no known
 * format, so tool calls are not parsed). An unknown name is bad input.
 */
export function selectToolCallParser(nameOrAuto: string, templateText: string): ToolCallParser | null {
  if (nameOrAuto === 'auto') return detectToolCallParser(templateText) ?? null;
  const parser = toolCallParsers[nameOrAuto];
  if (!parser)
    throw new BadInputError(
      'TOOL_PARSER_UNKNOWN',
      `tool-call parser "${nameOrAuto}" is unknown; use auto or one of ${Object.keys(toolCallParsers).join(', ')}`,
    );
  return parser;
}
