import { Template } from '@huggingface/jinja';
import type { Tokenizer } from '@huggingface/tokenizers';
import { golden } from './__fixtures__/golden';
import { presetFiles, presetNames, presetTokenizer } from './__fixtures__/preset-files';
import { invalidArguments, sampleConversations, singleCall, toolSession } from './__fixtures__/sample-conversations';
import { createTokenizerCore, specialTokenText, type ChatTokenizer } from './chat-tokenizer';
import { loadChatTokenizer, type TokenizerPreset } from './load-chat-tokenizer';
import { trajectoryToTemplateInput } from './template-input';
import { markTrainedText, tokenizeConversation } from './tokenize-conversation';

const now = new Date(Date.UTC(2025, 0, 2, 3, 4, 5));

function renderOf(tokenizer: ChatTokenizer, conversation: (typeof sampleConversations)[number]): string {
  const input = trajectoryToTemplateInput(conversation.messages, conversation.tools, tokenizer.templateFeatures);
  return tokenizer.render(input.messages, { tools: input.tools, now });
}

function occurrences(text: string, part: string): number {
  return text.split(part).length - 1;
}

describe.each(presetNames)('the %s package template', (preset: TokenizerPreset) => {
  let tokenizer: ChatTokenizer;
  let own: Tokenizer;
  let config: Record<string, unknown>;

  beforeAll(async () => {
    tokenizer = await loadChatTokenizer({ preset });
    config = presetFiles(preset).config;
    own = presetTokenizer(preset);
  });

  test.each(sampleConversations.map((conversation) => [conversation.name, conversation] as const))(
    'renders %s exactly as the template itself, tokenizes it as the tokenizer itself, and masks it as recorded',
    (name, conversation) => {
      const input = trajectoryToTemplateInput(conversation.messages, conversation.tools, tokenizer.templateFeatures);
      const rendered = tokenizer.render(input.messages, { tools: input.tools, now });
      const direct = new Template(config.chat_template as string).render({
        messages: input.messages,
        ...(input.tools.length > 0 ? { tools: input.tools } : {}),
        add_generation_prompt: false,
        bos_token: specialTokenText(config.bos_token),
        eos_token: specialTokenText(config.eos_token),
      });
      expect(rendered).toBe(direct);
      expect(rendered).toBe(golden(`${preset}/${name}.txt`, rendered));

      const ids: number[] = own.encode(rendered, { add_special_tokens: false }).ids;
      expect(tokenizer.encode(rendered)).toEqual(ids);
      for (const special of tokenizer.specialTokens.filter((text) => rendered.includes(text))) {
        const id = own.token_to_id(special);
        expect(ids.filter((token) => token === id)).toHaveLength(occurrences(rendered, special));
      }

      const result = tokenizeConversation(tokenizer, conversation.messages, conversation.tools, {
        trainOn: 'all',
        now,
      });
      if (result.ok) {
        expect(result.sample.text).toBe(rendered);
        expect(result.sample.inputIds).toEqual(ids);
      }
      const masked = result.ok ? markTrainedText(result.sample) : `rejected ${result.code}: ${result.reason}\n`;
      expect(masked).toBe(golden(`${preset}/${name}.mask.txt`, masked));
    },
  );
});

describe('what each template does with tools', () => {
  test('Qwen3 puts tool definitions in the system turn, calls in <tool_call> JSON, results in a user turn, and an empty think block on the last turn only', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    const text = renderOf(tokenizer, toolSession);
    expect(text.startsWith('<|im_start|>system\n你是直播间的带货助手')).toBe(true);
    expect(text).toContain(
      '<tools>\n{"type": "function", "function": {"name": "get_item_detail", "description": "查询商品详情（价格、库存、规格）", "parameters": {"type": "object"',
    );
    expect(text).toContain(
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_item_detail", "arguments": {"item_id": "A1"}}\n</tool_call>\n<tool_call>\n',
    );
    expect(text).toContain(
      '{"name": "list_coupons", "arguments": {"filter": {"categories": ["美妆", "护肤"], "min_discount": 0.5, "flags": {"new_user": true}}, "limit": 3}}',
    );
    expect(text).toContain(
      '<|im_start|>user\n<tool_response>\n{"item_id": "A1", "title": "玻尿酸精华 30ml", "price": 129, "stock": 42}\n</tool_response>\n<tool_response>\n[{"code": "NEW20"',
    );
    expect(text).toContain('<|im_start|>assistant\nA1 玻尿酸精华现价 129 元');
    expect(
      text.endsWith(
        '<|im_start|>assistant\n<think>\n\n</think>\n\nA2 (Sunscreen SPF50) costs ¥89.5 but is sold out right now 😢<|im_end|>\n',
      ),
    ).toBe(true);
    expect(occurrences(text, '<think>')).toBe(1);
    expect(renderOf(tokenizer, invalidArguments)).toContain('"arguments": {"item_id": "A3"}\n</tool_call>');
  });

  test('DeepSeek-V3 drops tool definitions and prints the raw argument text in a json fence', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'deepseek_v3' });
    expect(tokenizer.templateFeatures).toEqual({
      toolCallContent: 'null',
      toolArguments: 'string',
      rendersToolDefinitions: false,
      rendersToolCalls: true,
    });
    const text = renderOf(tokenizer, singleCall);
    expect(text).not.toContain('查询商品详情');
    expect(text).toBe(
      "<｜begin▁of▁sentence｜>你是直播间的带货助手，回答要准确、简洁。Answer in the viewer's language.<｜User｜>What about A2? 🙏" +
        '<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_item_detail\n```json\n{"item_id":"A2"}\n```<｜tool▁call▁end｜>' +
        '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"item_id": "A2", "title": "Sunscreen SPF50", "price": 89.5, "stock": 0}<｜tool▁output▁end｜>' +
        '<｜tool▁outputs▁end｜>A2 (Sunscreen SPF50) costs ¥89.5 but is sold out right now 😢<｜end▁of▁sentence｜>',
    );
  });

  test('the Llama 3.1 package template drops tools and tool calls and renders results under a tool header', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'llama3_1' });
    expect(tokenizer.templateFeatures.rendersToolDefinitions).toBe(false);
    expect(tokenizer.templateFeatures.rendersToolCalls).toBe(false);
    const text = renderOf(tokenizer, singleCall);
    expect(text.startsWith('<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n你是直播间的带货助手')).toBe(
      true,
    );
    expect(text).not.toContain('get_item_detail');
    expect(text).toContain(
      '<|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|><|start_header_id|>tool<|end_header_id|>\n\n{"item_id": "A2"',
    );
  });
});

// The registry tokenizers' fingerprints against __golden__/fingerprints.json (moved from load-chat-tokenizer.test.ts:
// the packages' tokenizers are loaded above already).
describe('loadChatTokenizer', () => {
  test('fingerprints differ across the three tokenizers and stay as recorded', async () => {
    const fingerprints: Record<string, string> = {};
    for (const preset of presetNames) fingerprints[preset] = (await loadChatTokenizer({ preset })).fingerprint;
    expect(new Set(Object.values(fingerprints)).size).toBe(3);
    const files = presetFiles('llama3_1');
    expect(createTokenizerCore(files.tokenizerJson, files.config).fingerprint).toBe(fingerprints.llama3_1);
    const recorded = `${JSON.stringify(fingerprints, null, 2)}\n`;
    expect(recorded).toBe(golden('fingerprints.json', recorded));
  });
});
