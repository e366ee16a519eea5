import fc from 'fast-check';
import { checkIfevalResponse } from './check-ifeval-response';
import type { IfevalItem } from './ifeval-types';
import { loadIfevalItems } from './load-ifeval-items';

/** One shipped item per instruction type, so every checker meets random responses. */
function oneItemPerInstruction(): IfevalItem[] {
  const seen = new Set<string>();
  const chosen: IfevalItem[] = [];
  for (const item of loadIfevalItems()) {
    const index = item.instructionIds.findIndex((id) => !seen.has(id));
    if (index === -1) continue;
    seen.add(item.instructionIds[index]);
    chosen.push({ ...item, instructionIds: [item.instructionIds[index]], kwargs: [item.kwargs[index]] });
  }
  return chosen;
}

const pieces = [
  '*',
  '**',
  '***',
  '******',
  '\n',
  '\n\n',
  ' ',
  ',',
  '.',
  '"',
  '<<',
  '>>',
  '[x]',
  '- ',
  'P.S.',
  'Section 1',
  '{"a": 1}',
  '```',
  'WORD',
  'word',
  'My answer is yes.',
];
const responses = fc
  .array(fc.oneof(fc.constantFrom(...pieces), fc.string({ maxLength: 6 })), { maxLength: 25 })
  .map((parts) => parts.join(''));

describe('checkIfevalResponse', () => {
  const items = oneItemPerInstruction();

  it('covers all 25 instruction types', () => {
    expect(items).toHaveLength(25);
  });

  it('never scores loose below strict, and a prompt is followed exactly when all its instructions are', () => {
    fc.assert(
      fc.property(fc.constantFrom(...items), responses, (item, response) => {
        const result = checkIfevalResponse(item, response);
        result.strict.forEach((followed, index) => {
          if (followed) expect(result.loose[index]).toBe(true);
        });
        expect(result.followedStrict).toBe(result.strict.every(Boolean));
        expect(result.followedLoose).toBe(result.loose.every(Boolean));
      }),
      { numRuns: 300, seed: 13 },
    );
  });

  it('checks a real item: key 1000 asks for no commas, 3 highlights and 300+ words', () => {
    const item = loadIfevalItems().find((candidate) => candidate.key === 1000)!;
    const words = Array.from({ length: 300 }, (_, index) => `word${index}`).join(' ');
    const good = `*first part* *second part* *third part* ${words}`;
    expect(checkIfevalResponse(item, good)).toMatchObject({ followedStrict: true, followedLoose: true });
    expect(checkIfevalResponse(item, `${good}, with a comma`)).toMatchObject({
      strict: [false, true, true],
      followedLoose: false,
    });
  });
});
