import {
  hermesToolParser,
  llama3JsonToolParser,
  qwen3CoderToolParser,
  type ToolCallParser,
} from '../shared/text/tool-parsers';
import { ToolCallStreamGate } from './tool-call-stream-gate';

/** Streams `pieces` through a gate, then adds the parsed remainder: what a streaming client assembles. */
function streamed(parser: ToolCallParser, pieces: string[]): { live: string[]; content: string; toolCalls: number } {
  const gate = new ToolCallStreamGate(parser);
  const live = pieces.map((piece) => gate.push(piece));
  const parsed = parser.parse(pieces.join(''));
  return { live, content: live.join('') + gate.remainder(parsed.content), toolCalls: parsed.toolCalls.length };
}

describe('ToolCallStreamGate', () => {
  it('streams text before a Hermes call and holds the call, even when its tag arrives in pieces', () => {
    const result = streamed(hermesToolParser, [
      'Let me',
      ' check.\n<tool',
      '_call>\n{"name": "f", ',
      '"arguments": {}}\n</tool_call>',
    ]);
    expect(result.live).toEqual(['Let me', ' check.\n', '', '']);
    expect(result.content).toBe('Let me check.\n');
    expect(result.toolCalls).toBe(1);
  });

  it('releases a held tail that did not become a tag', () => {
    const result = streamed(hermesToolParser, ['a <', 'b> c']);
    expect(result.live).toEqual(['a ', '<b> c']);
    expect(result.content).toBe('a <b> c');
  });

  it('a reply that ends on a marker prefix still adds up to the whole content', () => {
    const result = streamed(qwen3CoderToolParser, ['Done <tool_']);
    expect(result.live).toEqual(['Done ']);
    expect(result.content).toBe('Done <tool_');
  });

  it('keeps malformed call text in the assembled content', () => {
    // A block without <function=NAME> is no call (a cut-off call is one, as in vLLM).
    const result = streamed(qwen3CoderToolParser, ['Hi\n', '<tool_call>\n{"name": "f"}\n</tool_call>']);
    expect(result.toolCalls).toBe(0);
    expect(result.content).toBe('Hi\n<tool_call>\n{"name": "f"}\n</tool_call>');
  });

  it('Llama JSON: holds a reply that starts with "{", streams one that does not', () => {
    const call = streamed(llama3JsonToolParser, ['  ', '{"name": "f", ', '"parameters": {}}']);
    expect(call.live.join('')).toBe('');
    expect(call.toolCalls).toBe(1);
    const text = streamed(llama3JsonToolParser, ['  ', 'Hello {x}', ' there']);
    expect(text.live).toEqual(['', '  Hello {x}', ' there']);
    expect(text.content).toBe('  Hello {x} there');
  });

  it('without a parser everything streams as it comes', () => {
    const gate = new ToolCallStreamGate(null);
    expect([gate.push('<tool_'), gate.push('call>')]).toEqual(['<tool_', 'call>']);
  });
});
