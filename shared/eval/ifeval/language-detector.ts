import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ifevalDataDirectory } from './ifeval-data-directory';

/**
 * Language identification with the semantics of Python's `langdetect` (a port of Cybozu's
 * language-detection), which the IFEval reference calls for `language:response_language` and the
 * English checks of `change_case:*`: the same 55 n-gram profiles (shipped in
 * data/ifeval/langdetect-profiles.json), the same text cleaning and normalisation, the same naive
 * Bayes sampling (7 trials, alpha 0.5 ± N(0,1)·0.05, convergence at 0.99999 checked every 5 steps,
 * at most 1000 steps, languages under 0.1 dropped).
 *
 * Where it can differ: the reference seeds its sampler from the OS on every call, so borderline
 * texts (mixed languages, very short texts) can get different answers from run to run there;
 * here the sampler is seeded with a constant, so one text always gets one answer.
 */
interface ProfileFile {
  languages: string[];
  profiles: Record<string, { nWords: number[]; freq: Record<string, number> }>;
  cjkClasses: string[];
  vietnamese: { toNormalize: string; diacriticMarks: string; normalized: string[] };
  latin1Excluded: string;
}

interface LoadedModel {
  languages: string[];
  /** n-gram → its row in `table`. */
  rows: Map<string, number>;
  /** Probability of each n-gram per language: row-major, one column per language (as in `languages`). */
  table: Float64Array;
  cjkRepresentative: Map<string, string>;
  vietnameseRegex: RegExp;
  vietnameseToNormalize: string;
  vietnameseMarks: string;
  vietnameseNormalized: string[];
  latin1Excluded: string;
}

const trials = 7;
const alphaDefault = 0.5;
const alphaWidth = 0.05;
const iterationLimit = 1000;
const probabilityThreshold = 0.1;
const convergenceThreshold = 0.99999;
const baseFrequency = 10000;
const maxTextLength = 10000;
const samplerSeed = 0x1fe7a1;

const urlPattern = /https?:\/\/[-_.?&~;+=/#0-9A-Za-z]{1,2076}/g;
const mailPattern = /[-_.0-9A-Za-z]{1,64}@[-_0-9A-Za-z]{1,255}[-_.0-9A-Za-z]{1,255}/g;

let model: LoadedModel | undefined;

function loadModel(): LoadedModel {
  if (model) return model;
  const file = join(ifevalDataDirectory(), 'langdetect-profiles.json');
  const data = JSON.parse(readFileSync(file, 'utf8')) as ProfileFile;
  // One contiguous table (row per n-gram, column per language) instead of ~90k small arrays.
  const rows = new Map<string, number>();
  for (const language of data.languages) {
    for (const gram of Object.keys(data.profiles[language].freq)) if (!rows.has(gram)) rows.set(gram, rows.size);
  }
  const count = data.languages.length;
  const table = new Float64Array(rows.size * count);
  data.languages.forEach((language, index) => {
    const profile = data.profiles[language];
    for (const [gram, frequency] of Object.entries(profile.freq)) {
      const length = [...gram].length;
      if (length < 1 || length > 3) continue;
      table[rows.get(gram)! * count + index] = frequency / profile.nWords[length - 1];
    }
  });
  const cjkRepresentative = new Map<string, string>();
  for (const members of data.cjkClasses) {
    const chars = [...members];
    for (const char of chars) cjkRepresentative.set(char, chars[0]);
  }
  const escape = (text: string) => text.replace(/[\\\]^-]/g, '\\$&');
  model = {
    languages: data.languages,
    rows,
    table,
    cjkRepresentative,
    vietnameseRegex: new RegExp(
      `([${escape(data.vietnamese.toNormalize)}])([${escape(data.vietnamese.diacriticMarks)}])`,
      'gu',
    ),
    vietnameseToNormalize: data.vietnamese.toNormalize,
    vietnameseMarks: data.vietnamese.diacriticMarks,
    vietnameseNormalized: data.vietnamese.normalized,
    latin1Excluded: data.latin1Excluded,
  };
  return model;
}

/** The only Unicode blocks the normalisation looks at. */
function blockOf(codePoint: number): string | undefined {
  if (codePoint <= 0x7f) return 'basic-latin';
  if (codePoint <= 0xff) return 'latin-1';
  if (codePoint >= 0x180 && codePoint <= 0x24f) return 'latin-extended-b';
  if (codePoint >= 0x600 && codePoint <= 0x6ff) return 'arabic';
  if (codePoint >= 0x1e00 && codePoint <= 0x1eff) return 'latin-extended-additional';
  if (codePoint >= 0x2000 && codePoint <= 0x206f) return 'general-punctuation';
  if (codePoint >= 0x3040 && codePoint <= 0x309f) return 'hiragana';
  if (codePoint >= 0x30a0 && codePoint <= 0x30ff) return 'katakana';
  if ((codePoint >= 0x3100 && codePoint <= 0x312f) || (codePoint >= 0x31a0 && codePoint <= 0x31bf)) return 'bopomofo';
  if (codePoint >= 0x4e00 && codePoint <= 0x9fff) return 'cjk';
  if (codePoint >= 0xac00 && codePoint <= 0xd7af) return 'hangul';
  return undefined;
}

function normalizeChar(char: string, loaded: LoadedModel): string {
  const codePoint = char.codePointAt(0)!;
  switch (blockOf(codePoint)) {
    case 'basic-latin':
      return (char >= 'A' && char <= 'Z') || (char >= 'a' && char <= 'z') ? char : ' ';
    case 'latin-1':
      return loaded.latin1Excluded.includes(char) ? ' ' : char;
    case 'latin-extended-b':
      // Romanian comma-below letters count as their cedilla forms, as in the profiles.
      if (char === '\u0219') return '\u015f';
      if (char === '\u021b') return '\u0163';
      return char;
    case 'general-punctuation':
      return ' ';
    case 'arabic':
      return char === '\u06cc' ? '\u064a' : char;
    case 'latin-extended-additional':
      return codePoint >= 0x1ea0 ? '\u1ec3' : char;
    case 'hiragana':
      return '\u3042';
    case 'katakana':
      return '\u30a2';
    case 'bopomofo':
      return '\u3105';
    case 'cjk':
      return loaded.cjkRepresentative.get(char) ?? char;
    case 'hangul':
      return '\uac00';
    default:
      return char;
  }
}

/** Python's str.isupper() for one character. */
function isUpperChar(char: string): boolean {
  return /\p{Uppercase}/u.test(char) && !/\p{Lowercase}|\p{Lt}/u.test(char);
}

function prepareText(text: string, loaded: LoadedModel): string[] {
  let cleaned = text.replace(urlPattern, ' ').replace(mailPattern, ' ');
  cleaned = cleaned.replace(loaded.vietnameseRegex, (_match, letter: string, mark: string) => {
    const letterIndex = loaded.vietnameseToNormalize.indexOf(letter);
    const markIndex = [...loaded.vietnameseMarks].indexOf(mark);
    return [...(loaded.vietnameseNormalized[markIndex] ?? '')][letterIndex] ?? letter + mark;
  });
  const chars: string[] = [];
  let previous = '';
  const all = [...cleaned];
  for (let index = 0; index < Math.min(all.length, maxTextLength); index += 1) {
    const char = all[index];
    if (char !== ' ' || previous !== ' ') chars.push(char);
    previous = char;
  }
  // A text mostly in another script drops its Latin letters. The reference compares the block to
  // a name its lookup never returns, so every character from U+0300 up counts as non-Latin.
  let latin = 0;
  let nonLatin = 0;
  for (const char of chars) {
    if (char >= 'A' && char <= 'z') latin += 1;
    else if (char >= '\u0300') nonLatin += 1;
  }
  if (latin * 2 < nonLatin) return chars.filter((char) => char < 'A' || char > 'z');
  return chars;
}

function extractNgrams(chars: string[], loaded: LoadedModel): string[] {
  const found: string[] = [];
  let grams = [' '];
  let capitalWord = false;
  for (const raw of chars) {
    const char = normalizeChar(raw, loaded);
    const last = grams[grams.length - 1];
    let skip = false;
    if (last === ' ') {
      grams = [' '];
      capitalWord = false;
      if (char === ' ') skip = true;
    } else if (grams.length >= 3) {
      grams = grams.slice(1);
    }
    if (!skip) {
      grams.push(char);
      if (isUpperChar(char)) {
        if (isUpperChar(last)) capitalWord = true;
      } else {
        capitalWord = false;
      }
    }
    if (capitalWord) continue;
    for (let n = 1; n <= 3; n += 1) {
      if (grams.length < n) break;
      const gram = grams.slice(grams.length - n).join('');
      if (gram && gram !== ' ' && loaded.rows.has(gram)) found.push(gram);
    }
  }
  return found;
}

/** A small deterministic generator (mulberry32) standing in for Python's unseeded Random. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

function gaussian(random: () => number): number {
  const first = Math.max(random(), Number.MIN_VALUE);
  const second = random();
  return Math.sqrt(-2 * Math.log(first)) * Math.cos(2 * Math.PI * second);
}

export type DetectedLanguage = { language: string; probability: number };

/**
 * Languages above 0.1 probability, most likely first; `undefined` when the text has no usable
 * n-gram (the reference raises LangDetectException then, which its checkers count as followed).
 */
export function detectLanguages(text: string): DetectedLanguage[] | undefined {
  const loaded = loadModel();
  const ngrams = extractNgrams(prepareText(text, loaded), loaded);
  if (ngrams.length === 0) return undefined;
  const count = loaded.languages.length;
  const total = new Float64Array(count);
  const random = seededRandom(samplerSeed);
  for (let trial = 0; trial < trials; trial += 1) {
    const probabilities = new Float64Array(count).fill(1 / count);
    const alpha = alphaDefault + gaussian(random) * alphaWidth;
    const weight = alpha / baseFrequency;
    for (let step = 0; ; step += 1) {
      const gram = ngrams[Math.floor(random() * ngrams.length)];
      const offset = loaded.rows.get(gram)! * count;
      for (let index = 0; index < count; index += 1) probabilities[index] *= weight + loaded.table[offset + index];
      if (step % 5 === 0) {
        let sum = 0;
        for (const value of probabilities) sum += value;
        let max = 0;
        for (let index = 0; index < count; index += 1) {
          probabilities[index] = probabilities[index] / sum;
          if (probabilities[index] > max) max = probabilities[index]!;
        }
        if (max > convergenceThreshold || step >= iterationLimit) break;
      }
    }
    for (let index = 0; index < count; index += 1) total[index] += probabilities[index] / trials;
  }
  return loaded.languages
    .map((language, index) => ({ language, probability: total[index] }))
    .filter((entry) => entry.probability > probabilityThreshold)
    .sort((left, right) => right.probability - left.probability);
}

/** The most likely language (ISO 639-1, or `zh-cn`/`zh-tw`), `unknown` when none passes 0.1, `undefined` when undetectable. */
export function detectLanguage(text: string): string | undefined {
  // Deterministic, so answers can be reused: the loose variants of one response often repeat a text
  // (a small window on purpose: it serves one response's variants, not a whole suite).
  if (recentAnswers.has(text)) return recentAnswers.get(text);
  const detected = detectLanguages(text);
  const answer = detected === undefined ? undefined : (detected[0]?.language ?? 'unknown');
  if (recentAnswers.size >= 32) recentAnswers.delete(recentAnswers.keys().next().value as string);
  recentAnswers.set(text, answer);
  return answer;
}

const recentAnswers = new Map<string, string | undefined>();

/** The language codes the profiles know. */
export function knownLanguageCodes(): string[] {
  return [...loadModel().languages];
}
