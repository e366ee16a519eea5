import fc from 'fast-check';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { harnessHash } from './harness-hash';
import type { Harness } from './harness-types';
import { loadHarness, loadHarnessFromFiles } from './load-harness';
import { sampleHarnessDirectory } from './sample-harness';
import { harnessToFiles, writeHarness } from './write-harness';

let sample: Harness;
let scratch: string;

beforeAll(async () => {
  sample = await loadHarness(sampleHarnessDirectory());
  scratch = await mkdtemp(join(tmpdir(), 'hat-harness-write-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('writeHarness / harnessToFiles', () => {
  it('round trips the sample through a directory without loss', async () => {
    const directory = join(scratch, 'sample');
    await writeHarness(sample, directory);
    const reloaded = await loadHarness(directory);
    expect(reloaded).toEqual(sample);
    expect(harnessHash(reloaded)).toBe(harnessHash(sample));
  });

  it('writes the same bytes twice (idempotent)', async () => {
    expect(harnessToFiles(sample)).toEqual(harnessToFiles(await loadHarness(sampleHarnessDirectory())));
    const first = harnessToFiles(sample);
    const second = harnessToFiles(loadHarnessFromFiles(first));
    expect(second).toEqual(first);
  });

  it('keeps a non-sorted skill and tool order, meta, and text that needs quoting', () => {
    const harness: Harness = {
      ...sample,
      version: '1.10',
      skills: [...sample.skills]
        .reverse()
        .map((skill, index) =>
          index === 0 ? { ...skill, body: '\n\n  indented first line\n---\ntrailing spaces   \n\n' } : skill,
        ),
      tools: [...sample.tools].reverse(),
      persona: { name: 'yes', style: 'key: value # not a comment' },
      meta: { parent: 'abc', families: ['tools', 'skills'], seed: 7 },
    };
    const files = harnessToFiles(harness);
    expect(files['harness.yaml']).toContain('order:');
    expect(loadHarnessFromFiles(files)).toEqual(harness);
  });

  it('leaves no order list when the order is the sorted default', () => {
    const sorted: Harness = {
      ...sample,
      skills: [...sample.skills].sort((a, b) => (a.id < b.id ? -1 : 1)),
      tools: [...sample.tools].sort((a, b) => (a.name < b.name ? -1 : 1)),
    };
    const files = harnessToFiles(sorted);
    expect(files['harness.yaml']).not.toContain('order:');
    expect(loadHarnessFromFiles(files)).toEqual(sorted);
  });

  it('removes skill and tool files of an earlier harness in the same directory, and nothing else', async () => {
    const directory = join(scratch, 'reused');
    await writeHarness(sample, directory);
    await writeFile(join(directory, 'README.md'), 'notes', 'utf8');
    const smaller: Harness = {
      ...sample,
      tools: sample.tools.filter((tool) => tool.name !== 'compare_items'),
      skills: sample.skills.map((skill) => ({
        ...skill,
        tools: skill.tools.filter((name) => name !== 'compare_items'),
      })),
    };
    await writeHarness(smaller, directory);
    expect(await readdir(join(directory, 'tools'))).not.toContain('compare_items.json');
    expect(await readFile(join(directory, 'README.md'), 'utf8')).toBe('notes');
    expect(await loadHarness(directory)).toEqual(smaller);
  });

  it('round trips arbitrary text in every free-text field (property)', () => {
    // Braces are left out: `{name}` in hook text is a placeholder and is validated.
    const text = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 40 })
      .filter((value) => value.trim() !== '' && !value.includes('{'));
    const body = fc.string({ unit: 'grapheme', maxLength: 200 }).filter((value) => value.trim() !== '');
    fc.assert(
      fc.property(text, text, body, text, text, (title, description, skillBody, hookText, toolDescription) => {
        const harness: Harness = {
          ...sample,
          prompt: {
            ...sample.prompt,
            sections: sample.prompt.sections.map((section, index) =>
              index === 1 ? { ...section, title, content: skillBody } : section,
            ),
          },
          skills: sample.skills.map((skill, index) =>
            index === 0 ? { ...skill, description, body: skillBody } : skill,
          ),
          tools: sample.tools.map((tool, index) => (index === 0 ? { ...tool, description: toolDescription } : tool)),
          hooks: sample.hooks.map((hook, index) => (index === 4 ? { ...hook, text: hookText } : hook)),
        };
        expect(loadHarnessFromFiles(harnessToFiles(harness))).toEqual(harness);
      }),
      { numRuns: 60, seed: 20240601 },
    );
  });
});
