import { Rng } from '../../random/rng';
import { harnessHash } from '../harness-hash';
import type { Harness } from '../harness-types';
import { loadHarness } from '../load-harness';
import { sampleHarnessDirectory } from '../sample-harness';
import { generateVariant, selectFamilies } from './generate-variant';
import { defaultFamilyWeights, familiesInApplyOrder, hsaOperators } from './hsa-operators';
import { hsaFamilies } from './variant-mapping';

/** The operator table: one entry per family, the order they run in, and each one alone makes a variant of its own family. */

let sample: Harness;
beforeAll(async () => {
  sample = await loadHarness(sampleHarnessDirectory());
});

it('has one operator per family, named as its key, with distinct apply ranks and a summary', () => {
  expect(Object.keys(hsaOperators).sort()).toEqual([...hsaFamilies].sort());
  for (const family of hsaFamilies) {
    expect(hsaOperators[family].family).toBe(family);
    expect(hsaOperators[family].summary.length).toBeGreaterThan(20);
  }
  expect(new Set(hsaFamilies.map((family) => hsaOperators[family].applyRank)).size).toBe(hsaFamilies.length);
});

it('runs renaming families before content rewrites, and draws weights from the table', () => {
  expect(familiesInApplyOrder).toEqual(['tool_schemas', 'skill_ids', 'prompt_structure', 'hooks', 'skill_content']);
  expect(defaultFamilyWeights).toEqual({
    skill_ids: 0.6,
    skill_content: 0.6,
    tool_schemas: 0.6,
    prompt_structure: 0.6,
    hooks: 0.6,
  });
  const drawn = selectFamilies({ hooks: 1, skill_ids: 1 }, new Rng('order'));
  expect(drawn).toEqual(['skill_ids', 'hooks']);
});

it.each([...hsaFamilies])('%s alone makes a valid variant that records only its own family', (family) => {
  const variant = generateVariant(sample, { families: [family], rng: new Rng(`operator/${family}`) });
  expect(variant.mapping.families).toEqual([family]);
  expect(harnessHash(variant.harness)).not.toBe(harnessHash(sample));
});
