import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChatTemplate } from './chat-template';
import { presetDirectory } from './load-chat-tokenizer';
import { parseJsonKeepingFloats } from './python-values';
import { trajectoryToTemplateInput } from './template-input';
import type { ChatMessage, ToolSpec } from '../trajectory/messages';

/**
 * Renderings against Python Jinja's: the goldens under __golden__/python-parity/ are what
 * transformers' apply_chat_template rendered for the same templates and conversations
 * (__fixtures__/python-parity/generate.py; regenerate only on purpose). The cases print booleans
 * (`additionalProperties: false` in tool schemas, boolean arguments), None, floats holding
 * integers (`99.0`, `2E3`, `1e16`), tiny and negative floats, quotes, escapes and unicode, through
 * `{{ }}`, `|string`, `~`, `join` and `tojson` with its options.
 */

const fixtures = join(__dirname, '__fixtures__');
const goldens = join(__dirname, '__golden__', 'python-parity');

// Tool schemas read keeping float-ness (`1e16` is a float to Python), as the tool-call arguments are.
const cases = parseJsonKeepingFloats(readFileSync(join(fixtures, 'python-parity', 'cases.json'), 'utf8')) as {
  tools: ToolSpec[];
  conversations: Array<{ name: string; messages: ChatMessage[] }>;
};

const templates: Record<string, string> = {
  qwen3: (
    JSON.parse(readFileSync(join(presetDirectory('qwen3'), 'tokenizer_config.json'), 'utf8')) as {
      chat_template: string;
    }
  ).chat_template,
  qwen3_5: readFileSync(join(fixtures, 'chat-templates', 'Qwen3.5-4B.jinja'), 'utf8'),
  qwen3_coder: readFileSync(join(fixtures, 'chat-templates', 'Qwen3-Coder.original.jinja'), 'utf8'),
  llama3_1: readFileSync(join(fixtures, 'chat-templates', 'meta-llama-Llama-3.1-8B-Instruct.jinja'), 'utf8'),
  values: readFileSync(join(fixtures, 'python-parity', 'values.jinja'), 'utf8'),
};

function rendering(template: ChatTemplate, messages: ChatMessage[]): string {
  const input = trajectoryToTemplateInput(messages, cases.tools);
  try {
    return template.render(input.messages, { tools: input.tools, variables: { date_string: '02 Jan 2025' } });
  } catch (error) {
    return `raised: ${(error as Error).message.replace(/^.*template raised: /, '')}\n`;
  }
}

const pairs = Object.keys(templates).flatMap((name) =>
  cases.conversations.map((conversation) => [name, conversation.name, conversation.messages] as const),
);

describe.each(['interpreter', 'compiled'] as const)('the %s engine', (engine) => {
  test.each(pairs)('renders %s over %s as Python Jinja does', (name, conversation, messages) => {
    const template = new ChatTemplate(templates[name], { bos_token: '<s>', eos_token: '</s>' }, engine);
    const expected = readFileSync(join(goldens, name, `${conversation}.txt`), 'utf8');
    expect(rendering(template, messages)).toBe(expected);
  });
});
