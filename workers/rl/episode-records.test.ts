import { readFileSync } from 'node:fs';
import path from 'node:path';
import { sampleTools } from '../../shared/text/__fixtures__/sample-conversations';
import { loadChatTokenizer } from '../../shared/text/load-chat-tokenizer';
import type { ChatMessage } from '../../shared/trajectory/messages';
import { episodeTokenView } from './episode-records';

const qwen35 = readFileSync(
  path.join(__dirname, '..', '..', 'shared', 'text', '__fixtures__', 'chat-templates', 'Qwen3.5-4B.jinja'),
  'utf8',
);

/** An episode as the agent loop records it: hook injections as system messages after the viewer's turn and after a tool result. */
const episode: ChatMessage[] = [
  { role: 'system', content: '你是直播间的带货助手。' },
  { role: 'user', content: 'A1 现在多少钱？' },
  { role: 'system', content: '回复请控制在30个字以内。' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'callA0001', type: 'function', function: { name: 'get_item_detail', arguments: '{"item_id": "A1"}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'callA0001', content: '{"item_id": "A1", "price": 129}' },
  { role: 'system', content: '价格以工具结果为准。' },
  { role: 'assistant', content: 'A1 现价 129 元。' },
];

describe('episode token views for a Qwen3.5-style template', () => {
  test('fold hook messages as the template is served, and record it', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'qwen3', chatTemplate: qwen35 });
    const view = episodeTokenView(tokenizer, { messages: episode, tools: sampleTools });
    if (!view.ok) throw new Error(`${view.code}: ${view.reason}`);
    expect(view.foldedHookMessages).toBe(2);
    // The prompt is the conversation up to the first assistant turn, hooks folded into the user turn;
    // thinking mode: both turns (after the only viewer message) start at the `\n\n` token that merges
    // the served `<think>\n` with the rendered `\n</think>`, one prompt character each.
    expect(
      tokenizer
        .decode(view.tokens.slice(0, view.promptLength))
        .endsWith(
          'A1 现在多少钱？\n<system-reminder>\n回复请控制在30个字以内。\n</system-reminder><|im_end|>\n<|im_start|>assistant\n<think>',
        ),
    ).toBe(true);
    expect(view.mergedPromptChars).toBe(2);
    expect(view.response.startsWith('\n\n</think>\n\n<tool_call>')).toBe(true);
    expect(view.response).toContain(
      '{"item_id": "A1", "price": 129}\n<system-reminder>\n价格以工具结果为准。\n</system-reminder>\n</tool_response>',
    );
    expect(view.response.endsWith('<think>\n\n</think>\n\nA1 现价 129 元。<|im_end|>\n')).toBe(true);
  });

  test('keep them as system turns for Qwen3, whose template accepts them anywhere', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    const view = episodeTokenView(tokenizer, { messages: episode, tools: sampleTools });
    if (!view.ok) throw new Error(`${view.code}: ${view.reason}`);
    expect(view.foldedHookMessages).toBe(0);
    expect(view.mergedPromptChars).toBe(0);
    expect(tokenizer.decode(view.tokens)).toContain('<|im_start|>system\n价格以工具结果为准。<|im_end|>');
  });
});
