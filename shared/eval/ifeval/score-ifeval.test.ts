import { checkIfevalResponse } from './check-ifeval-response';
import type { IfevalItem } from './ifeval-types';
import { scoreIfeval } from './score-ifeval';

const items: IfevalItem[] = [
  { key: 1, prompt: 'p1', instructionIds: ['punctuation:no_comma', 'startend:quotation'], kwargs: [{}, {}] },
  { key: 2, prompt: 'p2', instructionIds: ['detectable_format:title'], kwargs: [{}] },
];

describe('scoreIfeval', () => {
  it('computes prompt-level and instruction-level figures, strict and loose, by hand', () => {
    const results = [
      // no_comma followed; quotation only once the "**" are removed (loose).
      checkIfevalResponse(items[0], '**"No commas here."**'),
      // no title at all.
      checkIfevalResponse(items[1], 'An answer without a title.'),
    ];
    expect(results[0]).toMatchObject({
      strict: [true, false],
      loose: [true, true],
      followedStrict: false,
      followedLoose: true,
    });
    const scores = scoreIfeval(results);
    expect(scores).toEqual({
      count: 2,
      promptStrict: 0,
      instructionStrict: (100 * 1) / 3,
      promptLoose: 50,
      instructionLoose: (100 * 2) / 3,
      perInstruction: {
        'punctuation:no_comma': { count: 1, strict: 1, loose: 1 },
        'startend:quotation': { count: 1, strict: 0, loose: 1 },
        'detectable_format:title': { count: 1, strict: 0, loose: 0 },
      },
    });
  });
  it('gives zeros, not NaN, for no results', () => {
    expect(scoreIfeval([])).toMatchObject({ count: 0, promptStrict: 0, instructionLoose: 0 });
  });
});
