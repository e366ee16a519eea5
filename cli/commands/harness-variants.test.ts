import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { harnessHash } from '../../shared/harness/harness-hash';
import { variantMappingSchema } from '../../shared/harness/hsa/variant-mapping';
import { loadHarness } from '../../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { runHatInProcess } from '../../test/support/hat-in-process';

const hat = (...argv: string[]) => runHatInProcess({}, ...argv);

async function tree(directory: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(directory, { recursive: true, withFileTypes: true })) {
    if (entry.isFile())
      files[join(entry.parentPath, entry.name).slice(directory.length)] = await readFile(
        join(entry.parentPath, entry.name),
        'utf8',
      );
  }
  return files;
}

let scratch: string;
const sample = sampleHarnessDirectory();

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'hat-cli-variants-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('hat harness variants', () => {
  it('writes K loadable variant directories with mapping.json, which hat harness diff compares with the original', async () => {
    const out = join(scratch, 'a');
    const result = await hat('harness', 'variants', sample, '--n', '3', '--seed', '7', '--out', out);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain(`3 variants of live-host 1.0.0 (seed 7) in ${out}`);
    const directories = (await readdir(out)).filter((name) => name.startsWith('variant-')).sort();
    expect(directories).toHaveLength(3);
    const original = harnessHash(await loadHarness(sample));
    for (const directory of directories) {
      const variant = await loadHarness(join(out, directory));
      expect(harnessHash(variant)).not.toBe(original);
      const mapping = variantMappingSchema.parse(
        JSON.parse(await readFile(join(out, directory, 'mapping.json'), 'utf8')),
      );
      expect(mapping.sourceHash).toBe(original);
      expect(directory).toMatch(/^variant-0\d-[0-9a-f]{8}$/);
    }
    const diff = await hat('harness', 'diff', sample, join(out, directories[0]));
    expect(diff.code).toBe(0);
    expect(diff.stdout).toMatch(/^--- live-host 1\.0\.0 \([0-9a-f]{12}\)\n\+\+\+ live-host 1\.0\.0\+hsa\.[0-9a-f]{8}/);
  });

  it('gives the same bytes for the same seed and applies exactly the families asked for', async () => {
    await hat(
      'harness',
      'variants',
      sample,
      '--n',
      '2',
      '--seed',
      's',
      '--out',
      join(scratch, 'b1'),
      '--families',
      'tool_schemas,hooks',
    );
    await hat(
      'harness',
      'variants',
      sample,
      '--n',
      '2',
      '--seed',
      's',
      '--out',
      join(scratch, 'b2'),
      '--families',
      'tool_schemas,hooks',
    );
    const first = await tree(join(scratch, 'b1'));
    expect(await tree(join(scratch, 'b2'))).toEqual(first);
    const summary = JSON.parse(first['/variants.json']) as { variants: Array<{ families: string[] }> };
    expect(summary.variants.map((variant) => variant.families)).toEqual([
      ['tool_schemas', 'hooks'],
      ['tool_schemas', 'hooks'],
    ]);
  });

  it('exits 2 naming the unknown family', async () => {
    const result = await hat(
      'harness',
      'variants',
      sample,
      '--n',
      '1',
      '--seed',
      '1',
      '--out',
      join(scratch, 'c'),
      '--families',
      'tools,hooks',
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      '--families: unknown family tools; use a comma-separated list of: skill_ids, skill_content, tool_schemas, prompt_structure, hooks',
    );
  });
});
