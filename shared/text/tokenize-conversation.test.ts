import fc from 'fast-check';
import type { ChatMessage } from '../trajectory/messages';
import { presetFiles } from './__fixtures__/preset-files';
import {
  invalidArguments,
  parallelCalls,
  plainChat,
  sampleConversations,
  singleCall,
  toolSession,
  type SampleConversation,
} from './__fixtures__/sample-conversations';
import type { ChatTokenizer } from './chat-tokenizer';
import { parseJsonKeepingFloats } from './python-values';
import { loadChatTokenizer, type TokenizerPreset } from './load-chat-tokenizer';
import { tokenizeConversation, type TokenizedSample, type TokenizeResult } from './tokenize-conversation';

const now = new Date(Date.UTC(2025, 0, 2));
const tokenizers = {} as Record<TokenizerPreset, ChatTokenizer>;

beforeAll(async () => {
  for (const preset of ['qwen3', 'deepseek_v3', 'llama3_1'] as const)
    tokenizers[preset] = await loadChatTokenizer({ preset });
});

function accepted(result: TokenizeResult): TokenizedSample {
  if (!result.ok) throw new Error(`expected a sample, got ${result.code}: ${result.reason}`);
  return result.sample;
}

function trainedTexts(sample: TokenizedSample): string[] {
  return sample.assistantSpans.map((span) => sample.text.slice(span.start, span.end));
}

/** Runs of consecutive trained tokens, decoded. */
function maskedRuns(tokenizer: ChatTokenizer, sample: TokenizedSample): string[] {
  const runs: number[][] = [];
  sample.lossMask.forEach((bit, index) => {
    if (bit === 1 && sample.lossMask[index - 1] === 1) runs.at(-1)!.push(sample.inputIds[index]);
    else if (bit === 1) runs.push([sample.inputIds[index]]);
  });
  return runs.map((ids) => tokenizer.decode(ids));
}

/** Invariants every accepted sample holds, whatever the template. */
function expectConsistentMask(tokenizer: ChatTokenizer, sample: TokenizedSample): void {
  expect(sample.inputIds).toEqual(tokenizer.encode(sample.text));
  expect(sample.lossMask).toHaveLength(sample.inputIds.length);
  expect(maskedRuns(tokenizer, sample)).toEqual(trainedTexts(sample).map((text) => tokenizer.normalize(text)));
  for (const text of trainedTexts(sample))
    expect(tokenizer.endOfTurnTokens.some((token) => text.endsWith(token))).toBe(true);
  expect(sample.lossMask.reduce((sum, bit) => sum + bit, 0)).toBe(
    sample.assistantSpans.reduce((sum, span) => sum + span.tokenEnd - span.tokenStart, 0),
  );
}

describe('loss masks on the full rendering', () => {
  test('Qwen3 trains the tool calls, answers and end-of-turn tokens, never the headers or tool results', () => {
    const tokenizer = tokenizers.qwen3;
    const sample = accepted(
      tokenizeConversation(tokenizer, toolSession.messages, toolSession.tools, { trainOn: 'all', now }),
    );
    expectConsistentMask(tokenizer, sample);
    expect(sample.assistantSpans.map((span) => span.messageIndex)).toEqual([2, 5, 7, 9]);
    expect(trainedTexts(sample)).toEqual([
      '<tool_call>\n{"name": "get_item_detail", "arguments": {"item_id": "A1"}}\n</tool_call>\n<tool_call>\n{"name": "list_coupons", "arguments": {"filter": {"categories": ["美妆", "护肤"], "min_discount": 0.5, "flags": {"new_user": true}}, "limit": 3}}\n</tool_call><|im_end|>',
      'A1 玻尿酸精华现价 129 元，库存 42 件。新人可用 NEW20 券打 8 折 🎁<|im_end|>',
      '<tool_call>\n{"name": "get_item_detail", "arguments": {"item_id": "A2"}}\n</tool_call><|im_end|>',
      '<think>\n\n</think>\n\nA2 (Sunscreen SPF50) costs ¥89.5 but is sold out right now 😢<|im_end|>',
    ]);
    const header = tokenizer.encode('<|im_start|>assistant\n');
    const untrained = sample.inputIds.filter((_, index) => sample.lossMask[index] === 0);
    for (const span of sample.assistantSpans) {
      expect(sample.inputIds.slice(span.tokenStart - header.length, span.tokenStart)).toEqual(header);
      expect(sample.lossMask.slice(span.tokenStart - header.length, span.tokenStart)).toEqual(header.map(() => 0));
    }
    const maskedText = maskedRuns(tokenizer, sample).join('');
    for (const message of toolSession.messages.filter((message) => message.role !== 'assistant')) {
      expect(maskedText).not.toContain(message.content);
    }
    expect(tokenizer.decode(untrained)).toContain(
      '<tool_response>\n{"item_id": "A1", "title": "玻尿酸精华 30ml", "price": 129, "stock": 42}\n</tool_response>',
    );
  });

  test("trainOn 'last' trains only the final assistant turn", () => {
    const tokenizer = tokenizers.qwen3;
    const all = accepted(
      tokenizeConversation(tokenizer, toolSession.messages, toolSession.tools, { trainOn: 'all', now }),
    );
    const last = accepted(
      tokenizeConversation(tokenizer, toolSession.messages, toolSession.tools, { trainOn: 'last', now }),
    );
    expect(last.inputIds).toEqual(all.inputIds);
    expect(last.assistantSpans).toEqual([all.assistantSpans[3]]);
    expect(last.lossMask.indexOf(1)).toBe(all.assistantSpans[3].tokenStart);
    expect(last.lossMask.lastIndexOf(1)).toBe(last.inputIds.length - 2);
    expectConsistentMask(tokenizer, last);
  });

  test('with thinking off, the empty think block is prompt, not output; earlier turns are unaffected', () => {
    const tokenizer = tokenizers.qwen3;
    const thinking = accepted(
      tokenizeConversation(tokenizer, plainChat.messages, [], { trainOn: 'all', enableThinking: true, now }),
    );
    const plain = accepted(
      tokenizeConversation(tokenizer, plainChat.messages, [], { trainOn: 'all', enableThinking: false, now }),
    );
    expect(plain.text).toBe(thinking.text);
    expect(trainedTexts(thinking)[1]).toBe(
      '<think>\n\n</think>\n\nFor dry skin, the hyaluronic serum (A1) is the best pick.<|im_end|>',
    );
    expect(trainedTexts(plain)[1]).toBe('For dry skin, the hyaluronic serum (A1) is the best pick.<|im_end|>');
    expect(trainedTexts(plain)[0]).toBe(trainedTexts(thinking)[0]);
    expectConsistentMask(tokenizer, plain);
  });

  test('DeepSeek-V3 trains parallel calls through its end-of-sentence token, and the answer after tool outputs without <｜tool▁outputs▁end｜>', () => {
    const tokenizer = tokenizers.deepseek_v3;
    const sample = accepted(
      tokenizeConversation(tokenizer, parallelCalls.messages, parallelCalls.tools, { trainOn: 'all', now }),
    );
    expectConsistentMask(tokenizer, sample);
    expect(trainedTexts(sample)).toEqual([
      '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_item_detail\n```json\n{"item_id": "A1"}\n```<｜tool▁call▁end｜>\n' +
        '<｜tool▁call▁begin｜>function<｜tool▁sep｜>list_coupons\n```json\n{"filter":{"categories":["美妆","护肤"],"min_discount":0.5,"flags":{"new_user":true}},"limit":3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>',
      'A1 玻尿酸精华现价 129 元，库存 42 件。新人可用 NEW20 券打 8 折 🎁<｜end▁of▁sentence｜>',
    ]);
    expect(
      sample.text.slice(
        sample.assistantSpans[1].start - '<｜tool▁outputs▁end｜>'.length,
        sample.assistantSpans[1].start,
      ),
    ).toBe('<｜tool▁outputs▁end｜>');
  });

  test('Llama 3.1 trains answers through <|eot_id|>', () => {
    const tokenizer = tokenizers.llama3_1;
    const sample = accepted(tokenizeConversation(tokenizer, plainChat.messages, [], { trainOn: 'all', now }));
    expectConsistentMask(tokenizer, sample);
    expect(trainedTexts(sample)).toEqual([
      '今天上新了三款：玻尿酸精华、防晒霜和唇釉 💄<|eot_id|>',
      'For dry skin, the hyaluronic serum (A1) is the best pick.<|eot_id|>',
    ]);
    expect(sample.inputIds[0]).toBe(tokenizer.encode('<|begin_of_text|>')[0]);
    expect(sample.lossMask[0]).toBe(0);
  });

  test('every accepted sample of every preset holds the mask invariants, and tokenizing is deterministic', () => {
    for (const tokenizer of Object.values(tokenizers)) {
      for (const conversation of sampleConversations) {
        for (const trainOn of ['all', 'last'] as const) {
          const result = tokenizeConversation(tokenizer, conversation.messages, conversation.tools, { trainOn, now });
          expect(tokenizeConversation(tokenizer, conversation.messages, conversation.tools, { trainOn, now })).toEqual(
            result,
          );
          if (result.ok) expectConsistentMask(tokenizer, result.sample);
        }
      }
    }
  });
});

describe('tool schema floats', () => {
  test('a schema float renders as Python prints it, also after the same tools with an integer', () => {
    const tokenizer = tokenizers.qwen3;
    const withMinimum = (minimum: string) =>
      toolSession.tools.map((tool, index) =>
        index === 0
          ? {
              ...tool,
              function: {
                ...tool.function,
                parameters: parseJsonKeepingFloats(`{"type":"object","properties":{},"minimum":${minimum}}`) as Record<
                  string,
                  unknown
                >,
              },
            }
          : tool,
      );
    const render = (minimum: string) =>
      accepted(tokenizeConversation(tokenizer, toolSession.messages, withMinimum(minimum), { trainOn: 'all', now }))
        .text;
    // The integer first: tool lists are shared by their JSON text, which must tell `1` from `1.0`.
    expect(render('1')).toContain('"minimum": 1}');
    expect(render('1.0')).toContain('"minimum": 1.0}');
  });
});

describe('rejections with reasons', () => {
  /** The preset's own template with one deliberate corruption, run on a conversation. */
  async function withCorruptedTemplate(
    preset: TokenizerPreset,
    find: string,
    replacement: string,
    conversation: SampleConversation,
  ): Promise<TokenizeResult> {
    const original = presetFiles(preset).config.chat_template as string;
    const corrupted = original.replaceAll(find, replacement);
    expect(corrupted).not.toBe(original);
    const tokenizer = await loadChatTokenizer({ preset, chatTemplate: corrupted });
    return tokenizeConversation(tokenizer, conversation.messages, conversation.tools, { trainOn: 'all', now });
  }

  test('a template that drops the newline after the assistant header is caught: the turn no longer opens like the served prompt', async () => {
    const result = await withCorruptedTemplate(
      'qwen3',
      "{{- '<|im_start|>' + message.role + '\\n' + content }}",
      "{{- '<|im_start|>' + message.role + content }}",
      toolSession,
    );
    expect(result).toMatchObject({ ok: false, code: 'HEADER_NOT_FOUND', messageIndex: 2 });
  });

  test('a template that drops the end-of-turn token after assistant turns is caught', async () => {
    const result = await withCorruptedTemplate(
      'qwen3',
      "        {{- '<|im_end|>\\n' }}\n    {%- elif",
      "        {{- '\\n' }}\n    {%- elif",
      plainChat,
    );
    expect(result).toMatchObject({ ok: false, code: 'NO_END_OF_TURN', messageIndex: 2 });
  });

  test('a header that ends in a space merges with the answer into one token: the span starts at that token, as verl and TRL cut', async () => {
    // " 今" is no Llama token, so the Chinese answer (message 2) still cuts cleanly; " For" is one.
    const result = await withCorruptedTemplate(
      'llama3_1',
      "<|end_header_id|>\n\n'",
      "<|end_header_id|>\n\n '",
      plainChat,
    );
    if (!result.ok) throw new Error(result.reason);
    const [first, second] = result.sample.assistantSpans;
    expect(first.mergedPromptChars).toBeUndefined();
    // The served prompt ends in the space; the first token on which it and the whole text disagree is " For".
    expect(second.mergedPromptChars).toBe(1);
    expect(result.sample.text.slice(second.start, second.start + 13)).toBe(' For dry skin');
    expect(result.sample.text.slice(second.start - 2, second.start)).toBe('\n\n');
  });

  test("DeepSeek-V3's template leaves a lone tool call without an end-of-turn token and later tool turns without a header", () => {
    const tokenizer = tokenizers.deepseek_v3;
    expect(
      tokenizeConversation(tokenizer, singleCall.messages, singleCall.tools, { trainOn: 'all', now }),
    ).toMatchObject({ ok: false, code: 'NO_END_OF_TURN', messageIndex: 2 });
    expect(
      tokenizeConversation(tokenizer, toolSession.messages, toolSession.tools, { trainOn: 'all', now }),
    ).toMatchObject({ ok: false, code: 'HEADER_NOT_FOUND', messageIndex: 7 });
    expect(
      tokenizeConversation(tokenizer, invalidArguments.messages, invalidArguments.tools, { trainOn: 'all', now }),
    ).toMatchObject({ ok: false, code: 'FIELD_NOT_RENDERED', messageIndex: 2 });
    expect(tokenizeConversation(tokenizer, toolSession.messages, toolSession.tools, { trainOn: 'last', now }).ok).toBe(
      true,
    );
  });

  test('tool calls under a template that never renders them are rejected rather than trained as empty turns', () => {
    const result = tokenizeConversation(tokenizers.llama3_1, singleCall.messages, singleCall.tools, {
      trainOn: 'all',
      now,
    });
    expect(result).toMatchObject({ ok: false, code: 'TOOL_CALLS_NOT_RENDERED', messageIndex: 2 });
  });

  test('special-token text inside a message, no assistant turn, and a template that raises are rejected', async () => {
    const injected: ChatMessage[] = [
      { role: 'user', content: 'hi <|im_end|> there' },
      { role: 'assistant', content: 'hello' },
    ];
    expect(tokenizeConversation(tokenizers.qwen3, injected, [], { trainOn: 'all', now })).toMatchObject({
      ok: false,
      code: 'RESERVED_TEXT',
      messageIndex: 0,
    });
    const privateUse: ChatMessage[] = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'icon \u{F0001}' },
    ];
    expect(tokenizeConversation(tokenizers.qwen3, privateUse, [], { trainOn: 'all', now })).toMatchObject({
      ok: false,
      code: 'RESERVED_TEXT',
      messageIndex: 1,
    });
    expect(
      tokenizeConversation(tokenizers.qwen3, [{ role: 'user', content: 'hi' }], [], { trainOn: 'all', now }),
    ).toMatchObject({ ok: false, code: 'NO_ASSISTANT_TURN' });
    const raising = await loadChatTokenizer({
      preset: 'qwen3',
      chatTemplate:
        "{% if messages|length > 2 %}{{ raise_exception('too long') }}{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
    });
    const result = tokenizeConversation(raising, plainChat.messages, [], { trainOn: 'all', now });
    expect(result).toMatchObject({ ok: false, code: 'TEMPLATE_ERROR' });
    expect(result.ok ? '' : result.reason).toContain('too long');
  });
});

describe('property: any accepted sample is consistent, for arbitrary text', () => {
  const text = fc.oneof(
    fc.string({ unit: 'grapheme', minLength: 0, maxLength: 30 }),
    fc.constantFrom(
      'A1 玻尿酸精华',
      '😀🎁',
      '  padded  ',
      '\nleading newline',
      'trailing newline\n',
      'emoji 👩‍👩‍👧 family',
      'ü café ñ',
      'cafe\u0301 decomposed',
    ),
  );
  const argumentsText = fc.oneof(
    fc.jsonValue().map((value) => JSON.stringify({ value })),
    text,
  );
  const conversation = fc
    .tuple(text, text, text, argumentsText, text, fc.boolean())
    .map(([system, user, answer, args, result, withCall]): ChatMessage[] => [
      { role: 'system', content: system },
      { role: 'user', content: user },
      ...(withCall
        ? [
            {
              role: 'assistant' as const,
              content: null,
              tool_calls: [
                { id: 'callB0001', type: 'function' as const, function: { name: 'get_item_detail', arguments: args } },
              ],
            },
            { role: 'tool' as const, tool_call_id: 'callB0001', content: result },
          ]
        : []),
      { role: 'assistant', content: answer },
    ]);

  test.each(['qwen3', 'deepseek_v3', 'llama3_1'] as const)('%s', (preset) => {
    const tokenizer = tokenizers[preset];
    const reasons = new Set<string>();
    let acceptedCount = 0;
    fc.assert(
      fc.property(conversation, fc.constantFrom<'all' | 'last'>('all', 'last'), (messages, trainOn) => {
        const result = tokenizeConversation(tokenizer, messages, toolSession.tools, { trainOn, now });
        if (result.ok) {
          expectConsistentMask(tokenizer, result.sample);
          acceptedCount++;
        } else reasons.add(result.code);
      }),
      { numRuns: 40, seed: 7 },
    );
    expect(acceptedCount).toBeGreaterThan(20);
    // Rejections happen only where the template or the tokenizer leaves no clean cut.
    for (const code of reasons)
      expect([
        'TOKEN_BOUNDARY',
        'TOOL_CALLS_NOT_RENDERED',
        'NO_END_OF_TURN',
        'HEADER_NOT_FOUND',
        'RESERVED_TEXT',
      ]).toContain(code);
  });
});
