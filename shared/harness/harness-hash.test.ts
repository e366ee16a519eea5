import { harnessHash } from './harness-hash';
import type { Harness } from './harness-types';
import { loadHarness } from './load-harness';
import { sampleHarnessDirectory } from './sample-harness';

let sample: Harness;

beforeAll(async () => {
  sample = await loadHarness(sampleHarnessDirectory());
});

/** Rebuilds every object with its keys in reverse order: same content, different key order. */
function reverseKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map(reverseKeys) as T;
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .reverse()
        .map(([key, item]) => [key, reverseKeys(item)]),
    ) as T;
  }
  return value;
}

function withFirstTool(harness: Harness, edit: (tool: Harness['tools'][number]) => Harness['tools'][number]): Harness {
  return { ...harness, tools: harness.tools.map((tool, index) => (index === 0 ? edit(tool) : tool)) };
}

describe('harnessHash', () => {
  it('is a sha256 hex digest, stable across loads and key order', async () => {
    const hash = harnessHash(sample);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(harnessHash(await loadHarness(sampleHarnessDirectory()))).toBe(hash);
    expect(harnessHash(reverseKeys(sample))).toBe(hash);
  });

  it('ignores id, version and meta (not model-visible)', () => {
    expect(harnessHash({ ...sample, id: 'renamed', version: '9.9.9', meta: { parent: 'x' } })).toBe(
      harnessHash(sample),
    );
  });

  const changes: Array<[string, (harness: Harness) => Harness]> = [
    [
      'a tool description',
      (harness) => withFirstTool(harness, (tool) => ({ ...tool, description: `${tool.description}。` })),
    ],
    ['a tool name', (harness) => withFirstTool(harness, (tool) => ({ ...tool, name: 'fetch_item' }))],
    [
      'a parameter name',
      (harness) =>
        withFirstTool(harness, (tool) => ({
          ...tool,
          parameters: {
            ...tool.parameters,
            properties: { sku: (tool.parameters.properties as Record<string, unknown>).item_id },
            required: ['sku'],
          },
        })),
    ],
    [
      'a binding (not model-visible, changes execution)',
      (harness) =>
        withFirstTool(harness, (tool) => ({
          ...tool,
          binding: { ...tool.binding, arguments: { item_id: 'item_id' } },
        })),
    ],
    ['the tool order', (harness) => ({ ...harness, tools: [...harness.tools].reverse() })],
    [
      'a skill body',
      (harness) => ({
        ...harness,
        skills: harness.skills.map((skill, index) =>
          index === 0 ? { ...skill, body: `${skill.body}\n6. 多说一句。` } : skill,
        ),
      }),
    ],
    [
      'a hook text',
      (harness) => ({
        ...harness,
        hooks: harness.hooks.map((hook, index) => (index === 0 ? { ...hook, text: `${hook.text}!` } : hook)),
      }),
    ],
    [
      'a hook placement',
      (harness) => ({
        ...harness,
        hooks: harness.hooks.map((hook, index) =>
          index === 0 ? { ...hook, placement: 'system_message' as const } : hook,
        ),
      }),
    ],
    [
      'the section order',
      (harness) => ({ ...harness, prompt: { ...harness.prompt, sections: [...harness.prompt.sections].reverse() } }),
    ],
    [
      'a section title',
      (harness) => ({
        ...harness,
        prompt: {
          ...harness.prompt,
          sections: harness.prompt.sections.map((section, index) =>
            index === 0 ? { ...section, title: '人设' } : section,
          ),
        },
      }),
    ],
    ['the prompt format', (harness) => ({ ...harness, prompt: { ...harness.prompt, format: 'xml' as const } })],
    ['the persona name', (harness) => ({ ...harness, persona: { ...harness.persona, name: '小橙' } })],
  ];

  it.each(changes)('changes when %s changes', (_name, change) => {
    expect(harnessHash(change(sample))).not.toBe(harnessHash(sample));
  });
});
