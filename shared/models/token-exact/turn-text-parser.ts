import type { ChatTokenizer } from '../../text/chat-tokenizer';
import { selectToolCallParser } from '../../text/tool-parsers/select-tool-call-parser';
import { plainTextParser, type TurnTextParser } from './token-exact-episode';

/** A conversation with one tool definition and one tool call: its rendering shows the template's tool-call format. */
const probeTools = [
  {
    type: 'function' as const,
    function: {
      name: 'probe_tool',
      description: 'probe',
      parameters: { type: 'object', properties: { item: { type: 'string' } } },
    },
  },
];
const probeMessages = [
  { role: 'user' as const, content: 'probe' },
  {
    role: 'assistant' as const,
    content: '',
    tool_calls: [
      { id: 'call-0', type: 'function' as const, function: { name: 'probe_tool', arguments: { item: 'mug' } } },
    ],
  },
  { role: 'tool' as const, content: 'ok', tool_call_id: 'call-0' },
];

/**
 * The tool-call parser of a model's chat template (`auto`: detected from how the template renders
 * a tool definition and a tool call, so no template text is needed), or one named as vLLM's
 * `--tool-call-parser`. Templates without a known format get the plain-text parser (no tool calls).
 */
export function turnTextParserFor(
  tokenizer: ChatTokenizer,
  nameOrAuto = 'auto',
): { name: string; parse: TurnTextParser } {
  let rendering = '';
  try {
    rendering = tokenizer.render(probeMessages, { tools: probeTools, now: new Date(0) });
  } catch {
    // A template that refuses tools or tool calls teaches no format.
  }
  const parser = selectToolCallParser(nameOrAuto, rendering);
  if (!parser) return { name: 'none', parse: plainTextParser };
  return { name: parser.name, parse: (text, tools) => parser.parse(text, { tools }) };
}
