import { checkInstruction, countWords, looseResponseVariants, validateInstructionSpec } from './check-instruction';
import { IFEVAL_INSTRUCTION_IDS } from './instruction-ids';
import { countSentences, splitSentences } from './punkt-sentence-splitter';
import { wordTokenize } from './treebank-word-tokenizer';

/** Cases follow the reference's semantics (google-research instruction_following_eval, lm-eval's port). */
const strict = (id: string, kwargs: Record<string, unknown>, response: string) =>
  checkInstruction(id, kwargs, 'prompt', response, 'strict');
const loose = (id: string, kwargs: Record<string, unknown>, response: string) =>
  checkInstruction(id, kwargs, 'prompt', response, 'loose');

describe('word counting (runs of Python \\w)', () => {
  it('splits at punctuation and hyphens, keeps digits and underscores', () => {
    expect(countWords('word1, word2, word3, word4.')).toBe(4);
    expect(countWords('\n  Hyphenated-word has two word counts.\n')).toBe(6);
    expect(countWords("don't snake_case 3.14")).toBe(5);
  });
  it('counts letters of any script but splits at combining marks, as Python does', () => {
    expect(countWords('Grüße aus Köln')).toBe(3);
    // Devanagari vowel signs are combining marks (Mc/Mn), not \w in Python: "हिन्दी" is three runs.
    expect(countWords('हिन्दी')).toBe(3);
  });
  it('length_constraints:number_words compares with "less than" and "at least"', () => {
    expect(strict('length_constraints:number_words', { num_words: 3, relation: 'less than' }, 'one two')).toBe(true);
    expect(strict('length_constraints:number_words', { num_words: 3, relation: 'less than' }, 'one two three')).toBe(
      false,
    );
    expect(strict('length_constraints:number_words', { num_words: 3, relation: 'at least' }, 'one-two three')).toBe(
      true,
    );
  });
});

describe('sentence counting (NLTK Punkt, English model)', () => {
  it.each([
    ['xx,x. xx,x! xx/x. x{x}x? x.', 5],
    ['xx,x! xxxx. x(x)x?', 3],
    ['xxxx. xx,x! xx|x. x&x x?', 4],
    ['xx-x]xx,x! x{x}xx,x.', 2],
  ])('%s has %i sentences (reference test cases)', (text, expected) => {
    expect(countSentences(text)).toBe(expected);
  });
  it('keeps known abbreviations, initials and numbers inside a sentence', () => {
    expect(splitSentences('Mr. Smith went to Washington. He met Dr. Jones at 5 p.m. today.')).toEqual([
      'Mr. Smith went to Washington.',
      'He met Dr. Jones at 5 p.m. today.',
    ]);
    expect(countSentences('The U.S. economy grew 2.5 percent. Prices rose.')).toBe(2);
  });
  it('splits at ? and ! and moves closing quotes back onto their sentence', () => {
    expect(splitSentences('He said "Stop!" Then he left. Why?')).toEqual(['He said "Stop!"', 'Then he left.', 'Why?']);
  });
  it('a line break alone is no sentence end, and text without an end mark is one sentence', () => {
    expect(countSentences('first line\nsecond line')).toBe(1);
    expect(countSentences('')).toBe(0);
    expect(countSentences('* bullet one.\n* bullet two.')).toBe(2);
  });
  it('length_constraints:number_sentences uses the count', () => {
    const kwargs = { num_sentences: 2, relation: 'less than' };
    expect(strict('length_constraints:number_sentences', kwargs, 'One sentence only.')).toBe(true);
    expect(strict('length_constraints:number_sentences', kwargs, 'One. Two.')).toBe(false);
    expect(strict('length_constraints:number_sentences', { num_sentences: 2, relation: 'at least' }, 'One. Two.')).toBe(
      true,
    );
  });
});

describe('paragraphs', () => {
  const id = 'length_constraints:number_paragraphs';
  it('splits at the *** divider; empty pieces only allowed at either end', () => {
    expect(strict(id, { num_paragraphs: 3 }, 'paragraph 1\n***\nparagraph 2\n***\nparagraph 3')).toBe(true);
    expect(strict(id, { num_paragraphs: 3 }, '***\nparagraph 1\n***\nparagraph 2\n***\nparagraph 3\n***')).toBe(true);
    expect(strict(id, { num_paragraphs: 2 }, 'paragraph 1\n***\n***\nparagraph 2')).toBe(false);
    // Blank lines are not dividers for this instruction.
    expect(strict(id, { num_paragraphs: 2 }, 'paragraph 1\n\nparagraph 2')).toBe(false);
  });
  it('nth_paragraph_first_word splits at "\\n\\n" and strips leading quotes and trailing punctuation', () => {
    const nth = 'length_constraints:nth_paragraph_first_word';
    const kwargs = { num_paragraphs: 2, nth_paragraph: 2, first_word: 'Summary' };
    expect(strict(nth, kwargs, 'Intro text.\n\n"Summary, at last." more')).toBe(true);
    expect(strict(nth, kwargs, 'Intro text.\n\nSummaries follow.')).toBe(false);
    expect(strict(nth, kwargs, 'Intro.\n\nSummary.\n\nThird.')).toBe(false);
    // Empty pieces do not count as paragraphs, but the nth is looked up among all pieces.
    expect(strict(nth, kwargs, 'Intro.\n\n\n\nSummary here.')).toBe(false);
    expect(
      strict(nth, { num_paragraphs: 2, nth_paragraph: 1, first_word: 'intro' }, 'Intro.\n\n\n\nSummary here.'),
    ).toBe(true);
  });
});

describe('format checks', () => {
  it('number_bullet_lists counts "* " and "- " lines, not "**" lines', () => {
    const id = 'detectable_format:number_bullet_lists';
    expect(strict(id, { num_bullets: 2 }, 'Intro:\n* one\n* two')).toBe(true);
    expect(strict(id, { num_bullets: 2 }, '  - one\n-two\n**bold** line')).toBe(true);
    expect(strict(id, { num_bullets: 2 }, '* one\n* two\n* three')).toBe(false);
    // Loose drops the "*": then no bullet is left.
    expect(loose(id, { num_bullets: 0 }, '* one\n* two')).toBe(true);
  });
  it('number_highlighted_sections counts *x* and **x**, not empty ones', () => {
    const id = 'detectable_format:number_highlighted_sections';
    expect(strict(id, { num_highlights: 2 }, 'This is *one* and *two*.')).toBe(true);
    expect(strict(id, { num_highlights: 1 }, 'Only **bold** here')).toBe(true);
    expect(strict(id, { num_highlights: 2 }, 'Only **bold** here')).toBe(false);
    expect(strict(id, { num_highlights: 1 }, 'Empty ** and * * and *\nbroken*')).toBe(false);
  });
  it('multiple_sections counts "<splitter> <number>" markers', () => {
    const id = 'detectable_format:multiple_sections';
    expect(strict(id, { section_spliter: 'Section', num_sections: 2 }, 'Section 1\nfoo\nSection 2\nbar')).toBe(true);
    expect(strict(id, { section_spliter: 'SECTION', num_sections: 2 }, 'Section 1\nfoo\nSection 2\nbar')).toBe(false);
    expect(strict(id, { section_spliter: 'Day', num_sections: 3 }, 'Day 1 Day 2')).toBe(false);
  });
  it('json_format accepts JSON, also inside ``` fences, and NaN as Python does', () => {
    const id = 'detectable_format:json_format';
    expect(strict(id, {}, '```json\n{"a": [1, 2]}\n```')).toBe(true);
    expect(strict(id, {}, '  {"a": NaN}  ')).toBe(true);
    expect(strict(id, {}, 'Here is JSON: {"a": 1}')).toBe(false);
    expect(strict(id, {}, "{'a': 1}")).toBe(false);
    // Loose drops the first and last line, so a prose line around the JSON passes there.
    expect(loose(id, {}, 'Here it is:\n{"a": 1}\nDone.')).toBe(true);
  });
  it('title needs a non-empty <<...>> on one line', () => {
    const id = 'detectable_format:title';
    expect(strict(id, {}, '<<A Poem of Joy>>\ntext')).toBe(true);
    expect(strict(id, {}, '<< >> text')).toBe(false);
    expect(strict(id, {}, '<<split\ntitle>>')).toBe(false);
  });
  it('constrained_response looks for one of the three answers anywhere', () => {
    const id = 'detectable_format:constrained_response';
    expect(strict(id, {}, '\n My answer is no.\n')).toBe(true);
    expect(strict(id, {}, 'Well... My answer is maybe. Because.')).toBe(true);
    expect(strict(id, {}, 'My answer is no')).toBe(false);
  });
});

describe('content checks', () => {
  it('number_placeholders counts [..] on one line', () => {
    const id = 'detectable_content:number_placeholders';
    expect(strict(id, { num_placeholders: 2 }, 'Dear [name], at [address].')).toBe(true);
    expect(strict(id, { num_placeholders: 2 }, 'Dear [name\n], at [address].')).toBe(false);
  });
  it('postscript finds P.S. / P.P.S case-insensitively, with optional spaces', () => {
    const id = 'detectable_content:postscript';
    expect(strict(id, { postscript_marker: 'P.S.' }, 'Body.\n\np.s. see you')).toBe(true);
    expect(strict(id, { postscript_marker: 'P.P.S' }, 'Body.\nP. P. S hi')).toBe(true);
    expect(strict(id, { postscript_marker: 'P.S.' }, 'Body without postscript PS')).toBe(false);
  });
});

describe('keyword checks', () => {
  it('existence: every keyword, case-insensitive, also inside words', () => {
    const id = 'keywords:existence';
    expect(strict(id, { keywords: ['dog', 'Cat'] }, 'Dogs and CATS')).toBe(true);
    expect(strict(id, { keywords: ['dog', 'bird'] }, 'Dogs and cats')).toBe(false);
  });
  it('frequency counts non-overlapping case-insensitive matches', () => {
    const id = 'keywords:frequency';
    expect(strict(id, { keyword: 'the', frequency: 3, relation: 'at least' }, 'The theme of the day')).toBe(true);
    expect(strict(id, { keyword: 'the', frequency: 3, relation: 'less than' }, 'The theme of the day')).toBe(false);
  });
  it('forbidden_words matches whole words only (Python \\b, Unicode-aware)', () => {
    const id = 'keywords:forbidden_words';
    expect(strict(id, { forbidden_words: ['cat'] }, 'Concatenate the catalog')).toBe(true);
    expect(strict(id, { forbidden_words: ['cat'] }, 'My CAT sleeps')).toBe(false);
    // "é" is a word character in Python, so "caté" does not contain the word "cat".
    expect(strict(id, { forbidden_words: ['cat'] }, 'un caté')).toBe(true);
    expect(strict(id, { forbidden_words: ['new york'] }, 'I love New York!')).toBe(false);
  });
  it('letter_frequency counts the letter case-insensitively', () => {
    const id = 'keywords:letter_frequency';
    expect(strict(id, { letter: 'z', let_frequency: 3, let_relation: 'at least' }, 'Zig zag Zoo')).toBe(true);
    expect(strict(id, { letter: 'z', let_frequency: 3, let_relation: 'less than' }, 'Zig zag Zoo')).toBe(false);
  });
});

describe('language and case', () => {
  it('response_language uses langdetect semantics', () => {
    const id = 'language:response_language';
    expect(
      strict(id, { language: 'de' }, 'Das ist ein kurzer Text auf Deutsch, und er sollte als Deutsch erkannt werden.'),
    ).toBe(true);
    expect(strict(id, { language: 'de' }, 'This is a short English text that should be detected as English.')).toBe(
      false,
    );
    expect(strict(id, { language: 'hi' }, 'यह हिंदी में लिखा गया एक छोटा सा वाक्य है।')).toBe(true);
    // No letters at all: the reference cannot detect and counts it as followed.
    expect(strict(id, { language: 'fi' }, '12345 !!!')).toBe(true);
  });
  it('english_capital / english_lowercase need the case and an English detection', () => {
    expect(
      strict('change_case:english_lowercase', {}, 'this is all lowercase english text about the weather today.'),
    ).toBe(true);
    expect(strict('change_case:english_lowercase', {}, 'This is not all lowercase.')).toBe(false);
    expect(strict('change_case:english_lowercase', {}, 'dies ist ein deutscher satz über das wetter heute.')).toBe(
      false,
    );
    expect(strict('change_case:english_capital', {}, 'THIS IS ALL CAPITAL ENGLISH TEXT ABOUT THE WEATHER.')).toBe(true);
    expect(strict('change_case:english_capital', {}, 'THIS IS ALMOST all CAPITAL.')).toBe(false);
  });
  it('capital_word_frequency counts all-capital nltk word tokens ("DON\'T" is "DO" + "N\'T")', () => {
    expect(wordTokenize("I DON'T know. WHO cares?")).toEqual(['I', 'DO', "N'T", 'know', '.', 'WHO', 'cares', '?']);
    const id = 'change_case:capital_word_frequency';
    expect(strict(id, { capital_frequency: 4, capital_relation: 'at least' }, "I DON'T know. WHO cares?")).toBe(true);
    expect(strict(id, { capital_frequency: 4, capital_relation: 'less than' }, "I DON'T know. WHO cares?")).toBe(false);
  });
  it('no_comma rejects any comma', () => {
    expect(strict('punctuation:no_comma', {}, 'No commas here.')).toBe(true);
    expect(strict('punctuation:no_comma', {}, 'One, two.')).toBe(false);
  });
});

describe('start/end and combination checks', () => {
  it('end_checker ignores surrounding whitespace and double quotes and case', () => {
    const id = 'startend:end_checker';
    expect(strict(id, { end_phrase: 'Any other questions?' }, 'Text. any other questions?"  \n')).toBe(true);
    expect(strict(id, { end_phrase: 'Any other questions?' }, 'Any other questions? Bye.')).toBe(false);
  });
  it('quotation needs the stripped response wrapped in double quotes', () => {
    expect(strict('startend:quotation', {}, '  "Hello."  ')).toBe(true);
    expect(strict('startend:quotation', {}, '"')).toBe(false);
    expect(strict('startend:quotation', {}, '“Hello.”')).toBe(false);
  });
  it('two_responses needs exactly two different non-empty parts split by ******', () => {
    const id = 'combination:two_responses';
    expect(strict(id, {}, 'First answer.\n******\nSecond answer.')).toBe(true);
    expect(strict(id, {}, 'Same.\n******\nSame.')).toBe(false);
    expect(strict(id, {}, 'One.\n******\n******\nTwo.')).toBe(false);
    expect(strict(id, {}, '******\nOne.\n******\nTwo.\n******')).toBe(true);
  });
  it('repeat_prompt needs the response to start with the request, case-insensitively', () => {
    const id = 'combination:repeat_prompt';
    expect(strict(id, { prompt_to_repeat: 'Write a poem.' }, 'write a POEM. Roses are red.')).toBe(true);
    expect(strict(id, { prompt_to_repeat: 'Write a poem.' }, 'Sure! Write a poem. Roses are red.')).toBe(false);
    // Loose removes the first line, so a preamble on its own line is forgiven.
    expect(loose(id, { prompt_to_repeat: 'Write a poem.' }, 'Sure!\nWrite a poem. Roses are red.')).toBe(true);
  });
});

describe('strict and loose', () => {
  it('builds the eight loose variants in the reference order', () => {
    expect(looseResponseVariants('Sure:\n**A** b\nThanks')).toEqual([
      'Sure:\n**A** b\nThanks',
      'Sure:\nA b\nThanks',
      '**A** b\nThanks',
      'Sure:\n**A** b',
      '**A** b',
      'A b\nThanks',
      'Sure:\nA b',
      'A b',
    ]);
  });
  it('an empty or whitespace-only response follows nothing, strict or loose', () => {
    expect(strict('punctuation:no_comma', {}, '   \n ')).toBe(false);
    expect(loose('punctuation:no_comma', {}, '\n')).toBe(false);
  });
  it('loose forgives a title line and markdown stars that strict counts', () => {
    const response = 'One sentence. Two sentences.\nThanks for asking!';
    expect(strict('length_constraints:number_sentences', { num_sentences: 3, relation: 'less than' }, response)).toBe(
      false,
    );
    expect(loose('length_constraints:number_sentences', { num_sentences: 3, relation: 'less than' }, response)).toBe(
      true,
    );
    expect(strict('startend:quotation', {}, '**"Quoted."**')).toBe(false);
    expect(loose('startend:quotation', {}, '**"Quoted."**')).toBe(true);
  });
});

describe('validateInstructionSpec', () => {
  it('accepts every instruction type with its parameters', () => {
    expect(IFEVAL_INSTRUCTION_IDS).toHaveLength(25);
    expect(validateInstructionSpec('punctuation:no_comma', {})).toEqual([]);
    expect(
      validateInstructionSpec('keywords:frequency', { keyword: 'x', frequency: 2, relation: 'at least', unused: null }),
    ).toEqual([]);
  });
  it('names unknown ids, missing, ill-typed and unknown parameters', () => {
    expect(validateInstructionSpec('keywords:nonsense', {})[0]).toMatch(/unknown instruction id "keywords:nonsense"/);
    expect(validateInstructionSpec('keywords:frequency', { keyword: 'x', relation: 'more than' })).toEqual([
      '"keywords:frequency" needs "frequency"',
      '"keywords:frequency": "relation" must be "less than" or "at least"',
    ]);
    expect(validateInstructionSpec('punctuation:no_comma', { count: 1 })[0]).toMatch(/has no parameter "count"/);
    expect(validateInstructionSpec('language:response_language', { language: 'xx' })[0]).toMatch(/language code/);
    expect(
      validateInstructionSpec('length_constraints:nth_paragraph_first_word', {
        num_paragraphs: 2,
        nth_paragraph: 3,
        first_word: 'a',
      })[0],
    ).toMatch(/between 1 and "num_paragraphs"/);
  });
  it('checkInstruction refuses an invalid spec with exit code 2', () => {
    expect(() => strict('keywords:existence', {}, 'text')).toThrow(
      expect.objectContaining({ code: 'IFEVAL_BAD_INSTRUCTION', exitCode: 2 }),
    );
  });
});
