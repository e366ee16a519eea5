import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { Template } from '@huggingface/jinja';
import { ChatTemplate, type RenderOptions } from './chat-template';
import { compileProgram } from './compiled-template';
import { PythonFloat, PythonInteger } from './python-values';
import { presetDirectory } from './load-chat-tokenizer';
import type { TemplateMessage, TemplateTool } from './template-input';
import { sampleTools, toolSession } from './__fixtures__/sample-conversations';

/**
 * The compiled engine against @huggingface/jinja's interpreter: the same texts for real chat
 * templates over generated conversations, and for small templates that exercise each construct
 * the compiler accepts with values of every kind. `engine: 'compiled'` renders without the
 * comparison ChatTemplate makes at run time, so a difference shows here instead of being hidden.
 */

const fixtures = join(__dirname, '__fixtures__', 'chat-templates');
const realTemplates: Record<string, string> = {
  qwen3: JSON.parse(readFileSync(join(presetDirectory('qwen3'), 'tokenizer_config.json'), 'utf8')).chat_template,
  gemma3: JSON.parse(
    readFileSync(
      join(__dirname, '..', '..', 'node_modules', '@lenml', 'tokenizer-gemma3', 'models', 'tokenizer_config.json'),
      'utf8',
    ),
  ).chat_template,
  llama3_1: JSON.parse(readFileSync(join(presetDirectory('llama3_1'), 'tokenizer_config.json'), 'utf8')).chat_template,
  deepseek_v3: JSON.parse(readFileSync(join(presetDirectory('deepseek_v3'), 'tokenizer_config.json'), 'utf8'))
    .chat_template,
  ...Object.fromEntries(
    readdirSync(fixtures)
      .filter((file) => file.endsWith('.jinja'))
      .map((file) => [file, readFileSync(join(fixtures, file), 'utf8')]),
  ),
};

const special = { bos_token: '<s>', eos_token: '</s>' };

const texts = fc.constantFrom(
  '',
  ' ',
  '你好，A1 多少钱？',
  'Hello\nworld',
  '<think>\nplan\n</think>\n\nanswer',
  '<tool_response>{"ok": true}</tool_response>',
  '\n\n  padded  \n',
  '😀 emoji',
  'quote " and \\ backslash',
  'ünïcödé',
);

const argumentsValue = fc.oneof(
  fc.constant('{"item_id": "A1"}'),
  fc.constant('{"item_id": "A3"'),
  fc.record({ item_id: fc.constantFrom('A1', 'B2'), limit: fc.integer({ min: -3, max: 30 }) }),
  fc.record({
    filter: fc.record({ price: fc.constantFrom(1.5, 2, 0, -0.25) }),
    tags: fc.array(texts, { maxLength: 2 }),
  }),
  fc.constant({}),
  // Values Python prints unlike JavaScript: booleans, None, floats that hold integers.
  fc.record({
    flag: fc.boolean(),
    none: fc.constant(null),
    price: fc.constantFrom(new PythonFloat(99), new PythonFloat(0), 1e16, 1.5e-7),
  }),
);

const toolCall = fc.record({
  id: fc.constantFrom('callA0001', 'callB0002'),
  type: fc.constant('function' as const),
  function: fc.record({ name: fc.constantFrom('get_item_detail', 'list_coupons'), arguments: argumentsValue }),
});

const message: fc.Arbitrary<TemplateMessage> = fc.oneof(
  fc.record({ role: fc.constantFrom('system' as const, 'user' as const), content: texts }),
  fc.record(
    {
      role: fc.constant('assistant' as const),
      content: fc.oneof(texts, fc.constant(null)),
      tool_calls: fc.array(toolCall, { minLength: 1, maxLength: 2 }),
      reasoning_content: texts,
    },
    { requiredKeys: ['role', 'content'] },
  ),
  fc.record({ role: fc.constant('tool' as const), content: texts, tool_call_id: fc.constantFrom('callA0001') }),
);

const conversation = fc.array(message, { minLength: 1, maxLength: 7 });

const renderOptions: fc.Arbitrary<RenderOptions> = fc.record(
  {
    tools: fc.constantFrom<TemplateTool[]>([], sampleTools as TemplateTool[]),
    addGenerationPrompt: fc.boolean(),
    enableThinking: fc.boolean(),
  },
  { requiredKeys: [] },
);

function render(template: ChatTemplate, messages: TemplateMessage[], options: RenderOptions): string {
  try {
    return template.render(messages, { ...options, now: new Date(Date.UTC(2025, 0, 2)) });
  } catch (error) {
    return `error: ${(error as Error).message}`;
  }
}

describe('compiled chat templates', () => {
  for (const [name, text] of Object.entries(realTemplates)) {
    it(`${name}: renders what the interpreter renders for generated conversations (or is not compiled)`, () => {
      const compiled = new ChatTemplate(text, special, 'compiled');
      const interpreted = new ChatTemplate(text, special, 'interpreter');
      if (!compiled.compiles()) return;
      fc.assert(
        fc.property(conversation, renderOptions, (messages, options) => {
          expect(render(compiled, messages, options)).toBe(render(interpreted, messages, options));
        }),
        { numRuns: 400 },
      );
      expect(
        render(compiled, toolSession.messages as TemplateMessage[], { tools: sampleTools as TemplateTool[] }),
      ).toBe(render(interpreted, toolSession.messages as TemplateMessage[], { tools: sampleTools as TemplateTool[] }));
    });
  }

  it('compiles the templates the shard stage runs most (Qwen3, Llama 3.1, DeepSeek-V3.1)', () => {
    for (const name of ['qwen3', 'meta-llama-Llama-3.1-8B-Instruct.jinja', 'deepseek-ai-DeepSeek-V3.1.jinja'])
      expect({ name, compiles: new ChatTemplate(realTemplates[name], special).compiles() }).toEqual({
        name,
        compiles: true,
      });
  });

  /** Small templates, one construct each, over values of every kind. */
  const constructs = [
    '{{ x }}|{{ y }}',
    '{{ x == y }}{{ x != y }}',
    '{{ x and y }}|{{ x or y }}|{{ not x }}',
    '{{ x + y }}',
    '{{ x ~ y }}',
    '{{ x - y }}{{ x * y }}{{ x < y }}{{ x >= y }}',
    '{{ x in y }}{{ x not in y }}',
    '{{ x | length }}',
    '{{ x | tojson }}',
    '{{ x | tojson(indent=2) }}',
    '{{ x | tojson(ensure_ascii=true, separators=(",", ":")) }}',
    '{{ x | tojson(sort_keys=true) }}{{ x | tojson(indent=0) }}',
    '{{ x | trim }}{{ x | upper }}{{ x | string }}',
    '{{ x | items | tojson }}',
    '{{ x | join(", ") }}{{ x | join }}',
    '{{ x | first }}{{ x | last }}{{ x | reverse | tojson }}',
    '{{ x | default("d") }}{{ x | default("d", true) }}',
    '{{ x[0] }}{{ x[-1] }}{{ x["a"] }}{{ x.a }}',
    '{{ x[::-1] | tojson }}{{ x[1:] | tojson }}{{ x[:-1] | tojson }}',
    '{{ x.strip("\\n") }}|{{ x.lstrip() }}|{{ x.rstrip() }}|{{ x.split("a") | tojson }}|{{ x.split() | tojson }}',
    '{{ x.startswith("a") }}{{ x.endswith(("b", "c")) }}{{ x.replace("a", "b") }}{{ x.replace("a", "b", 1) }}',
    '{{ x.get("a") }}{{ x.get("z", "dflt") }}{{ x.items() | tojson }}{{ x.keys() | tojson }}',
    '{{ x is defined }}{{ x is none }}{{ x is string }}{{ x is mapping }}{{ x is iterable }}{{ x is sequence }}{{ x is not number }}',
    '{{ x if y else "no" }}|{{ x if y }}',
    '{% if x %}T{% elif y %}E{% else %}F{% endif %}',
    '{% for i in x %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ i }},{% else %}empty{% endfor %}',
    '{% for i in x if i %}{{ i }}{{ loop.length }}{% endfor %}',
    '{% for k, v in x | items %}{{ k }}={{ v }};{% endfor %}',
    '{% set ns = namespace(n=0, s="") %}{% for i in x %}{% set ns.n = ns.n + 1 %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }}{{ ns.s }}',
    '{% for i in x %}{% if loop.first %}{% set seen = i %}{% endif %}{{ seen }}{% endfor %}{{ seen }}',
    '{% set a, b = x %}{{ a }}{{ b }}',
    '{% set t %}block {{ x }}{% endset %}{{ t }}',
    '{{ [x, y] | tojson }}{{ {"k": x} | tojson }}',
    '{{ -x }}{{ x | string }}',
    '{{ strftime_now("%Y-%m-%d") }}{{ range(3) | tojson }}',
    // Compiled, but left to the interpreter when run (sort, output of a list).
    '{{ x | sort | tojson }}{{ x }}',
  ];
  const value = fc.oneof(
    fc.constantFrom(undefined, null, true, false, 0, 1, -2, 2.5, '', 'a', 'abc', 'a\nb', ' pad ', 'ba', "it's"),
    fc.constantFrom(new PythonFloat(99), new PythonFloat(0), new PythonFloat(-0), 1e16, 1e21),
    fc.constant(new PythonInteger('12345678901234567890')),
    fc.array(fc.constantFrom('a', 'b', 1, null, true, new PythonFloat(2)), { maxLength: 3 }),
    fc.record(
      { a: fc.constantFrom('A', 1, null, new PythonFloat(1)), b: fc.constantFrom(true, 'x') },
      { requiredKeys: [] },
    ),
  );

  it('renders each construct as the interpreter does for values of every kind', () => {
    for (const text of constructs) {
      expect({ text, compiles: compileProgram(new Template(text).parsed) !== undefined }).toEqual({
        text,
        compiles: true,
      });
      const compiled = new ChatTemplate(text, {}, 'compiled');
      const interpreted = new ChatTemplate(text, {}, 'interpreter');
      fc.assert(
        fc.property(value, value, (x, y) => {
          const options = { variables: { x, y } };
          expect({ text, x, y, out: render(compiled, [], options) }).toEqual({
            text,
            x,
            y,
            out: render(interpreted, [], options),
          });
        }),
        { numRuns: 150 },
      );
    }
  });

  it('leaves what it does not model to the interpreter at compile time (macros, floats, division, loop controls)', () => {
    for (const text of [
      '{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1) }}',
      '{{ 1.5 }}',
      '{{ x / 2 }}',
      '{% for i in x %}{% break %}{% endfor %}',
      '{{ x is callable }}',
    ])
      expect({ text, compiled: compileProgram(new Template(text).parsed) !== undefined }).toEqual({
        text,
        compiled: false,
      });
  });

  it('returns the interpreter’s text and stops compiling when an early render differs; fails on a later sampled difference', () => {
    const wrong = (template: ChatTemplate) =>
      (template as unknown as { compiledPrograms: Map<string, unknown> }).compiledPrograms.set(
        'default\u0000full',
        () => 'wrong',
      );
    const early = new ChatTemplate('{{ x }}', {});
    wrong(early);
    expect(early.render([], { variables: { x: 'a' } })).toBe('a');
    expect(early.compiles()).toBe(false);
    const late = new ChatTemplate('{{ x }}', {});
    for (let index = 0; index < 16; index++) expect(late.render([], { variables: { x: 'a' } })).toBe('a');
    wrong(late);
    let failure: unknown;
    for (let index = 0; index < 200 && failure === undefined; index++) {
      try {
        late.render([], { variables: { x: 'a' } });
      } catch (error) {
        failure = error;
      }
    }
    expect((failure as Error).message).toContain('TEMPLATE_ENGINE_MISMATCH');
  });
});
