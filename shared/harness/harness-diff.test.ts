import { diffHarnesses, formatHarnessDiff } from './harness-diff';
import type { Harness, ToolDefinition } from './harness-types';
import { loadHarness } from './load-harness';
import { sampleHarnessDirectory } from './sample-harness';

let sample: Harness;

beforeAll(async () => {
  sample = await loadHarness(sampleHarnessDirectory());
});

function tool(harness: Harness, name: string): ToolDefinition {
  const found = harness.tools.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`test setup: no tool ${name}`);
  return found;
}

function replaceTool(harness: Harness, name: string, edit: (tool: ToolDefinition) => ToolDefinition): Harness {
  return {
    ...harness,
    tools: harness.tools.map((candidate) => (candidate.name === name ? edit(candidate) : candidate)),
  };
}

function properties(definition: ToolDefinition): Record<string, Record<string, unknown>> {
  return definition.parameters.properties as Record<string, Record<string, unknown>>;
}

describe('diffHarnesses', () => {
  it('reports no differences for the same harness', () => {
    const diff = diffHarnesses(sample, structuredClone(sample));
    expect(diff.identical).toBe(true);
    expect(formatHarnessDiff(diff)).toMatch(/\nno differences\n$/);
  });

  it('detects a renamed tool with a renamed parameter through the binding', () => {
    const after = replaceTool(sample, 'get_item_detail', (definition) => ({
      ...definition,
      name: 'fetch_product',
      parameters: {
        ...definition.parameters,
        properties: { product_ref: properties(definition).item_id },
        required: ['product_ref'],
      },
      binding: { capability: 'item_detail', arguments: { product_ref: 'item_id' } },
    }));
    const diff = diffHarnesses(sample, after);
    expect(diff.identical).toBe(false);
    expect(diff.tools.renamed).toEqual([{ from: 'get_item_detail', to: 'fetch_product' }]);
    expect(diff.tools.added).toEqual([]);
    expect(diff.tools.removed).toEqual([]);
    expect(diff.tools.changed).toEqual([
      expect.objectContaining({
        id: 'fetch_product',
        previousId: 'get_item_detail',
        bindingChanged: true,
        parameters: [{ kind: 'renamed', from: 'item_id', to: 'product_ref' }],
      }),
    ]);
    const text = formatHarnessDiff(diff);
    expect(text).toContain(
      '  ~ tool get_item_detail -> fetch_product (renamed)\n      binding changed\n      parameter item_id -> product_ref (renamed)\n',
    );
  });

  it('reports parameter type, requirement, enum and description changes, and added or removed parameters', () => {
    const after = replaceTool(sample, 'search_items', (definition) => {
      const { max_price: _dropped, ...rest } = properties(definition);
      return {
        ...definition,
        description: '搜索商品。',
        parameters: {
          ...definition.parameters,
          properties: {
            ...rest,
            limit: { ...rest.limit, type: 'number' },
            category: { ...rest.category, enum: ['apparel', 'beauty', 'food'] },
            query: { ...rest.query, description: '关键词' },
            in_stock_only: { type: 'boolean' },
          },
          required: ['query', 'category'],
        },
      };
    });
    const diff = diffHarnesses(sample, after);
    const change = diff.tools.changed.find((entry) => entry.id === 'search_items');
    expect(change?.descriptionChanged).toBe(true);
    expect(change?.parameters).toEqual(
      expect.arrayContaining([
        { kind: 'type_changed', path: 'limit', before: 'integer', after: 'number' },
        { kind: 'required_changed', path: 'category', before: false, after: true },
        {
          kind: 'enum_changed',
          path: 'category',
          before: ['apparel', 'beauty', 'food', 'electronics', 'home'],
          after: ['apparel', 'beauty', 'food'],
        },
        { kind: 'description_changed', path: 'query' },
        { kind: 'removed', path: 'max_price', type: 'number' },
        { kind: 'added', path: 'in_stock_only', type: 'boolean' },
      ]),
    );
    const text = formatHarnessDiff(diff);
    expect(text).toContain('  ~ tool search_items\n      description changed\n');
    expect(text).toContain('      parameter limit: type integer -> number\n');
    expect(text).toContain('      parameter category: optional -> required\n');
    expect(text).toContain('      - parameter max_price (number)\n');
    expect(text).toContain('      + parameter in_stock_only (boolean)\n');
  });

  it('reports tools added and removed when nothing pairs them', () => {
    const extra: ToolDefinition = {
      name: 'get_weather',
      description: '查询天气',
      parameters: { type: 'object', properties: {} },
      binding: { capability: 'live_script' },
    };
    const after = {
      ...sample,
      tools: [...sample.tools.filter((definition) => definition.name !== 'compare_items'), extra],
    };
    const diff = diffHarnesses(sample, after);
    expect(diff.tools.removed).toEqual(['compare_items']);
    // get_weather shares live_script's capability but not get_live_script's name: a new tool, since get_live_script is still there.
    expect(diff.tools.added).toEqual(['get_weather']);
    expect(diff.tools.renamed).toEqual([]);
    expect(formatHarnessDiff(diff)).toMatch(/tools\n {2}\+ tool get_weather\n {2}- tool compare_items\n/);
  });

  it('detects renamed and changed skills, following tool renames in their tool lists', () => {
    const renamedTool = replaceTool(sample, 'get_after_sales_policy', (definition) => ({
      ...definition,
      name: 'lookup_policy',
    }));
    const after: Harness = {
      ...renamedTool,
      skills: renamedTool.skills.map((skill) => {
        if (skill.id === 'after_sales') return { ...skill, id: 'service_questions', tools: ['lookup_policy'] };
        if (skill.id === 'compliance') return { ...skill, body: `${skill.body}\n6. 新增一条。` };
        return skill;
      }),
      hooks: renamedTool.hooks.map((hook) =>
        hook.id === 'tool_facts_only'
          ? { ...hook, skills: ['product_qa', 'price_calculation', 'service_questions'] }
          : hook,
      ),
    };
    const diff = diffHarnesses(sample, after);
    expect(diff.tools.renamed).toEqual([{ from: 'get_after_sales_policy', to: 'lookup_policy' }]);
    expect(diff.skills.renamed).toEqual([{ from: 'after_sales', to: 'service_questions' }]);
    // Same tools modulo the rename, same skills modulo the rename: neither counts as a change.
    expect(diff.skills.changed).toEqual([{ id: 'compliance', fields: ['body'] }]);
    expect(diff.hooks.changed).toEqual([]);
    expect(formatHarnessDiff(diff)).toContain(
      'skills\n  ~ skill after_sales -> service_questions (renamed)\n  ~ skill compliance\n      body changed\n',
    );
  });

  it('reports hooks moved, renamed, with a changed constraint, added and removed', () => {
    const after: Harness = {
      ...sample,
      hooks: sample.hooks
        .filter((hook) => hook.id !== 'tool_facts_only')
        .map((hook) => {
          if (hook.id === 'reply_length')
            return {
              ...hook,
              event: 'user_message' as const,
              placement: 'system_message' as const,
              constraint: { type: 'max_chars' as const, value: 80 },
            };
          if (hook.id === 'persona_tone') return { ...hook, id: 'host_voice' };
          return hook;
        })
        .concat([
          {
            id: 'no_links',
            event: 'before_reply',
            placement: 'system_message',
            when: 'always',
            text: '不要发链接。',
            constraint: { type: 'none' },
          },
        ]),
    };
    const diff = diffHarnesses(sample, after);
    expect(diff.hooks.added).toEqual(['no_links']);
    expect(diff.hooks.removed).toEqual(['tool_facts_only']);
    expect(diff.hooks.renamed).toEqual([{ from: 'persona_tone', to: 'host_voice' }]);
    expect(diff.hooks.changed).toEqual([
      {
        id: 'reply_length',
        moved: {
          before: { event: 'before_reply', placement: 'user_suffix' },
          after: { event: 'user_message', placement: 'system_message' },
        },
        constraint: { before: { type: 'max_chars', value: 60 }, after: { type: 'max_chars', value: 80 } },
        textChanged: false,
        skillsChanged: false,
      },
    ]);
    const text = formatHarnessDiff(diff);
    expect(text).toContain(
      '  ~ hook reply_length\n      moved: before_reply/user_suffix -> user_message/system_message\n      constraint: max_chars 60 -> max_chars 80\n',
    );
    expect(text).toContain('  ~ hook persona_tone -> host_voice (renamed)\n');
  });

  it('reports the prompt format, section order, renamed sections and changed titles', () => {
    const sections = [...sample.prompt.sections];
    [sections[0], sections[1]] = [sections[1], sections[0]];
    const after: Harness = {
      ...sample,
      prompt: {
        format: 'xml',
        sections: sections.map((section) => {
          if (section.id === 'skills') return { ...section, id: 'abilities' };
          if (section.id === 'rules') return { ...section, title: '规则' };
          return section;
        }),
      },
    };
    const diff = diffHarnesses(sample, after);
    expect(diff.format).toEqual({ before: 'markdown', after: 'xml' });
    expect(diff.sections.renamed).toEqual([{ from: 'skills', to: 'abilities' }]);
    expect(diff.sections.changed).toEqual([{ id: 'rules', fields: ['title'] }]);
    expect(diff.sections.reordered?.after.slice(0, 3)).toEqual(['rules', 'persona', 'abilities']);
    const text = formatHarnessDiff(diff);
    expect(text).toContain(
      'prompt\n  format: markdown -> xml\n  ~ section skills -> abilities (renamed)\n  ~ section rules\n      title changed\n  order: persona, rules, skills,',
    );
    expect(diff.tools).toEqual({ added: [], removed: [], renamed: [], changed: [] });
  });

  it('pairs a renamed tool with the candidate whose arguments match best', () => {
    const quote = tool(sample, 'quote_final_price');
    const after: Harness = {
      ...sample,
      tools: sample.tools
        .filter((definition) => definition.name !== 'quote_final_price')
        .concat([
          { ...quote, name: 'price_with_coupons' },
          {
            ...quote,
            name: 'price_decoy',
            parameters: { type: 'object', properties: { item_id: properties(quote).item_id } },
          },
        ]),
    };
    const diff = diffHarnesses(sample, after);
    expect(diff.tools.renamed).toEqual([{ from: 'quote_final_price', to: 'price_with_coupons' }]);
    expect(diff.tools.added).toEqual(['price_decoy']);
  });
});
