import { invalidArguments, toolSession } from './__fixtures__/sample-conversations';
import { trajectoryToTemplateInput } from './template-input';

describe('trajectoryToTemplateInput', () => {
  test('parses tool-call arguments so tojson renders them as serving does, keeping invalid JSON verbatim', () => {
    const { messages } = trajectoryToTemplateInput(toolSession.messages, toolSession.tools);
    expect(messages[2]).toEqual({
      role: 'assistant',
      content: '',
      tool_calls: [
        { id: 'callA0001', type: 'function', function: { name: 'get_item_detail', arguments: { item_id: 'A1' } } },
        {
          id: 'callA0002',
          type: 'function',
          function: {
            name: 'list_coupons',
            arguments: {
              filter: { categories: ['美妆', '护肤'], min_discount: 0.5, flags: { new_user: true } },
              limit: 3,
            },
          },
        },
      ],
    });
    expect(messages[3]).toEqual({ role: 'tool', content: toolSession.messages[3].content, tool_call_id: 'callA0001' });
    const invalid = trajectoryToTemplateInput(invalidArguments.messages, []).messages[2];
    expect(invalid.tool_calls?.[0].function.arguments).toBe('{"item_id": "A3"');
  });

  test('follows the template conventions: null content and raw argument text for DeepSeek-style templates', () => {
    const { messages } = trajectoryToTemplateInput(toolSession.messages, [], {
      toolCallContent: 'null',
      toolArguments: 'string',
    });
    expect(messages[2].content).toBeNull();
    expect(messages[2].tool_calls?.[1].function.arguments).toBe(
      '{"filter":{"categories":["美妆","护肤"],"min_discount":0.5,"flags":{"new_user":true}},"limit":3}',
    );
    expect(messages[5]).toEqual({ role: 'assistant', content: toolSession.messages[5].content });
  });

  test('orders tool definition keys as serving does, whatever order they were stored in', () => {
    const stored = [
      { function: { parameters: { type: 'object' }, name: 'f', description: 'd' }, type: 'function' as const },
    ];
    const { tools } = trajectoryToTemplateInput([], stored);
    expect(JSON.stringify(tools)).toBe(
      '[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]',
    );
    expect(
      JSON.stringify(
        trajectoryToTemplateInput([], [{ type: 'function', function: { name: 'g', parameters: {} } }]).tools,
      ),
    ).toBe('[{"type":"function","function":{"name":"g","parameters":{}}}]');
  });

  test('keeps reasoning text for templates that render it', () => {
    const { messages } = trajectoryToTemplateInput(
      [{ role: 'assistant', content: 'A', reasoning_content: 'because' }],
      [],
    );
    expect(messages[0]).toEqual({ role: 'assistant', content: 'A', reasoning_content: 'because' });
  });
});
