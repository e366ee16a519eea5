import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import type { ToolSpec } from '../../trajectory/messages';
import {
  detectToolCallParser,
  hermesToolParser,
  llama3JsonToolParser,
  qwen3CoderToolParser,
  selectToolCallParser,
  type ToolCallParser,
} from './index';

const templateText = (file: string): string => readFileSync(join(__dirname, '__fixtures__', 'templates', file), 'utf8');

const weatherTool: ToolSpec = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather for a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string' },
        days: { type: 'integer' },
        metric: { type: 'boolean' },
        threshold: { type: 'number' },
        tags: { type: 'array', items: { type: 'string' } },
        options: { type: 'object' },
        note: { type: ['string', 'null'] },
      },
      required: ['city'],
    },
  },
};

/** The assistant turn as the real template renders it (conversation with the turn minus the prompt before it). */
function renderedAssistantTurn(
  file: string,
  toolCalls: Array<{ name: string; arguments: Record<string, unknown> }>,
  content = '',
): string {
  const template = new Template(templateText(file));
  const user = { role: 'user', content: 'What is the weather in Paris?' };
  const common = { tools: [weatherTool], bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' };
  const prompt = template.render({ ...common, messages: [user], add_generation_prompt: true });
  const full = template.render({
    ...common,
    messages: [
      user,
      { role: 'assistant', content, tool_calls: toolCalls.map((call) => ({ type: 'function', function: call })) },
    ],
    add_generation_prompt: false,
  });
  expect(full.startsWith(prompt)).toBe(true);
  // The end-of-turn token is a special token: decoding with skip_special_tokens drops it.
  return full.slice(prompt.length).replace(/<\|im_end\|>\n?$|<\|eot_id\|>$|<\|eom_id\|>$/, '');
}

describe('choosing the parser from the chat template', () => {
  it.each([
    ['Qwen-Qwen3-0.6B.jinja', 'hermes'],
    ['NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja', 'hermes'],
    ['Qwen3.5-4B.jinja', 'qwen3_coder'],
    ['Qwen3-Coder.original.jinja', 'qwen3_coder'],
    ['meta-llama-Llama-3.1-8B-Instruct.jinja', 'llama3_json'],
  ])('%s uses %s', (file, expected) => {
    expect(detectToolCallParser(templateText(file))?.name).toBe(expected);
    expect(selectToolCallParser('auto', templateText(file))?.name).toBe(expected);
  });

  it('finds no parser for a template of another format, and refuses an unknown name', () => {
    expect(selectToolCallParser('auto', templateText('mistralai-Mistral-Nemo-Instruct-2407.jinja'))).toBeNull();
    expect(selectToolCallParser('hermes', '')?.name).toBe('hermes');
    expect(() => selectToolCallParser('nope', '')).toThrow(/TOOL_PARSER_UNKNOWN.*hermes/);
  });
});

describe('round trip through the real templates', () => {
  it.each<[string, ToolCallParser]>([
    ['Qwen-Qwen3-0.6B.jinja', hermesToolParser],
    ['Qwen3.5-4B.jinja', qwen3CoderToolParser],
    ['Qwen3-Coder.original.jinja', qwen3CoderToolParser],
    ['meta-llama-Llama-3.1-8B-Instruct.jinja', llama3JsonToolParser],
  ])('%s: the calls a template renders parse back to the same calls', (file, parser) => {
    const args = { city: 'Paris', days: 3, metric: true, threshold: 0.5, tags: ['a', 'b'], options: { unit: 'C' } };
    const text = renderedAssistantTurn(file, [{ name: 'get_weather', arguments: args }]);
    const result = parser.parse(text, { tools: [weatherTool] });
    expect(result.malformed).toEqual([]);
    expect(result.toolCalls).toHaveLength(1);
    expect(result.toolCalls[0].function.name).toBe('get_weather');
    expect(JSON.parse(result.toolCalls[0].function.arguments)).toEqual(args);
  });

  it('Qwen3.5: two calls after some text keep the text before them as content, as generated (vLLM)', () => {
    const text = renderedAssistantTurn(
      'Qwen3.5-4B.jinja',
      [
        { name: 'get_weather', arguments: { city: 'Paris' } },
        { name: 'get_weather', arguments: { city: 'Rome', days: 2 } },
      ],
      'Let me check both.',
    );
    const result = qwen3CoderToolParser.parse(text, { tools: [weatherTool] });
    // The template closes the (empty) thinking block the generation prompt opened: that is content too (no reasoning parser here).
    expect(result.content).toBe('\n</think>\n\nLet me check both.\n\n');
    expect(result.malformed).toEqual([]);
    expect(result.toolCalls.map((call) => JSON.parse(call.function.arguments))).toEqual([
      { city: 'Paris' },
      { city: 'Rome', days: 2 },
    ]);
    expect(new Set(result.toolCalls.map((call) => call.id)).size).toBe(2);
  });
});

describe('Hermes / Qwen3 JSON in <tool_call> tags', () => {
  it('splits content and several calls; arguments become JSON strings', () => {
    const text =
      'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>';
    const result = hermesToolParser.parse(text);
    // vLLM: the text before the first call, as generated; arguments json.dumps-ed with its spaces.
    expect(result.content).toBe('Checking.\n');
    expect(result.toolCalls.map((call) => [call.function.name, call.function.arguments])).toEqual([
      ['get_weather', '{"city": "Paris"}'],
      ['get_time', '{}'],
    ]);
    expect(result.toolCalls[0]).toMatchObject({ type: 'function', id: expect.stringMatching(/^call_/) });
    expect(hermesToolParser.parse(text).toolCalls[0].id).toBe(result.toolCalls[0].id);
  });

  it('plain text is content only', () => {
    expect(hermesToolParser.parse('Just an answer.')).toEqual({
      content: 'Just an answer.',
      toolCalls: [],
      malformed: [],
    });
  });

  it('records invalid JSON, a missing name and missing arguments as malformed; then no call counts, as in vLLM', () => {
    const bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"</tool_call>';
    const noName = '<tool_call>{"arguments": {}}</tool_call>';
    const noArguments = '<tool_call>{"name": "x", "parameters": {}}</tool_call>';
    const good = '<tool_call>{"name": "ok", "arguments": {"a": 1}}</tool_call>';
    const text = `${bad}\n${noName}\n${noArguments}\n${good}`;
    const result = hermesToolParser.parse(text);
    expect(result.toolCalls).toEqual([]);
    expect(result.content).toBe(text);
    expect(result.malformed.map((entry) => entry.text)).toEqual([bad, noName, noArguments]);
    expect(result.malformed[0].reason).toMatch(/not valid JSON/);
    expect(result.malformed[1].reason).toMatch(/no "name"/);
    expect(result.malformed[2].reason).toMatch(/no "arguments"/);
    expect(result.malformed.every((entry) => !entry.truncated)).toBe(true);
  });

  it('arguments: vLLM json.dumps whatever the field holds; "checked" wants an object, reads either field name and a missing one as {}', () => {
    const reply = (args: string) => `<tool_call>{"name": "x", ${args}}</tool_call>`;
    const vllm = (args: string) => hermesToolParser.parse(reply(args)).toolCalls.map((call) => call.function.arguments);
    expect(vllm('"arguments": [1, 2.0]')).toEqual(['[1, 2.0]']);
    expect(vllm('"arguments": "{\\"a\\": 1}"')).toEqual(['"{\\"a\\": 1}"']);
    const checked = (args: string) => hermesToolParser.parse(reply(args), { arguments: 'checked' });
    expect(checked('"arguments": [1]').malformed[0].reason).toMatch(/must be a JSON object, got an array/);
    expect(checked('"arguments": "{\\"a\\": 1}"').toolCalls[0].function.arguments).toBe('{"a": 1}');
    expect(checked('"parameters": {"a": 1}').toolCalls[0].function.arguments).toBe('{"a": 1}');
    expect(checked('"other": 1').toolCalls[0].function.arguments).toBe('{}');
  });

  it('one bad call of two drops both and leaves the whole reply as content, as vLLM does', () => {
    const text =
      'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {\n</tool_call>';
    const result = hermesToolParser.parse(text);
    expect(result.toolCalls).toEqual([]);
    expect(result.content).toBe(text);
    expect(result.malformed).toEqual([
      expect.objectContaining({ truncated: false, reason: expect.stringMatching(/JSON/) }),
    ]);
  });

  it('a call whose JSON is complete but whose </tool_call> never came is a call, listed as truncated', () => {
    const result = hermesToolParser.parse('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n');
    expect(result.toolCalls.map((call) => [call.function.name, call.function.arguments])).toEqual([
      ['get_weather', '{"city": "Paris"}'],
    ]);
    expect(result.malformed).toEqual([expect.objectContaining({ truncated: true })]);
    expect(result.content).toBeNull();
  });

  it('an output cut inside a call is a truncated (partial) malformed call', () => {
    const result = hermesToolParser.parse('Sure.\n<tool_call>\n{"name": "get_weather", "argum');
    expect(result.toolCalls).toEqual([]);
    expect(result.malformed).toEqual([
      expect.objectContaining({ truncated: true, reason: expect.stringMatching(/ends inside a tool call/) }),
    ]);
    expect(result.content).toBe('Sure.\n<tool_call>\n{"name": "get_weather", "argum');
  });
});

describe('Qwen3-Coder / Qwen3.5 XML', () => {
  const call = (parameters: string, name = 'get_weather'): string =>
    `<tool_call>\n<function=${name}>\n${parameters}</function>\n</tool_call>`;

  it('types parameter values by the tool schema as vLLM does', () => {
    // `extra` first: vLLM ends a value at a </parameter> followed by a parameter the schema lists.
    const text = call(
      '<parameter=extra>\n42\n</parameter>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n7\n</parameter>\n<parameter=metric>\nFalse\n</parameter>\n' +
        '<parameter=threshold>\n2.0\n</parameter>\n<parameter=tags>\n["x", "y"]\n</parameter>\n<parameter=note>\nnull\n</parameter>\n',
    );
    const result = qwen3CoderToolParser.parse(text, { tools: [weatherTool] });
    expect(result.malformed).toEqual([]);
    // `extra` is not in the schema: it stays text, as vLLM keeps unknown parameters as strings.
    expect(JSON.parse(result.toolCalls[0].function.arguments)).toEqual({
      extra: '42',
      city: 'New York',
      days: 7,
      metric: false,
      threshold: 2,
      tags: ['x', 'y'],
      note: null,
    });
  });

  it('keeps multi-line string values and inner newlines', () => {
    const result = qwen3CoderToolParser.parse(call('<parameter=city>\nline one\nline two\n</parameter>\n'), {
      tools: [weatherTool],
    });
    expect(JSON.parse(result.toolCalls[0].function.arguments)).toEqual({ city: 'line one\nline two' });
  });

  it('without tools every value is text', () => {
    const result = qwen3CoderToolParser.parse(call('<parameter=days>\n7\n</parameter>\n'));
    expect(JSON.parse(result.toolCalls[0].function.arguments)).toEqual({ days: '7' });
  });

  it('lists a value that does not fit its type as malformed but still returns the call', () => {
    const result = qwen3CoderToolParser.parse(
      call('<parameter=city>\nParis\n</parameter>\n<parameter=days>\nthree\n</parameter>\n'),
      { tools: [weatherTool] },
    );
    expect(JSON.parse(result.toolCalls[0].function.arguments)).toEqual({ city: 'Paris', days: 'three' });
    expect(result.malformed).toEqual([
      expect.objectContaining({
        reason: 'parameter "days" of "get_weather": "three" is not an integer',
        truncated: false,
      }),
    ]);
  });

  it('records a block without <function=…> as malformed', () => {
    const text = 'Hmm <tool_call>\n{"name": "get_weather"}\n</tool_call>';
    const result = qwen3CoderToolParser.parse(text);
    expect(result.toolCalls).toEqual([]);
    expect(result.malformed[0]).toMatchObject({ reason: 'tool call has no <function=NAME> block', truncated: false });
    expect(result.content).toBe(text);
  });

  it.each([
    ['inside a parameter', '<tool_call>\n<function=get_weather>\n<parameter=city>\nPar', /no <\/function>/, 'Par'],
    [
      'before </tool_call>',
      '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n',
      /no <\/tool_call>/,
      'Paris',
    ],
  ])('an output cut %s still gives the call, as vLLM gives it, listed as truncated', (_, text, reason, city) => {
    const result = qwen3CoderToolParser.parse(`I will check.\n\n${text}`, { tools: [weatherTool] });
    expect(result.toolCalls.map((entry) => JSON.parse(entry.function.arguments))).toEqual([{ city }]);
    expect(result.malformed).toEqual([
      expect.objectContaining({ truncated: true, reason: expect.stringMatching(reason) }),
    ]);
    expect(result.content).toBe('I will check.\n\n');
  });

  it('an output cut before the function name is a truncated call and no call', () => {
    const result = qwen3CoderToolParser.parse('I will check.\n\n<tool_call>\n<func', { tools: [weatherTool] });
    expect(result.toolCalls).toEqual([]);
    expect(result.malformed).toEqual([
      expect.objectContaining({ truncated: true, reason: expect.stringMatching(/before <function=NAME>/) }),
    ]);
    expect(result.content).toContain('I will check.');
  });

  it('an untyped or string-or-null parameter keeps "42" as text, as vLLM does; a nullable one reads None as null', () => {
    const tool: ToolSpec = {
      type: 'function',
      function: {
        name: 'lookup',
        parameters: {
          type: 'object',
          properties: {
            untyped: { description: 'no type' },
            maybe: { anyOf: [{ type: 'string' }, { type: 'null' }] },
            absent: { anyOf: [{ type: 'string' }, { type: 'null' }] },
            word: { type: 'string' },
            count: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
            price: { type: 'number' },
          },
        },
      },
    };
    const text = call(
      '<parameter=untyped>\n42\n</parameter>\n<parameter=maybe>\n42\n</parameter>\n<parameter=absent>\nNone\n</parameter>\n' +
        '<parameter=word>\nnull\n</parameter>\n<parameter=count>\n7\n</parameter>\n<parameter=price>\n99.5\n</parameter>\n',
      'lookup',
    );
    const result = qwen3CoderToolParser.parse(text, { tools: [tool] });
    expect(result.malformed).toEqual([]);
    expect(result.toolCalls[0].function.arguments).toBe(
      '{"untyped": "42", "maybe": "42", "absent": null, "word": "null", "count": 7, "price": 99.5}',
    );
  });

  it('writes the arguments JSON as vLLM does: numbers typed by the schema, floats inside objects kept', () => {
    const result = qwen3CoderToolParser.parse(
      call(
        '<parameter=threshold>\n99.0\n</parameter>\n<parameter=options>\n{"ratio": 1.0, "ok": true}\n</parameter>\n',
      ),
      { tools: [weatherTool] },
    );
    expect(result.toolCalls[0].function.arguments).toBe('{"threshold": 99, "options": {"ratio": 1.0, "ok": true}}');
  });

  it('a </parameter> inside a value does not cut it: the value ends at the </parameter> before </function>', () => {
    const code = 'print("</parameter>")\nx = 1';
    const result = qwen3CoderToolParser.parse(call(`<parameter=city>\n${code}\n</parameter>\n`), {
      tools: [weatherTool],
    });
    expect(result.malformed).toEqual([]);
    expect(JSON.parse(result.toolCalls[0].function.arguments)).toEqual({ city: code });
  });

  it('a </tool_call> inside a value is text of the value, not the end of the call (not truncated)', () => {
    const value = 'Pa</tool_call>ris';
    const text = `${call(`<parameter=city>\n${value}\n</parameter>\n<parameter=days>\n2\n</parameter>\n`)}\nDone.`;
    const result = qwen3CoderToolParser.parse(text, { tools: [weatherTool] });
    expect(result.toolCalls.map((entry) => JSON.parse(entry.function.arguments))).toEqual([{ city: value, days: 2 }]);
    // vLLM's content stops at the first call: the text after it is listed, never dropped silently.
    expect(result.content).toBeNull();
    expect(result.malformed).toEqual([expect.objectContaining({ text: '\nDone.', truncated: false })]);
    const kept = qwen3CoderToolParser.parse(text, { tools: [weatherTool], content: 'around-calls' });
    expect([kept.content, kept.malformed]).toEqual(['Done.', []]);
  });

  it('a parameter without </parameter> ends at the next parameter of the tool and is listed as malformed', () => {
    const result = qwen3CoderToolParser.parse(call('<parameter=city>\nParis\n<parameter=days>\n2\n</parameter>\n'), {
      tools: [weatherTool],
    });
    expect(JSON.parse(result.toolCalls[0].function.arguments)).toEqual({ city: 'Paris', days: 2 });
    expect(result.malformed.map((entry) => [entry.reason, entry.truncated])).toEqual([
      ['parameter "city" of "get_weather" has no </parameter>', false],
    ]);
  });
});

describe('Llama 3.1 JSON', () => {
  it('parses a reply that is a JSON call with "parameters", with or without <|python_tag|>', () => {
    for (const prefix of ['', '<|python_tag|>']) {
      const result = llama3JsonToolParser.parse(
        `${prefix}{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}`,
      );
      expect(result).toMatchObject({ content: null, malformed: [] });
      expect(result.toolCalls.map((call) => [call.function.name, JSON.parse(call.function.arguments)])).toEqual([
        ['get_weather', { city: 'Paris', days: 2 }],
      ]);
    }
  });

  it('parses several calls separated by ";" and accepts "arguments"', () => {
    const result = llama3JsonToolParser.parse(
      '{"name": "a", "parameters": {"x": "}"}}; {"name": "b", "arguments": {}}',
    );
    expect(result.toolCalls.map((call) => [call.function.name, call.function.arguments])).toEqual([
      ['a', '{"x": "}"}'],
      ['b', '{}'],
    ]);
  });

  it('one bad call of two drops both and leaves the reply as content, as vLLM does', () => {
    const text = '{"name": "a", "parameters": {"x": 1}}; {"nam": "b"}';
    const result = llama3JsonToolParser.parse(text);
    expect(result.toolCalls).toEqual([]);
    expect(result.content).toBe(text);
    expect(result.malformed.map((entry) => entry.reason)).toEqual(['tool call has no "name" string']);
  });

  it('keeps floats as the model wrote them in the arguments JSON (vLLM writes json.dumps of them)', () => {
    const result = llama3JsonToolParser.parse('{"name": "a", "parameters": {"price": 99.0, "ratio": 0.5}}');
    expect(result.toolCalls[0].function.arguments).toBe('{"price": 99.0, "ratio": 0.5}');
  });

  it('a reply that does not start with a call is content, even if it mentions JSON later', () => {
    expect(llama3JsonToolParser.parse('The format is {"name": …}.')).toEqual({
      content: 'The format is {"name": …}.',
      toolCalls: [],
      malformed: [],
    });
  });

  it('records a cut-off call as truncated, and bad calls and trailing text as malformed', () => {
    const cut = llama3JsonToolParser.parse('{"name": "get_weather", "parameters": {"city": "Pa');
    expect(cut.malformed).toEqual([expect.objectContaining({ truncated: true })]);
    expect(cut.content).toBe('{"name": "get_weather", "parameters": {"city": "Pa');
    const bad = llama3JsonToolParser.parse('{"nam": "x"} trailing words');
    expect(bad.toolCalls).toEqual([]);
    expect(bad.malformed.map((entry) => entry.reason)).toEqual([
      'tool call has no "name" string',
      'text after the JSON tool calls',
    ]);
    const builtin = llama3JsonToolParser.parse('<|python_tag|>brave_search.call(query="x")');
    expect(builtin.malformed[0].reason).toMatch(/built-in tool call syntax/);
  });
});

describe('options stricter than vLLM, for training data (the defaults follow vLLM)', () => {
  const text =
    'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2.0}}\n</tool_call>\nThen I answer.';

  it('content: vLLM returns the text before the first call; "around-calls" keeps the text after it too, trimmed', () => {
    const vllm = hermesToolParser.parse(text);
    expect(vllm.content).toBe('Checking.\n');
    // Every byte vLLM leaves out is in a malformed entry.
    expect(vllm.malformed).toEqual([
      {
        text: '\nThen I answer.',
        reason: expect.stringContaining('vLLM leaves it out of the content'),
        truncated: false,
      },
    ]);
    const kept = hermesToolParser.parse(text, { content: 'around-calls' });
    expect([kept.content, kept.malformed]).toEqual(['Checking.\n\nThen I answer.', []]);
  });

  it('argumentsSpacing: json.dumps as vLLM writes it by default, "compact" without spaces', () => {
    for (const [parser, reply] of [
      [hermesToolParser, text],
      [llama3JsonToolParser, '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2.0}}'],
      [
        qwen3CoderToolParser,
        '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=options>\n{"days": 2.0}\n</parameter>\n</function>\n</tool_call>',
      ],
    ] as const) {
      const vllm = parser.parse(reply, { tools: [weatherTool] }).toolCalls[0].function.arguments;
      const compact = parser.parse(reply, { tools: [weatherTool], argumentsSpacing: 'compact' }).toolCalls[0].function
        .arguments;
      expect([parser.name, vllm.includes('": '), compact.includes(' ')]).toEqual([parser.name, true, false]);
      expect(JSON.parse(vllm)).toEqual(JSON.parse(compact));
      expect(vllm).toContain('2.0');
    }
  });
});
