import { HatError } from '../errors';
import { sha256Hex } from '../hash/hash';
import { sampleConversations } from './__fixtures__/sample-conversations';
import { ChatTemplate } from './chat-template';
import { loadChatTokenizer } from './load-chat-tokenizer';
import { trajectoryToTemplateInput } from './template-input';
import { strftime } from './strftime';

const messages = [{ role: 'user' as const, content: 'hi' }];

describe('ChatTemplate', () => {
  test('renders the globals and filters templates use exactly as Python Jinja (transformers) does', () => {
    const text = [
      '{%- set ns = namespace(count=0) %}',
      '{%- for i in range(1, 7, 2) %}{%- set ns.count = ns.count + i %}{{ i }},{% endfor %}',
      '{{ ns.count }}|{{ true }}|{{ none is none }}|{{ True and not False }}|{{ None }}',
      '|{{ messages[0] | tojson }}|{{ bos_token }}|{{ "x" if add_generation_prompt else "y" }}',
      '|{{ range(3) | length }}|{{ range(5, 1, -2) | join(",") }}',
    ].join('');
    // transformers 5.17 apply_chat_template's output for this template (booleans and None as Python prints them).
    expect(new ChatTemplate(text, { bos_token: '<s>' }).render(messages)).toBe(
      '1,3,5,9|True|True|True|None|{"role": "user", "content": "hi"}|<s>|y|3|5,3',
    );
  });

  test('strftime_now formats the given moment in UTC, so a conversation renders the same on every worker', () => {
    const template = new ChatTemplate('{{ strftime_now("%d %b %Y %H:%M") }}', {});
    const now = new Date(Date.UTC(2024, 6, 26, 23, 30));
    expect(template.render(messages, { now })).toBe('26 Jul 2024 23:30');
    expect(strftime(new Date(Date.UTC(2025, 0, 5, 13, 4, 9)), '%A %a %B %m/%d/%y %I:%M:%S %p %j %% %Q')).toBe(
      'Sunday Sun January 01/05/25 01:04:09 PM 005 % %Q',
    );
  });

  test('raise_exception in a template surfaces as a bad-input error carrying the template message', () => {
    const template = new ChatTemplate("{{ raise_exception('Conversation roles must alternate') }}", {});
    expect(() => template.render(messages)).toThrow(
      /^\[CHAT_TEMPLATE_RENDER_FAILED\] .*Conversation roles must alternate/,
    );
    try {
      template.render(messages);
    } catch (error) {
      expect(HatError.isInstance(error) && error.exitCode).toBe(2);
    }
  });

  test('passes tools only when there are some, and enable_thinking only when set, as transformers does', () => {
    const template = new ChatTemplate('{{ tools is defined }}/{{ enable_thinking is defined }}', {});
    expect(template.render(messages, { tools: [] })).toBe('False/False');
    expect(
      template.render(messages, {
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
        enableThinking: false,
      }),
    ).toBe('True/True');
  });

  test('named templates: tool_use when tools are given, default otherwise, or the one asked for', () => {
    const template = new ChatTemplate(
      [
        { name: 'default', template: 'D' },
        { name: 'tool_use', template: 'T' },
      ],
      {},
    );
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: {} } }];
    expect(template.render(messages)).toBe('D');
    expect(template.render(messages, { tools })).toBe('T');
    expect(template.render(messages, { templateName: 'default', tools })).toBe('D');
    expect(() => template.render(messages, { templateName: 'rag' })).toThrow(
      /^\[CHAT_TEMPLATE_MISSING\] no chat template named "rag" \(have: default, tool_use\)/,
    );
    expect(template.hash).not.toBe(new ChatTemplate([{ name: 'default', template: 'D' }], {}).hash);
  });

  test('hashes the template text, and reports a template that does not parse', () => {
    expect(new ChatTemplate('{{ messages }}', {}).hash).toBe(sha256Hex('{{ messages }}'));
    expect(() => new ChatTemplate('{% for m in messages %}', {})).toThrow(
      /^\[CHAT_TEMPLATE_INVALID\] chat template "default" does not parse/,
    );
  });
});

describe('ChatTemplate.generationPrompt', () => {
  test('a static generation-prompt block is what the prompt adds after any prefix of any conversation', async () => {
    const now = new Date(Date.UTC(2025, 0, 2));
    const checked: string[] = [];
    for (const preset of ['qwen3', 'llama3_1', 'deepseek_v3'] as const) {
      const tokenizer = await loadChatTokenizer({ preset });
      for (const enableThinking of [undefined, false, true]) {
        const options = { now, ...(enableThinking !== undefined ? { enableThinking } : {}) };
        const header = tokenizer.generationPrompt(options);
        if (header === undefined) continue;
        checked.push(`${preset}/${String(enableThinking)}`);
        for (const conversation of sampleConversations) {
          const input = trajectoryToTemplateInput(
            conversation.messages,
            conversation.tools,
            tokenizer.templateFeatures,
          );
          for (let end = 1; end <= input.messages.length; end++) {
            const prefix = input.messages.slice(0, end);
            const withTools = { ...options, tools: input.tools };
            expect(tokenizer.render(prefix, { ...withTools, addGenerationPrompt: true })).toBe(
              tokenizer.render(prefix, { ...withTools, addGenerationPrompt: false }) + header,
            );
          }
        }
      }
    }
    expect(checked).toEqual([
      'qwen3/undefined',
      'qwen3/false',
      'qwen3/true',
      'llama3_1/undefined',
      'llama3_1/false',
      'llama3_1/true',
    ]);
  });

  test('is undefined when the block depends on the conversation or the switch is read elsewhere', () => {
    // DeepSeek-V3 style: whether the header is added depends on the last message.
    expect(
      new ChatTemplate(
        '{%- set ns = namespace(is_tool=false) %}{{ messages[0].content }}{% if add_generation_prompt and not ns.is_tool %}<A>{% endif %}',
        {},
      ).generationPrompt(),
    ).toBeUndefined();
    expect(
      new ChatTemplate(
        '{% for m in messages %}{{ m.content }}{% if loop.last and add_generation_prompt %}!{% endif %}{% endfor %}{% if add_generation_prompt %}<A>{% endif %}',
        {},
      ).generationPrompt(),
    ).toBeUndefined();
    expect(
      new ChatTemplate(
        '{% set enable_thinking = messages|length > 1 %}{{ messages[0].content }}{% if add_generation_prompt %}<A>{% if enable_thinking %}<t>{% endif %}{% endif %}',
        {},
      ).generationPrompt(),
    ).toBeUndefined();
    expect(
      new ChatTemplate('{{ messages[0].content }}{% if add_generation_prompt %}{{ bos_token }}A{% endif %}', {
        bos_token: '<s>',
      }).generationPrompt(),
    ).toBe('<s>A');
  });
});
