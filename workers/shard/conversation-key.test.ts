import { toolSession } from '../../shared/text/__fixtures__/sample-conversations';
import type { ChatMessage } from '../../shared/trajectory/messages';
import { conversationKey } from './conversation-key';

describe('conversationKey', () => {
  const base = toolSession.messages;
  test('is equal for the same conversation up to whitespace, argument formatting and call ids', () => {
    const respaced: ChatMessage[] = base.map((message) => {
      if (message.role === 'assistant' && message.tool_calls) {
        return {
          ...message,
          tool_calls: message.tool_calls.map((call, index) => ({
            ...call,
            id: `other${index}`,
            function: { ...call.function, arguments: JSON.stringify(JSON.parse(call.function.arguments), null, 2) },
          })),
        };
      }
      return message.role === 'user' ? { ...message, content: `  ${message.content}\n` } : message;
    });
    expect(conversationKey(respaced, toolSession.tools)).toBe(conversationKey(base, toolSession.tools));
  });

  test('differs when what is said, called or offered differs', () => {
    const key = conversationKey(base, toolSession.tools);
    const changedAnswer = base.map((message, index) =>
      index === base.length - 1 ? { ...message, content: 'sold out' } : message,
    ) as ChatMessage[];
    expect(conversationKey(changedAnswer, toolSession.tools)).not.toBe(key);
    expect(conversationKey(base, toolSession.tools.slice(0, 1))).not.toBe(key);
    const changedArgument = base.map((message) =>
      message.role === 'assistant' && message.tool_calls
        ? {
            ...message,
            tool_calls: message.tool_calls.map((call) => ({
              ...call,
              function: { ...call.function, arguments: '{"item_id":"B9"}' },
            })),
          }
        : message,
    );
    expect(conversationKey(changedArgument, toolSession.tools)).not.toBe(key);
  });
});
