import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChatTemplate } from './chat-template';
import { parityTemplates } from './__fixtures__/python-parity/templates';
import { parseJsonKeepingFloats } from './python-values';
import { probeTemplateFeatures } from './template-features';
import { defaultTemplateConventions, trajectoryToTemplateInput, type TemplateConventions } from './template-input';
import type { ChatMessage, ToolSpec } from '../trajectory/messages';

/**
 * Renderings against Python Jinja's: the goldens under __golden__/python-parity/ are what
 * transformers' apply_chat_template rendered for the same templates and conversations
 * (__fixtures__/python-parity/generate.py; regenerate only on purpose). The cases print booleans
 * (`additionalProperties: false` in tool schemas, boolean arguments), None, floats holding
 * integers (`99.0`, `2E3`, `1e16`), tiny and negative floats, quotes, escapes and unicode, through
 * `{{ }}`, `|string`, `~`, `join` and `tojson` with its options, and whitespace Python strips
 * unlike JavaScript (`trim`, `lstrip('\n')`). These run without Python; python-differential.golden.test.ts
 * renders a generated corpus through Python itself.
 */

const fixtures = join(__dirname, '__fixtures__');
const goldens = join(__dirname, '__golden__', 'python-parity');

// Tool schemas read keeping float-ness (`1e16` is a float to Python), as the tool-call arguments are.
const cases = parseJsonKeepingFloats(readFileSync(join(fixtures, 'python-parity', 'cases.json'), 'utf8')) as {
  tools: ToolSpec[];
  conversations: Array<{ name: string; messages: ChatMessage[] }>;
};

// Every shipped template (the list generate.py renders too) and a template that prints values every way.
const templates: Record<string, string> = {
  ...parityTemplates(),
  values: readFileSync(join(fixtures, 'python-parity', 'values.jinja'), 'utf8'),
};

/** How generate.py hands tool-calling turns to each template: what the pipeline's probe finds. */
const conventions: Record<string, TemplateConventions> = {
  deepseek_v3_1: { toolCallContent: 'empty-string', toolArguments: 'string' },
};

test("generate.py's conventions are what the pipeline's probe finds for each template", () => {
  for (const [name, text] of Object.entries(templates)) {
    if (name === 'values') continue;
    const template = new ChatTemplate(text, { bos_token: '<s>', eos_token: '</s>' }, 'interpreter');
    const features = probeTemplateFeatures((messages, options) => template.render(messages, options));
    expect([name, { toolCallContent: features.toolCallContent, toolArguments: features.toolArguments }]).toEqual([
      name,
      conventions[name] ?? defaultTemplateConventions,
    ]);
  }
});

function rendering(name: string, template: ChatTemplate, messages: ChatMessage[]): string {
  const input = trajectoryToTemplateInput(messages, cases.tools, conventions[name] ?? defaultTemplateConventions);
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
    expect(rendering(name, template, messages)).toBe(expected);
  });
});
