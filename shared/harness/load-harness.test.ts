import { ValidationError, formatProblem } from '../errors';
import { readHarnessFiles, type HarnessFiles } from './harness-files';
import { loadHarness, loadHarnessFromFiles, validateHarness } from './load-harness';
import { sampleHarnessDirectory } from './sample-harness';

let sample: HarnessFiles;

beforeAll(async () => {
  sample = await readHarnessFiles(sampleHarnessDirectory());
});

/** A copy of the sample's files with some edits; `undefined` deletes a file. */
function edited(edits: Record<string, (text: string) => string | undefined>): HarnessFiles {
  const files = { ...sample };
  for (const [path, edit] of Object.entries(edits)) {
    const text = edit(files[path] ?? '');
    if (text === undefined) delete files[path];
    else files[path] = text;
  }
  return files;
}

function replaceOnce(from: string, to: string): (text: string) => string {
  return (text) => {
    if (!text.includes(from)) throw new Error(`test setup: ${JSON.stringify(from)} not found`);
    return text.replace(from, to);
  };
}

function editJson(edit: (value: Record<string, any>) => void): (text: string) => string {
  return (text) => {
    const value = JSON.parse(text) as Record<string, any>;
    edit(value);
    return JSON.stringify(value, null, 2);
  };
}

/** The problem lines a user sees when loading fails (none when it loads). */
function problemLines(files: HarnessFiles): string[] {
  try {
    loadHarnessFromFiles(files, 'sample');
    return [];
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    expect(error.code).toBe('BAD_HARNESS');
    expect(error.exitCode).toBe(2);
    return error.problems.map(formatProblem);
  }
}

function lineOf(text: string, needle: string): number {
  const index = text.split('\n').findIndex((line) => line.includes(needle));
  if (index < 0) throw new Error(`test setup: ${needle} not found`);
  return index + 1;
}

describe('loadHarness on the sample live-host harness', () => {
  it('loads every skill, tool, hook and section in the declared order', async () => {
    const harness = await loadHarness(sampleHarnessDirectory());
    expect(harness.id).toBe('live-host');
    expect(harness.persona.name).toBe('小桃');
    expect(harness.prompt.sections.map((section) => section.kind)).toEqual([
      'persona',
      'rules',
      'skills',
      'tools_guide',
      'constraints',
      'room_context',
    ]);
    expect(harness.tools.map((tool) => [tool.name, tool.binding.capability])).toEqual([
      ['get_item_detail', 'item_detail'],
      ['search_items', 'item_search'],
      ['get_sku_stock', 'sku_stock'],
      ['get_promotions', 'promotions'],
      ['quote_final_price', 'price_quote'],
      ['recommend_size', 'size_recommendation'],
      ['compare_items', 'item_comparison'],
      ['get_after_sales_policy', 'policy'],
      ['get_live_script', 'live_script'],
    ]);
    expect(harness.skills.map((skill) => skill.id).sort()).toEqual(
      [
        'after_sales',
        'compliance',
        'engagement_chat',
        'price_calculation',
        'product_qa',
        'promotion_push',
        'size_advice',
      ].sort(),
    );
    expect(harness.hooks.map((hook) => hook.constraint.type)).toEqual(
      expect.arrayContaining(['max_chars', 'must_mention', 'banned_terms', 'tone']),
    );
    expect(validateHarness(harness)).toEqual([]);
  });

  it('rejects a path that is not a directory', async () => {
    await expect(loadHarness(`${sampleHarnessDirectory()}/does-not-exist`)).rejects.toThrow(
      /\[BAD_HARNESS\] .*does-not-exist: not a harness directory/,
    );
  });
});

describe('each kind of problem names its file and path', () => {
  const cases: Array<[string, () => HarnessFiles, RegExp]> = [
    ['missing harness.yaml', () => edited({ 'harness.yaml': () => undefined }), /^harness\.yaml: missing/],
    [
      'invalid YAML in harness.yaml',
      () => edited({ 'harness.yaml': replaceOnce('format: markdown', 'format: [markdown') }),
      /^harness\.yaml: line \d+: invalid YAML/,
    ],
    [
      'invalid YAML in skill front matter',
      () => edited({ 'skills/compliance.md': replaceOnce('tools: []', 'tools: [') }),
      /^skills\/compliance\.md: line \d+: invalid YAML/,
    ],
    [
      'missing skill front matter',
      () => edited({ 'skills/compliance.md': (text) => text.replace(/^---\n[\s\S]*?\n---\n/, '') }),
      /^skills\/compliance\.md: line 1: missing YAML front matter/,
    ],
    [
      'invalid JSON in a tool file',
      () => edited({ 'tools/get_live_script.json': (text) => text.replace(/}\s*$/, '') }),
      /^tools\/get_live_script\.json: (line \d+: )?invalid JSON/,
    ],
    [
      'invalid JSON Schema type',
      () =>
        edited({
          'tools/get_item_detail.json': editJson(
            (tool) => (tool.function.parameters.properties.item_id.type = 'strin'),
          ),
        }),
      /^tools\/get_item_detail\.json: line \d+: function\.parameters\.properties\.item_id\.type: invalid JSON Schema: must be equal to one of the allowed values/,
    ],
    [
      'unknown JSON Schema keyword (strict)',
      () =>
        edited({ 'tools/get_item_detail.json': editJson((tool) => (tool.function.parameters.requird = ['item_id'])) }),
      /^tools\/get_item_detail\.json: line \d+: function\.parameters: invalid JSON Schema: strict mode: unknown keyword: "requird"/,
    ],
    [
      'required name that is not a property (strict)',
      () => edited({ 'tools/get_item_detail.json': editJson((tool) => tool.function.parameters.required.push('sku')) }),
      /^tools\/get_item_detail\.json: line \d+: function\.parameters: invalid JSON Schema: .*required property "sku"/,
    ],
    [
      'parameters that are not an object schema',
      () =>
        edited({ 'tools/get_live_script.json': editJson((tool) => (tool.function.parameters = { type: 'string' })) }),
      /^tools\/get_live_script\.json: line \d+: function\.parameters\.type: function parameters must be a JSON Schema of type "object"/,
    ],
    [
      'duplicate tool name',
      () => edited({ 'tools/get_item_copy.json': () => sample['tools/get_item_detail.json'] }),
      /^tools\/get_item_detail\.json: line \d+: function\.name: duplicate tool "get_item_detail" \(also in tools\/get_item_copy\.json\)/,
    ],
    [
      'duplicate skill id',
      () => edited({ 'skills/compliance_copy.md': () => sample['skills/compliance.md'] }),
      /^skills\/compliance_copy\.md: line 2: id: duplicate skill "compliance" \(also in skills\/compliance\.md\)/,
    ],
    [
      'duplicate hook id',
      () => edited({ 'harness.yaml': replaceOnce('id: coupon_mention', 'id: reply_length') }),
      /^harness\.yaml: line \d+: hooks\[1\]\.id: duplicate hook "reply_length" \(also at hooks\[0\]\)/,
    ],
    [
      'duplicate section id',
      () => edited({ 'harness.yaml': replaceOnce('id: rules', 'id: persona') }),
      /^harness\.yaml: line \d+: prompt\.sections\[1\]\.id: duplicate section "persona"/,
    ],
    [
      'skill naming a tool that does not exist',
      () =>
        edited({
          'skills/after_sales.md': replaceOnce(
            'tools: [get_after_sales_policy]',
            'tools: [get_after_sales_policy, get_refund_status]',
          ),
        }),
      /^skills\/after_sales\.md: line 5: tools\[1\]: skill uses tool "get_refund_status", which does not exist/,
    ],
    [
      'hook naming a skill that does not exist',
      () =>
        edited({ 'harness.yaml': replaceOnce('skills: [engagement_chat]', 'skills: [engagement_chat, small_talk]') }),
      /^harness\.yaml: line \d+: hooks\[3\]\.skills\[1\]: hook names skill "small_talk", which does not exist/,
    ],
    [
      'empty section',
      () =>
        edited({
          'harness.yaml': (text) =>
            text.replace(/title: 基本规则\n {6}content: \|\n( {8}.*\n)+/, 'title: 基本规则\n      content: "  "\n'),
        }),
      /^harness\.yaml: line \d+: prompt\.sections\[1\]\.content: section "rules" is empty/,
    ],
    [
      'empty skill body',
      () => edited({ 'skills/compliance.md': (text) => text.replace(/\n---\n[\s\S]*$/, '\n---\n\n') }),
      /^skills\/compliance\.md: line \d+: \(body\): the skill instructions .* are empty/,
    ],
    [
      'unknown hook event',
      () => edited({ 'harness.yaml': replaceOnce('event: before_reply', 'event: on_reply') }),
      /^harness\.yaml: line \d+: hooks\[0\]\.event: unknown hook event "on_reply"; expected one of: session_start, /,
    ],
    [
      'unknown hook placement',
      () => edited({ 'harness.yaml': replaceOnce('placement: user_suffix', 'placement: user_prefix') }),
      /^harness\.yaml: line \d+: hooks\[0\]\.placement: unknown hook placement "user_prefix"/,
    ],
    [
      'unknown hook condition',
      () => edited({ 'harness.yaml': replaceOnce('when: campaign_active', 'when: campaign_running') }),
      /^harness\.yaml: line \d+: hooks\[1\]\.when: unknown hook condition "campaign_running"/,
    ],
    [
      'unknown constraint type',
      () => edited({ 'harness.yaml': replaceOnce('type: max_chars', 'type: max_length') }),
      /^harness\.yaml: line \d+: hooks\[0\]\.constraint\.type: unknown constraint type "max_length"; expected one of: max_chars, /,
    ],
    [
      'unknown capability',
      () =>
        edited({
          'tools/get_live_script.json': editJson((tool) => (tool['x-hat-binding'].capability = 'live_schedule')),
        }),
      /^tools\/get_live_script\.json: line \d+: x-hat-binding\.capability: unknown capability "live_schedule"; expected one of: item_detail, /,
    ],
    [
      'missing binding',
      () => edited({ 'tools/get_live_script.json': editJson((tool) => delete tool['x-hat-binding']) }),
      /^tools\/get_live_script\.json: line \d+: x-hat-binding: missing; expected object/,
    ],
    [
      'tool file name not matching the function name',
      () =>
        edited({
          'tools/get_live_script.json': () => undefined,
          'tools/live_script.json': () => sample['tools/get_live_script.json'],
        }),
      /^tools\/live_script\.json: line \d+: function\.name: function name "get_live_script" does not match the file name; rename the file to tools\/get_live_script\.json/,
    ],
    [
      'skill file name not matching the id',
      () =>
        edited({ 'skills/compliance.md': () => undefined, 'skills/ad_law.md': () => sample['skills/compliance.md'] }),
      /^skills\/ad_law\.md: line 2: id: skill id "compliance" does not match the file name/,
    ],
    [
      'misspelt key',
      () => edited({ 'harness.yaml': replaceOnce('    placement: user_suffix', '    placment: user_suffix') }),
      /^harness\.yaml: line \d+: hooks\[0\]\.placment: unknown key "placment"/,
    ],
    [
      'parameter that maps to no capability argument',
      () => edited({ 'tools/get_item_detail.json': (text) => text.replace(/"item_id"/g, '"itemid"') }),
      /^tools\/get_item_detail\.json: line \d+: function\.parameters\.properties\.itemid: parameter "itemid" is not an argument of capability item_detail \(arguments: item_id\)/,
    ],
    [
      'argument mapping to a name the capability lacks',
      () =>
        edited({
          'tools/get_item_detail.json': editJson((tool) => (tool['x-hat-binding'].arguments = { item_id: 'sku' })),
        }),
      /^tools\/get_item_detail\.json: line \d+: x-hat-binding\.arguments\.item_id: maps to "sku", not an argument of capability item_detail/,
    ],
    [
      'enum respelling to a value the capability lacks',
      () =>
        edited({
          'tools/search_items.json': editJson(
            (tool) => (tool['x-hat-binding'].enumValues = { category: { 服饰: 'clothes' } }),
          ),
        }),
      /^tools\/search_items\.json: line \d+: x-hat-binding\.enumValues\.category\.服饰: maps to "clothes", not a value of category/,
    ],
    [
      'unknown placeholder in hook text',
      () => edited({ 'harness.yaml': replaceOnce('不超过{value}个字', '不超过{limit}个字') }),
      /^harness\.yaml: line \d+: hooks\[0\]\.text: unknown placeholder \{limit\}/,
    ],
    [
      'user_suffix on an event without a user turn',
      () =>
        edited({
          'harness.yaml': replaceOnce(
            '    event: before_reply\n    placement: user_suffix',
            '    event: after_tool_result\n    placement: user_suffix',
          ),
        }),
      /^harness\.yaml: line \d+: hooks\[0\]\.placement: placement user_suffix needs a user turn/,
    ],
    [
      'system_prompt hook without a constraints section',
      () =>
        edited({
          'harness.yaml': (text) => text.replace(/ {4}- id: constraints\n( {6}.*\n)+?(?= {4}- id: room_context)/, ''),
        }),
      /^harness\.yaml: line \d+: hooks\[2\]\.placement: hook is placed in system_prompt but the prompt has no constraints section/,
    ],
    [
      'skill order that lists a missing skill',
      () =>
        edited({
          'harness.yaml': replaceOnce(
            'skills: [product_qa, price_calculation, promotion_push',
            'skills: [product_faq, product_qa, price_calculation, promotion_push',
          ),
        }),
      /^harness\.yaml: line \d+: order\.skills\[0\]: "product_faq" is listed but skills\/ has no such file/,
    ],
    [
      'file of the wrong kind under tools/',
      () => edited({ 'tools/notes.txt': () => 'draft' }),
      /^tools\/notes\.txt: unexpected file; tools\/ holds only tools\/<name>\.json files/,
    ],
  ];

  it.each(cases)('%s', (_name, files, expected) => {
    const lines = problemLines(files());
    expect(lines).toContainEqual(expect.stringMatching(expected));
  });

  it('points at the line of the offending value', () => {
    const files = edited({ 'harness.yaml': replaceOnce('event: before_reply', 'event: on_reply') });
    const line = lineOf(files['harness.yaml'], 'event: on_reply');
    expect(problemLines(files)).toContain(
      `harness.yaml: line ${line}: hooks[0].event: unknown hook event "on_reply"; expected one of: session_start, user_message, before_reply, after_tool_result`,
    );
  });
});

describe('one pass reports every problem', () => {
  it('lists problems from every file at once', () => {
    const files = edited({
      'harness.yaml': (text) =>
        text
          .replace('event: before_reply', 'event: on_reply')
          .replace('when: campaign_active', 'when: sometimes')
          .replace('id: rules', 'id: persona'),
      'skills/after_sales.md': replaceOnce('tools: [get_after_sales_policy]', 'tools: [get_refund_status]'),
      'skills/compliance.md': (text) => text.replace(/\n---\n[\s\S]*$/, '\n---\n'),
      'tools/get_item_detail.json': editJson((tool) => {
        tool.function.parameters.properties.item_id.type = 'text';
        tool['x-hat-binding'].capability = 'catalog';
      }),
      'tools/get_live_script.json': (text) => text.slice(0, 20),
    });
    let error: unknown;
    try {
      loadHarnessFromFiles(files, 'broken-harness');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ValidationError);
    const message = (error as ValidationError).message;
    expect(message).toMatch(/^\[BAD_HARNESS\] broken-harness: invalid harness \(\d+ problems\):/);
    for (const expected of [
      /harness\.yaml: line \d+: hooks\[0\]\.event: unknown hook event "on_reply"/,
      /harness\.yaml: line \d+: hooks\[1\]\.when: unknown hook condition "sometimes"/,
      /harness\.yaml: line \d+: prompt\.sections\[1\]\.id: duplicate section "persona"/,
      /skills\/after_sales\.md: line \d+: tools\[0\]: skill uses tool "get_refund_status"/,
      /skills\/compliance\.md: line \d+: \(body\): the skill instructions/,
      /tools\/get_item_detail\.json: line \d+: function\.parameters\.properties\.item_id\.type: invalid JSON Schema/,
      /tools\/get_item_detail\.json: line \d+: x-hat-binding\.capability: unknown capability "catalog"/,
      /tools\/get_live_script\.json: (line \d+: )?invalid JSON/,
    ]) {
      expect(message).toMatch(expected);
    }
    expect((error as ValidationError).problems).toHaveLength(8);
  });

  it('validates an in-memory harness in the files it would be written as', async () => {
    const harness = await loadHarness(sampleHarnessDirectory());
    const broken = {
      ...harness,
      skills: [...harness.skills, { ...harness.skills[0] }],
      hooks: harness.hooks.map((hook, index) => (index === 0 ? { ...hook, skills: ['nope'] } : hook)),
    };
    const lines = validateHarness(broken).map(formatProblem);
    expect(lines).toContain('skills/product_qa.md: duplicate skill "product_qa"; skill ids must be unique');
    expect(lines).toContainEqual(
      expect.stringMatching(/^harness\.yaml: line \d+: hooks\[0\]\.skills\[0\]: hook names skill "nope"/),
    );
  });
});
