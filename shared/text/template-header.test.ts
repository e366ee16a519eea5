import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Template } from '@huggingface/jinja';
import { ChatTemplate } from './chat-template';
import { headerStatementCount } from './template-header';
import { presetDirectory } from './load-chat-tokenizer';
import type { TemplateMessage, TemplateTool } from './template-input';

const variables = [
  'true',
  'false',
  'none',
  'range',
  'bos_token',
  'eos_token',
  'add_generation_prompt',
  'enable_thinking',
];
const bodyOf = (text: string) => (new Template(text).parsed as unknown as { body: unknown[] }).body;
/** The qwen3 preset's own chat template (tokenizer_config.json). */
const qwen3Template = () =>
  (
    JSON.parse(readFileSync(path.join(presetDirectory('qwen3'), 'tokenizer_config.json'), 'utf8')) as {
      chat_template: string;
    }
  ).chat_template;

const tools: TemplateTool[] = [
  {
    type: 'function',
    function: {
      name: 'lookup',
      description: 'Finds an item',
      parameters: { type: 'object', properties: { sku: { type: 'string' } } },
    },
  },
];
const conversation: TemplateMessage[] = [
  { role: 'system', content: 'You sell things.' },
  { role: 'user', content: 'How much is the kettle?' },
  {
    role: 'assistant',
    content: '',
    tool_calls: [{ type: 'function', function: { name: 'lookup', arguments: { sku: 'k1' } } }],
  },
  { role: 'tool', content: '{"price": 12}' },
  { role: 'assistant', content: 'It is 12.' },
];

describe('headerStatementCount', () => {
  it('finds the system-and-tools header of Qwen-style templates', () => {
    expect(headerStatementCount(bodyOf(qwen3Template()), variables)).toBeGreaterThan(0);
  });

  it('stops at a statement that assigns, reads other messages, or calls a function it does not know', () => {
    const rest = '{%- for message in messages %}{{ message.content }}{%- endfor %}';
    expect(headerStatementCount(bodyOf(`{%- if tools %}{{ tools | tojson }}{%- endif %}${rest}`), variables)).toBe(1);
    expect(headerStatementCount(bodyOf(`{%- set x = 1 %}${rest}`), variables)).toBe(0);
    expect(headerStatementCount(bodyOf(`{%- if true %}{%- set x = 1 %}{%- endif %}${rest}`), variables)).toBe(0);
    expect(headerStatementCount(bodyOf(`{{ messages[1].content }}${rest}`), variables)).toBe(0);
    expect(headerStatementCount(bodyOf(`{{ messages | length }}${rest}`), variables)).toBe(0);
    expect(headerStatementCount(bodyOf(`{{ strftime_now('%Y') }}${rest}`), variables)).toBe(0);
    expect(headerStatementCount(bodyOf(`{{ custom_variable }}${rest}`), variables)).toBe(0);
    expect(
      headerStatementCount(
        bodyOf(`{{ messages[0].content }}{%- for tool in tools %}{{ tool.name }}{%- endfor %}${rest}`),
        variables,
      ),
    ).toBe(2);
  });
});

describe('ChatTemplate with a cached header', () => {
  it('renders every prefix exactly as a template without a header does', () => {
    const qwen = qwen3Template();
    // A leading statement that assigns nothing visible but is not a header keeps the whole program.
    const whole = `{%- set unused = none %}${qwen}`;
    const split = new ChatTemplate(qwen, { eos_token: '<|im_end|>' });
    const plain = new ChatTemplate(whole, { eos_token: '<|im_end|>' });
    const now = new Date('2025-01-01T00:00:00Z');
    for (const withTools of [tools, undefined]) {
      // From two messages: the template raises without a user query.
      for (let length = 2; length <= conversation.length; length++) {
        for (const addGenerationPrompt of [false, true]) {
          const messages = conversation.slice(0, length);
          const options = { tools: withTools, now, addGenerationPrompt };
          // Twice: the second rendering takes the header from the cache.
          expect(split.render(messages, options)).toBe(plain.render(messages, options));
          expect(split.render(messages, options)).toBe(plain.render(messages, options));
        }
      }
    }
    // Another first message or tools list is another header.
    const other = [{ role: 'system' as const, content: 'You sell other things.' }, ...conversation.slice(1)];
    expect(split.render(other, { tools, now })).toBe(plain.render(other, { tools, now }));
    expect(split.render(other, { tools, now })).toContain('You sell other things.');
  });
});
