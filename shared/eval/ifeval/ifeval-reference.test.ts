import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkIfevalResponse, loadIfevalItems, parseIfevalItems, scoreIfeval, type IfevalItemResult } from '.';

/**
 * Faithfulness: GPT-4's responses to IFEval (shipped by the reference repository) and the
 * per-instruction outcomes the reference implementation gave them (see data/ifeval/README.md).
 */
interface ReferenceRecord {
  key: number;
  response: string;
  referenceStrict: boolean[];
  referenceLoose: boolean[];
}

const records: ReferenceRecord[] = readFileSync(join(__dirname, '__fixtures__', 'gpt4-reference-results.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as ReferenceRecord);

/**
 * The one instruction where we knowingly differ: prompt 1122 asks for the character "#"; the
 * reference accepts only a-z and silently checks a randomly drawn letter instead, so its outcome
 * is not reproducible. We count the character the prompt names.
 */
const knownDifferences = new Set(['1122:keywords:letter_frequency']);

describe('IFEval data', () => {
  it('ships the 541 prompts with 25 instruction types, all valid', () => {
    const items = loadIfevalItems();
    expect(items).toHaveLength(541);
    expect(new Set(items.map((item) => item.key)).size).toBe(541);
    expect(new Set(items.flatMap((item) => item.instructionIds)).size).toBe(25);
    expect(items.reduce((sum, item) => sum + item.instructionIds.length, 0)).toBe(834);
  });
  it('names file, line and field of a bad record', () => {
    const text = [
      '{"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}',
      '{"key": 2, "prompt": "p", "instruction_id_list": ["keywords:frequency"], "kwargs": [{"keyword": "x"}]}',
      'not json',
    ].join('\n');
    expect(() => parseIfevalItems(text, 'mine.jsonl')).toThrow(
      /mine\.jsonl: line 2: kwargs\[0\]: "keywords:frequency" needs "frequency"[\s\S]*line 3/,
    );
  });
});

describe('faithfulness to the reference implementation on GPT-4 responses', () => {
  const items = new Map(loadIfevalItems().map((item) => [item.key, item]));
  const results: IfevalItemResult[] = records.map((record) =>
    checkIfevalResponse(items.get(record.key)!, record.response),
  );

  it('covers 540 prompts (all but 2785, revised after the GPT-4 run) and 832 instructions', () => {
    expect(results).toHaveLength(540);
    expect(results.reduce((sum, result) => sum + result.instructionIds.length, 0)).toBe(832);
  });

  it('gives every instruction the reference outcome, strict and loose, except the documented one', () => {
    const differences: string[] = [];
    results.forEach((result, index) => {
      const record = records[index];
      result.instructionIds.forEach((id, position) => {
        const label = `${record.key}:${id}`;
        if (knownDifferences.has(label)) return;
        if (result.strict[position] !== record.referenceStrict[position])
          differences.push(`${label} strict ${result.strict[position]}`);
        if (result.loose[position] !== record.referenceLoose[position])
          differences.push(`${label} loose ${result.loose[position]}`);
      });
    });
    expect(differences).toEqual([]);
  });

  it('reproduces the reference figures (strict exactly; loose differs by the one documented instruction)', () => {
    const scores = scoreIfeval(results);
    // Reference on these 540 prompts: 417/540 prompts and 697/832 instructions strict,
    // 430/540 and 712/832 loose (its published figures on 541 prompts: 76.89, 83.57, 79.30, 85.37).
    expect(scores.promptStrict).toBeCloseTo((100 * 417) / 540, 10);
    expect(scores.instructionStrict).toBeCloseTo((100 * 697) / 832, 10);
    expect(scores.promptLoose).toBeCloseTo((100 * 431) / 540, 10);
    expect(scores.instructionLoose).toBeCloseTo((100 * 713) / 832, 10);
    const referenceResults = records.map((record, index) => ({
      ...results[index],
      strict: record.referenceStrict,
      loose: record.referenceLoose,
    }));
    const reference = scoreIfeval(
      referenceResults.map((result) => ({
        ...result,
        followedStrict: result.strict.every(Boolean),
        followedLoose: result.loose.every(Boolean),
      })),
    );
    expect(
      [reference.promptStrict, reference.instructionStrict, reference.promptLoose, reference.instructionLoose].map(
        (figure) => figure.toFixed(2),
      ),
    ).toEqual(['77.22', '83.77', '79.63', '85.58']);
    expect(scores.perInstruction['punctuation:no_comma']).toEqual(reference.perInstruction['punctuation:no_comma']);
  });
});
