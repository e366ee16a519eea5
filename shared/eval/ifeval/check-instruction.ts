import { BadInputError } from '../../errors';
import type { IfevalMode } from './ifeval-types';
import { isIfevalInstructionId, type IfevalInstructionId } from './instruction-ids';
import { detectLanguage, knownLanguageCodes } from './language-detector';
import { countSentences } from './punkt-sentence-splitter';
import {
  PY_SPACE,
  compilePythonPattern,
  containsWholeWord,
  pyIsLower,
  pyIsUpper,
  pySplitWhitespace,
  pyStrip,
  pyStripChars,
} from './python-text';
import { wordTokenize } from './treebank-word-tokenizer';

/**
 * The 25 IFEval instruction checkers with the semantics of the reference implementation
 * (google-research `instruction_following_eval/instructions.py`, ported to lm-evaluation-harness
 * as `lm_eval/tasks/ifeval/`). Each checker gets the response text and the instruction's kwargs;
 * the comments say where a rule is surprising but is the reference's.
 */
type Kwargs = Record<string, unknown>;
type Checker = (response: string, kwargs: Kwargs) => boolean;

const relations = ['less than', 'at least'] as const;

type ParameterKind = 'integer' | 'relation' | 'string' | 'strings' | 'letter' | 'language';

interface InstructionSpec {
  parameters: Record<string, ParameterKind>;
  check: Checker;
  /** Cross-parameter rules beyond the kinds. */
  refine?: (kwargs: Kwargs) => string[];
}

function compare(actual: number, relation: unknown, threshold: unknown): boolean {
  return relation === 'less than' ? actual < (threshold as number) : actual >= (threshold as number);
}

/** Words as the reference counts them: runs of Python `\w` (letters, digits, underscore). */
export function countWords(text: string): number {
  return text.match(/[\p{L}\p{N}_]+/gu)?.length ?? 0;
}

const lineStart = '(?<![^\\n])';
const bulletStar = new RegExp(`${lineStart}${PY_SPACE}*\\*[^*][^\\n]*`, 'gu');
const bulletDash = new RegExp(`${lineStart}${PY_SPACE}*-[^\\n]*`, 'gu');
const placeholder = /\[[^\n]*?\]/g;
const singleHighlight = /\*[^\n*]*\*/g;
const doubleHighlight = /\*\*[^\n*]*\*\*/g;
const paragraphDivider = compilePythonPattern('\\s?\\*\\*\\*\\s?', 'g');
const titlePattern = /<<[^\n]+>>/g;
const constrainedOptions = ['My answer is yes.', 'My answer is no.', 'My answer is maybe.'];
const paragraphFirstWordStops = new Set(['.', ',', '?', '!', "'", '"']);

function countMatches(text: string, pattern: RegExp): number {
  let count = 0;
  for (const _match of text.matchAll(pattern)) count += 1;
  return count;
}

/** json.loads(): JSON plus the NaN / Infinity / -Infinity literals Python accepts. */
function pythonJsonParses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    if (!/NaN|Infinity/.test(text)) return false;
    // Replace the bare literals outside strings, then try again.
    const replaced = text.replace(/"(?:[^"\\]|\\.)*"|-?Infinity|NaN/g, (token) =>
      token.startsWith('"') ? token : '0',
    );
    try {
      JSON.parse(replaced);
      return true;
    } catch {
      return false;
    }
  }
}

function removePrefix(text: string, prefix: string): string {
  return text.startsWith(prefix) ? text.slice(prefix.length) : text;
}

/** Language check with langdetect's outcome; an undetectable text counts as followed, as in the reference. */
function languageIs(text: string, language: string): boolean {
  const detected = detectLanguage(text);
  return detected === undefined ? true : detected === language;
}

const specs: Record<IfevalInstructionId, InstructionSpec> = {
  'keywords:existence': {
    parameters: { keywords: 'strings' },
    // Keywords are regular expressions in the reference (re.search, case-insensitive).
    check: (response, kwargs) =>
      (kwargs.keywords as string[]).every((keyword) => compilePythonPattern(keyword, 'i').test(response)),
  },
  'keywords:frequency': {
    parameters: { keyword: 'string', frequency: 'integer', relation: 'relation' },
    check: (response, kwargs) => {
      const pattern = compilePythonPattern(pyStrip(kwargs.keyword as string), 'gi');
      return compare(countMatches(response, pattern), kwargs.relation, kwargs.frequency);
    },
  },
  'keywords:forbidden_words': {
    parameters: { forbidden_words: 'strings' },
    check: (response, kwargs) =>
      !(kwargs.forbidden_words as string[]).some((word) => containsWholeWord(response, word)),
  },
  'keywords:letter_frequency': {
    parameters: { letter: 'letter', let_frequency: 'integer', let_relation: 'relation' },
    check: (response, kwargs) => {
      const letter = pyStrip(kwargs.letter as string).toLowerCase();
      let count = 0;
      for (const char of response.toLowerCase()) if (char === letter) count += 1;
      return compare(count, kwargs.let_relation, kwargs.let_frequency);
    },
  },
  'language:response_language': {
    parameters: { language: 'language' },
    check: (response, kwargs) => languageIs(response, kwargs.language as string),
  },
  'length_constraints:number_sentences': {
    parameters: { num_sentences: 'integer', relation: 'relation' },
    check: (response, kwargs) => compare(countSentences(response), kwargs.relation, kwargs.num_sentences),
  },
  'length_constraints:number_paragraphs': {
    parameters: { num_paragraphs: 'integer' },
    check: (response, kwargs) => {
      // Paragraphs are separated by the markdown divider ***; an empty piece is allowed only at either end.
      const paragraphs = response.split(paragraphDivider);
      let count = paragraphs.length;
      for (const [index, paragraph] of paragraphs.entries()) {
        if (pyStrip(paragraph) !== '') continue;
        if (index === 0 || index === paragraphs.length - 1) count -= 1;
        else return false;
      }
      return count === kwargs.num_paragraphs;
    },
  },
  'length_constraints:number_words': {
    parameters: { num_words: 'integer', relation: 'relation' },
    check: (response, kwargs) => compare(countWords(response), kwargs.relation, kwargs.num_words),
  },
  'length_constraints:nth_paragraph_first_word': {
    parameters: { num_paragraphs: 'integer', nth_paragraph: 'integer', first_word: 'string' },
    refine: (kwargs) => {
      const { nth_paragraph: nth, num_paragraphs: count } = kwargs as { nth_paragraph: number; num_paragraphs: number };
      return nth < 1 || nth > count ? [`"nth_paragraph" must be between 1 and "num_paragraphs" (${count})`] : [];
    },
    check: (response, kwargs) => {
      // Here paragraphs are separated by a blank line ("\n\n"), not by ***; empty pieces do not count,
      // but the nth paragraph is still looked up among all pieces, as the reference does.
      const paragraphs = response.split('\n\n');
      const count = paragraphs.filter((paragraph) => pyStrip(paragraph) !== '').length;
      const nth = kwargs.nth_paragraph as number;
      if (nth > count) return false;
      const paragraph = pyStrip(paragraphs[nth - 1]);
      if (paragraph === '') return false;
      const word = pyStripChars(pyStripChars(pySplitWhitespace(paragraph)[0], "'", 'left'), '"', 'left');
      let firstWord = '';
      for (const letter of word) {
        if (paragraphFirstWordStops.has(letter)) break;
        firstWord += letter.toLowerCase();
      }
      return count === kwargs.num_paragraphs && firstWord === (kwargs.first_word as string).toLowerCase();
    },
  },
  'detectable_content:number_placeholders': {
    parameters: { num_placeholders: 'integer' },
    check: (response, kwargs) => countMatches(response, placeholder) >= (kwargs.num_placeholders as number),
  },
  'detectable_content:postscript': {
    parameters: { postscript_marker: 'string' },
    check: (response, kwargs) => {
      const marker = pyStrip(kwargs.postscript_marker as string);
      const text = response.toLowerCase();
      // The reference's pattern ends in `.*$` (multiline), which always matches: only the marker matters.
      if (marker === 'P.P.S') return compilePythonPattern('p\\.\\s?p\\.\\s?s', '').test(text);
      if (marker === 'P.S.') return compilePythonPattern('p\\.\\s?s\\.', '').test(text);
      return compilePythonPattern(marker.toLowerCase(), '').test(text);
    },
  },
  'detectable_format:number_bullet_lists': {
    parameters: { num_bullets: 'integer' },
    // Lines starting with "*" (not "**") or "-", after optional whitespace (which may span blank lines).
    check: (response, kwargs) =>
      countMatches(response, bulletStar) + countMatches(response, bulletDash) === kwargs.num_bullets,
  },
  'detectable_format:constrained_response': {
    parameters: {},
    check: (response) => {
      const text = pyStrip(response);
      return constrainedOptions.some((option) => text.includes(option));
    },
  },
  'detectable_format:number_highlighted_sections': {
    parameters: { num_highlights: 'integer' },
    check: (response, kwargs) => {
      // *x* and **x** both count; a **x** also yields two empty *...* matches, which do not.
      let count = 0;
      for (const match of response.matchAll(singleHighlight))
        if (pyStrip(pyStripChars(match[0], '*')) !== '') count += 1;
      for (const match of response.matchAll(doubleHighlight)) if (pyStrip(match[0].slice(2, -2)) !== '') count += 1;
      return count >= (kwargs.num_highlights as number);
    },
  },
  'detectable_format:multiple_sections': {
    parameters: { section_spliter: 'string', num_sections: 'integer' },
    check: (response, kwargs) => {
      const splitter = pyStrip(kwargs.section_spliter as string);
      const pattern = compilePythonPattern(`\\s?${splitter}\\s?\\d+\\s?`, 'g');
      return countMatches(response, pattern) >= (kwargs.num_sections as number);
    },
  },
  'detectable_format:json_format': {
    parameters: {},
    check: (response) => {
      let text = pyStrip(response);
      for (const prefix of ['```json', '```Json', '```JSON', '```']) text = removePrefix(text, prefix);
      if (text.endsWith('```')) text = text.slice(0, -3);
      return pythonJsonParses(pyStrip(text));
    },
  },
  'detectable_format:title': {
    parameters: {},
    check: (response) => {
      for (const match of response.matchAll(titlePattern)) {
        if (pyStrip(pyStripChars(pyStripChars(match[0], '<', 'left'), '>', 'right')) !== '') return true;
      }
      return false;
    },
  },
  'combination:two_responses': {
    parameters: {},
    check: (response) => {
      const pieces = response.split('******');
      const valid: string[] = [];
      for (const [index, piece] of pieces.entries()) {
        if (pyStrip(piece) === '') {
          if (index !== 0 && index !== pieces.length - 1) return false;
        } else {
          valid.push(piece);
        }
      }
      return valid.length === 2 && pyStrip(valid[0]) !== pyStrip(valid[1]);
    },
  },
  'combination:repeat_prompt': {
    parameters: { prompt_to_repeat: 'string' },
    check: (response, kwargs) =>
      pyStrip(response)
        .toLowerCase()
        .startsWith(pyStrip(kwargs.prompt_to_repeat as string).toLowerCase()),
  },
  'startend:end_checker': {
    parameters: { end_phrase: 'string' },
    check: (response, kwargs) =>
      pyStripChars(pyStrip(response), '"')
        .toLowerCase()
        .endsWith(pyStrip(kwargs.end_phrase as string).toLowerCase()),
  },
  'change_case:capital_word_frequency': {
    parameters: { capital_frequency: 'integer', capital_relation: 'relation' },
    check: (response, kwargs) =>
      compare(wordTokenize(response).filter(pyIsUpper).length, kwargs.capital_relation, kwargs.capital_frequency),
  },
  'change_case:english_capital': {
    parameters: {},
    check: (response) => pyIsUpper(response) && languageIs(response, 'en'),
  },
  'change_case:english_lowercase': {
    parameters: {},
    check: (response) => pyIsLower(response) && languageIs(response, 'en'),
  },
  'punctuation:no_comma': {
    parameters: {},
    check: (response) => !response.includes(','),
  },
  'startend:quotation': {
    parameters: {},
    check: (response) => {
      const text = pyStrip(response);
      return text.length > 1 && text.startsWith('"') && text.endsWith('"');
    },
  },
};

function kindProblem(name: string, kind: ParameterKind, value: unknown): string | undefined {
  switch (kind) {
    case 'integer':
      return Number.isInteger(value) && (value as number) >= 0 ? undefined : `"${name}" must be a non-negative integer`;
    case 'relation':
      return relations.includes(value as (typeof relations)[number])
        ? undefined
        : `"${name}" must be "less than" or "at least"`;
    case 'string':
      return typeof value === 'string' && value.trim() !== '' ? undefined : `"${name}" must be a non-empty string`;
    case 'strings':
      return Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === 'string' && item !== '')
        ? undefined
        : `"${name}" must be a non-empty list of non-empty strings`;
    case 'letter':
      return typeof value === 'string' && [...value.trim()].length === 1
        ? undefined
        : `"${name}" must be one character (a letter a-z in IFEval)`;
    case 'language':
      return typeof value === 'string' && knownLanguageCodes().includes(value)
        ? undefined
        : `"${name}" must be a language code the detector knows (ISO 639-1 such as "de", "hi", "sw"; "zh-cn"/"zh-tw")`;
  }
}

/** Drops null/undefined values (the Hugging Face copy of IFEval lists every kwarg, unused ones as null). */
function presentKwargs(kwargs: Kwargs): Kwargs {
  return Object.fromEntries(Object.entries(kwargs).filter(([, value]) => value !== null && value !== undefined));
}

/** Problems of one instruction spec (unknown id, missing or ill-typed parameters, unknown parameters); empty when usable. */
export function validateInstructionSpec(instructionId: string, kwargs: unknown): string[] {
  if (!isIfevalInstructionId(instructionId)) {
    return [
      `unknown instruction id "${instructionId}"; use one of the 25 IFEval ids, e.g. "punctuation:no_comma", "length_constraints:number_words"`,
    ];
  }
  if (kwargs === null || kwargs === undefined) kwargs = {};
  if (typeof kwargs !== 'object' || Array.isArray(kwargs)) return [`kwargs of "${instructionId}" must be an object`];
  const spec = specs[instructionId];
  const present = presentKwargs(kwargs as Kwargs);
  const problems: string[] = [];
  for (const [name, kind] of Object.entries(spec.parameters)) {
    if (!(name in present)) {
      problems.push(`"${instructionId}" needs "${name}"`);
      continue;
    }
    const problem = kindProblem(name, kind, present[name]);
    if (problem) problems.push(`"${instructionId}": ${problem}`);
  }
  for (const name of Object.keys(present)) {
    if (!(name in spec.parameters)) {
      const known = Object.keys(spec.parameters);
      const takes = known.length ? `it takes ${known.map((key) => `"${key}"`).join(', ')}` : 'it takes none';
      problems.push(`"${instructionId}" has no parameter "${name}" (${takes})`);
    }
  }
  if (problems.length === 0 && spec.refine)
    problems.push(...spec.refine(present).map((problem) => `"${instructionId}": ${problem}`));
  return problems;
}

/** The loose variants of a response, in the reference order (the original first). */
export function looseResponseVariants(response: string): string[] {
  const lines = response.split('\n');
  const withoutFirst = pyStrip(lines.slice(1).join('\n'));
  const withoutLast = pyStrip(lines.slice(0, -1).join('\n'));
  const withoutBoth = pyStrip(lines.slice(1, -1).join('\n'));
  const unstar = (text: string) => text.replaceAll('*', '');
  return [
    response,
    unstar(response),
    withoutFirst,
    withoutLast,
    withoutBoth,
    unstar(withoutFirst),
    unstar(withoutLast),
    unstar(withoutBoth),
  ];
}

/** Checks one instruction against prepared variants (strict: just the response). */
export function checkInstructionOnVariants(
  instructionId: string,
  kwargs: Kwargs,
  variants: readonly string[],
): boolean {
  const problems = validateInstructionSpec(instructionId, kwargs);
  if (problems.length > 0) {
    throw new BadInputError('IFEVAL_BAD_INSTRUCTION', `${problems.join('; ')}; fix the instruction's kwargs`);
  }
  const spec = specs[instructionId as IfevalInstructionId];
  const present = presentKwargs(kwargs);
  // An empty (whitespace-only) response never follows an instruction.
  return variants.some((variant) => pyStrip(variant) !== '' && spec.check(variant, present));
}

/**
 * Whether `response` follows one instruction (strict: as it is; loose: any of its eight variants).
 * `prompt` is what the reference hands to checkers that ask for it; none of the 25 does (repeat_prompt
 * reads its text from kwargs.prompt_to_repeat).
 */
export function checkInstruction(
  instructionId: string,
  kwargs: Record<string, unknown>,
  prompt: string,
  response: string,
  mode: IfevalMode,
): boolean {
  void prompt;
  return checkInstructionOnVariants(
    instructionId,
    kwargs,
    mode === 'strict' ? [response] : looseResponseVariants(response),
  );
}
