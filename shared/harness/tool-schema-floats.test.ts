import { harnessHash } from './harness-hash';
import { readHarnessFiles, type HarnessFiles } from './harness-files';
import { loadHarnessFromFiles, validateHarness } from './load-harness';
import { renderHarness } from './render';
import { sampleHarnessDirectory } from './sample-harness';
import { harnessToFiles } from './write-harness';
import { generateVariant } from './hsa/generate-variant';
import { Rng } from '../random/rng';
import { PythonFloat, PythonInteger, stringifyJsonKeepingFloats } from '../text/python-values';

/**
 * A tool file's floats (`"minimum": 1.0`) stay floats from the file to the tools list a template
 * renders, through HSA variants and written variant files, while Ajv checks their numbers and
 * hashes see the numbers (a harness hashes as it did before floats were kept).
 */

let files: HarnessFiles;
/** The same harness with the floats' files as JSON.parse reads and JSON.stringify writes them (`1.0` is `1`). */
let integerFiles: HarnessFiles;
const path = 'tools/search_items.json';

function replaceOnce(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`test setup: ${JSON.stringify(from)} not found`);
  return text.replace(from, to);
}

beforeAll(async () => {
  const sample = await readHarnessFiles(sampleHarnessDirectory());
  let text = replaceOnce(
    sample[path],
    '"minimum": 0,',
    '"minimum": 0.0, "maximum": 1e16, "examples": [2.50, 1E3, 1e-7, 12345678901234567890],',
  );
  text = replaceOnce(text, '"minimum": 1,\n          "maximum": 10,', '"minimum": 1.0,\n          "maximum": 10.0,');
  files = { ...sample, [path]: text };
  integerFiles = { ...sample, [path]: JSON.stringify(JSON.parse(text), null, 2) };
});

/** The search tool's parameters as Python's json.dumps(..., separators=(',', ':')) writes them. */
const expectedSearch =
  '"max_price":{"type":"number","minimum":0.0,"maximum":1e+16,"examples":[2.5,1000.0,1e-07,12345678901234567890]';
const expectedLimit = '"limit":{"type":"integer","minimum":1.0,"maximum":10.0';

describe('tool schema floats', () => {
  it('load as Python reads them, render as written, and hash as their numbers', () => {
    const harness = loadHarnessFromFiles(files);
    const search = harness.tools.find((tool) => tool.name === 'search_items')!;
    const properties = search.parameters.properties as Record<string, Record<string, unknown>>;
    expect(properties.max_price.minimum).toBeInstanceOf(PythonFloat);
    expect((properties.max_price.examples as unknown[])[3]).toBeInstanceOf(PythonInteger);
    const tools = stringifyJsonKeepingFloats(renderHarness(harness, { campaignActive: false }).tools);
    expect(tools).toContain(expectedSearch);
    expect(tools).toContain(expectedLimit);
    expect(harnessHash(harness)).toBe(harnessHash(loadHarnessFromFiles(integerFiles)));
    expect(validateHarness(harness)).toEqual([]);
  });

  it('are written back as read, and a written harness loads equal', () => {
    const harness = loadHarnessFromFiles(files);
    const written = harnessToFiles(harness);
    expect(written[path]).toContain('"minimum": 1.0,\n          "maximum": 10.0,');
    const again = loadHarnessFromFiles(written);
    expect(stringifyJsonKeepingFloats(again.tools)).toBe(stringifyJsonKeepingFloats(harness.tools));
  });

  it('stay floats in HSA variants, which stay valid', () => {
    const harness = loadHarnessFromFiles(files);
    for (let index = 0; index < 8; index++) {
      const variant = generateVariant(harness, {
        families: ['tool_schemas', 'skill_ids', 'prompt_structure'],
        rng: new Rng(`floats/${index}`),
      });
      expect(validateHarness(variant.harness)).toEqual([]);
      const tools = stringifyJsonKeepingFloats(renderHarness(variant.harness, { campaignActive: false }).tools);
      expect(tools).toContain('"minimum":0.0,"maximum":1e+16,"examples":[2.5,1000.0,1e-07,12345678901234567890]');
      expect(tools).toContain('"minimum":1.0,"maximum":10.0');
      const reloaded = loadHarnessFromFiles(harnessToFiles(variant.harness));
      expect(stringifyJsonKeepingFloats(reloaded.tools)).toBe(stringifyJsonKeepingFloats(variant.harness.tools));
    }
  });
});
