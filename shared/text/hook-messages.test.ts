import type { ChatMessage } from '../trajectory/messages';
import { hookBlock, hookMessageFormFor, normalizeHookMessages, withoutHookBlocks } from './hook-messages';

const call = {
  id: 'call00001',
  type: 'function' as const,
  function: { name: 'get_item_detail', arguments: '{"item_id":"A1"}' },
};

describe('normalizeHookMessages', () => {
  const conversation: ChatMessage[] = [
    { role: 'system', content: 'You are the host assistant.' },
    { role: 'system', content: 'Session rule: mention the coupon.' },
    { role: 'user', content: 'A1 price?' },
    { role: 'system', content: 'Reply in 30 characters or fewer.' },
    { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: 'call00001', content: '{"price": 129}' },
    { role: 'system', content: 'Quote the price from the tool.' },
    { role: 'assistant', content: 'A1 costs 129.' },
  ];

  test('keeps system messages as they are for templates that render them anywhere', () => {
    const result = normalizeHookMessages(conversation, 'system-messages');
    expect(result).toEqual({ ok: true, messages: conversation, normalization: { form: 'system-messages', folded: 0 } });
  });

  test('folds each later system message into the turn the model reads before its next reply, in a marked block', () => {
    const result = normalizeHookMessages(conversation, 'folded');
    if (!result.ok) throw new Error(result.reason);
    expect(result.normalization).toEqual({ form: 'folded', folded: 3 });
    expect(result.messages).toEqual([
      { role: 'system', content: 'You are the host assistant.' },
      // A second system message at session start goes in front of the first user turn; one after it, behind.
      {
        role: 'user',
        content: `${hookBlock('Session rule: mention the coupon.')}\nA1 price?\n${hookBlock('Reply in 30 characters or fewer.')}`,
      },
      { role: 'assistant', content: null, tool_calls: [call] },
      {
        role: 'tool',
        tool_call_id: 'call00001',
        content: `{"price": 129}\n${hookBlock('Quote the price from the tool.')}`,
      },
      { role: 'assistant', content: 'A1 costs 129.' },
    ]);
    expect(hookBlock('x')).toBe('<system-reminder>\nx\n</system-reminder>');
    // The input is not changed.
    expect(conversation[2]).toEqual({ role: 'user', content: 'A1 price?' });
  });

  test('refuses a system message between two assistant turns instead of moving it to another moment', () => {
    const result = normalizeHookMessages(
      [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'a' },
        { role: 'system', content: 'hook' },
        { role: 'assistant', content: 'b' },
      ],
      'folded',
    );
    expect(result).toMatchObject({ ok: false, code: 'HOOK_NOT_FOLDABLE', messageIndex: 2 });
  });

  test('a template that renders system messages in place keeps them; any other placement folds', () => {
    expect(hookMessageFormFor('anywhere')).toBe('system-messages');
    for (const placement of ['moved-to-start', 'dropped', 'refused'] as const)
      expect(hookMessageFormFor(placement)).toBe('folded');
  });

  test("withoutHookBlocks gives back a turn's own text", () => {
    expect(withoutHookBlocks(`{"price": 129}\n${hookBlock('a')}\n${hookBlock('b\nc')}`)).toBe('{"price": 129}');
    expect(withoutHookBlocks('plain </system-reminder>')).toBe('plain </system-reminder>');
  });
});
