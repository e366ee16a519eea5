import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Template } from '@huggingface/jinja';
import type { ChatMessage } from '../trajectory/messages';
import { presetTokenizer } from './__fixtures__/preset-files';
import { sampleTools, toolSession } from './__fixtures__/sample-conversations';
import type { ChatTokenizer } from './chat-tokenizer';
import { normalizeHookMessages } from './hook-messages';
import { loadChatTokenizer } from './load-chat-tokenizer';
import { trajectoryToTemplateInput } from './template-input';
import { markTrainedText, tokenizeConversation } from './tokenize-conversation';

/**
 * The Qwen3.5 template (with the Qwen3 tokenizer: same control-token texts; the registry has no
 * Qwen3.5 package) in thinking mode (its default) and with `enable_thinking=false`, with reasoning
 * content present and absent, with hook system messages mid-conversation and tool-call-only turns
 * before a later user turn: every sample is kept, its ids are the tokenizer's own encoding of the
 * template's own rendering of the normalized conversation, and its mask is exactly the turns.
 */
const qwen35 = readFileSync(path.join(__dirname, '__fixtures__', 'chat-templates', 'Qwen3.5-4B.jinja'), 'utf8');
const now = new Date(Date.UTC(2025, 0, 2, 3, 4, 5));

const withHooks: ChatMessage[] = [
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
  { role: 'user', content: 'What about A2?' },
  {
    role: 'assistant',
    content: 'Let me check A2.',
    reasoning_content: 'The viewer asks about A2; I should look it up.',
  },
];

/** The same conversation with the reasoning removed. */
const withoutReasoning = withHooks.map((message): ChatMessage => {
  if (message.role !== 'assistant') return message;
  const { reasoning_content: _dropped, ...rest } = message;
  return rest;
});

/** Rendered by @huggingface/jinja directly (not our ChatTemplate) and encoded by the package tokenizer. */
function directIds(messages: ChatMessage[], thinking: boolean | undefined): number[] {
  const input = trajectoryToTemplateInput(messages, sampleTools);
  const text = new Template(qwen35).render({
    messages: input.messages,
    tools: input.tools,
    add_generation_prompt: false,
    ...(thinking === undefined ? {} : { enable_thinking: thinking }),
  });
  return presetTokenizer('qwen3').encode(text, { add_special_tokens: false }).ids;
}

describe.each([
  ['thinking (default)', undefined],
  ['thinking off', false],
] as const)('Qwen3.5 template, %s', (_mode, thinking) => {
  let tokenizer: ChatTokenizer;
  beforeAll(async () => {
    tokenizer = await loadChatTokenizer({ preset: 'qwen3', chatTemplate: qwen35 });
  });

  test.each([
    ['reasoning present', withHooks],
    ['reasoning absent', withoutReasoning],
  ])('keeps a conversation with hook messages and a tool-call-only turn, %s', (_case, messages) => {
    expect(tokenizer.hookMessages).toBe('folded');
    const result = tokenizeConversation(tokenizer, messages, sampleTools, {
      trainOn: 'all',
      now,
      ...(thinking === undefined ? {} : { enableThinking: thinking }),
    });
    if (!result.ok) throw new Error(`${result.code}: ${result.reason}`);
    const { sample } = result;
    expect(sample.hookMessages).toEqual({ form: 'folded', folded: 2 });
    const normalized = normalizeHookMessages(messages, 'folded');
    if (!normalized.ok) throw new Error(normalized.reason);
    expect(sample.messages).toEqual(normalized.messages);
    expect(sample.inputIds).toEqual(directIds(normalized.messages, thinking));
    expect(sample.text).toContain(
      'A1 现在多少钱？\n<system-reminder>\n回复请控制在30个字以内。\n</system-reminder><|im_end|>',
    );

    const marked = markTrainedText(sample);
    // The tool-call-only turn before the later user turn opens right after the header.
    expect(marked).toContain(
      '<|im_start|>assistant\n⟦<tool_call>\n<function=get_item_detail>\n<parameter=item_id>\nA1\n</parameter>\n</function>\n</tool_call><|im_end|>⟧',
    );
    expect(marked).toContain('<|im_start|>assistant\n⟦A1 现价 129 元。<|im_end|>⟧');
    const last = sample.assistantSpans.at(-1)!;
    const reasoning =
      messages.at(-1)!.role === 'assistant' &&
      (messages.at(-1) as { reasoning_content?: string }).reasoning_content !== undefined;
    if (reasoning) {
      expect(
        marked.endsWith(
          '<|im_start|>assistant\n<think>\n⟦The viewer asks about A2; I should look it up.\n</think>\n\nLet me check A2.<|im_end|>⟧\n',
        ),
      ).toBe(true);
      expect(last.mergedPromptChars).toBeUndefined();
    } else if (thinking === false) {
      // Served `<think>\n\n</think>\n\n` as the prompt: the empty block stays untrained.
      expect(marked.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n⟦Let me check A2.<|im_end|>⟧\n')).toBe(
        true,
      );
      expect(last.mergedPromptChars).toBeUndefined();
    } else {
      // Served `<think>\n`, rendered `<think>\n\n</think>`: `\n\n` is one token, the first the two disagree on.
      expect(marked.endsWith('<|im_start|>assistant\n<think>⟦\n\n</think>\n\nLet me check A2.<|im_end|>⟧\n')).toBe(
        true,
      );
      expect(last.mergedPromptChars).toBe(1);
      const served = tokenizer.encode(
        tokenizer.render(trajectoryToTemplateInput(sample.messages.slice(0, -1), sampleTools).messages, {
          tools: trajectoryToTemplateInput([], sampleTools).tools,
          addGenerationPrompt: true,
          now,
        }),
      );
      // Everything before the trained span is token for token what the model was served, up to the disagreement.
      expect(sample.inputIds.slice(0, last.tokenStart)).toEqual(served.slice(0, last.tokenStart));
      expect(served[last.tokenStart]).not.toBe(sample.inputIds[last.tokenStart]);
    }
  });

  test('keeps every sample conversation with tools (the tool-session: two tool-call-only turns)', () => {
    const result = tokenizeConversation(tokenizer, toolSession.messages, toolSession.tools, {
      trainOn: 'all',
      now,
      ...(thinking === undefined ? {} : { enableThinking: thinking }),
    });
    if (!result.ok) throw new Error(`${result.code}: ${result.reason}`);
    expect(result.sample.assistantSpans).toHaveLength(4);
    expect(result.sample.inputIds).toEqual(directIds(toolSession.messages, thinking));
  });
});
