import { hermesToolParser } from '../../text/tool-parsers';
import type { ToolSpec } from '../../trajectory/messages';
import { assistantReplyOf, splitReasoning } from './onnx-model-client';

const tools: ToolSpec[] = [
  {
    type: 'function',
    function: {
      name: 'quote_final_price',
      parameters: { type: 'object', properties: { item_id: { type: 'string' } }, required: ['item_id'] },
    },
  },
];
const qwen3 = { toolParser: hermesToolParser, thinks: true };

describe('in-process ONNX replies, split as a vLLM server with the template parsers returns them', () => {
  it('turns a Hermes tool call into tool_calls and the <think> block into reasoning, so the agent loop runs the tool', () => {
    const reply = assistantReplyOf(
      '<think>\nprice first\n</think>\n\n<tool_call>\n{"name": "quote_final_price", "arguments": {"item_id": "600896001204"}}\n</tool_call>',
      'stop',
      qwen3,
      tools,
    );
    expect(reply.finishReason).toBe('tool_calls');
    expect(reply.message.reasoning_content).toBe('price first');
    expect(reply.message.content).toBeNull();
    expect(reply.message.tool_calls?.map((call) => [call.function.name, JSON.parse(call.function.arguments)])).toEqual([
      ['quote_final_price', { item_id: '600896001204' }],
    ]);
  });

  it('keeps a plain reply as content (an empty think block dropped), and calls as text when the request has no tools', () => {
    expect(assistantReplyOf('<think>\n\n</think>\n\n宝宝们，到手404元~', 'stop', qwen3, tools)).toEqual({
      message: { role: 'assistant', content: '宝宝们，到手404元~' },
      finishReason: 'stop',
    });
    const text = '<tool_call>\n{"name": "quote_final_price", "arguments": {}}\n</tool_call>';
    expect(assistantReplyOf(text, 'stop', { toolParser: hermesToolParser, thinks: false }, undefined)).toEqual({
      message: { role: 'assistant', content: text },
      finishReason: 'stop',
    });
    expect(splitReasoning('no think block')).toEqual({ content: 'no think block' });
  });
});
