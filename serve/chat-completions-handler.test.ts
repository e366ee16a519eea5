import { hermesToolParser, qwen3CoderToolParser } from '../shared/text/tool-parsers';
import type { ToolSpec } from '../shared/trajectory/messages';
import { assistantOutput } from './chat-completions-handler';

const tools: ToolSpec[] = [
  {
    type: 'function',
    function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' } } } },
  },
];

describe('assistantOutput (the chat message of a generated text)', () => {
  it('a call that ends the turn gives tool_calls and finish_reason tool_calls', () => {
    const output = assistantOutput(
      'Adding.\n<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n</function>\n</tool_call>',
      'stop',
      qwen3CoderToolParser,
      tools,
    );
    expect(output.finishReason).toBe('tool_calls');
    // As vLLM answers: the text before the call as generated, the arguments as its json.dumps writes them.
    expect(output.parsed.content).toBe('Adding.\n');
    expect(output.parsed.toolCalls.map((call) => [call.function.name, call.function.arguments])).toEqual([
      ['add', '{"a": 2}'],
    ]);
    expect(output.hatFields).toEqual({});
  });

  it('a call cut by the length limit keeps finish_reason length and is listed as malformed, its text kept as content', () => {
    const text = '<tool_call>\n{"name": "add", "argu';
    const output = assistantOutput(text, 'length', hermesToolParser, tools);
    expect(output.finishReason).toBe('length');
    expect(output.parsed.toolCalls).toEqual([]);
    expect(output.parsed.content).toBe(text);
    expect(output.hatFields.hat_malformed_tool_calls).toEqual([expect.objectContaining({ text, truncated: true })]);
  });

  it('without a parser (no tools, tool_choice none, or an unknown template format) the text is the content', () => {
    const text = '<tool_call>{"name": "add", "arguments": {}}</tool_call>';
    expect(assistantOutput(text, 'stop', null, tools)).toEqual({
      parsed: { content: text, toolCalls: [], malformed: [] },
      finishReason: 'stop',
      hatFields: {},
    });
  });
});
