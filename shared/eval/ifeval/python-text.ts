/**
 * Python `str` semantics the IFEval reference relies on, where JavaScript's differ: what counts
 * as whitespace (str.strip/split, regex \s), and cased characters (str.isupper/islower).
 */

/** The characters Python's str.isspace() accepts (also what `\s` matches in a Python str regex). */
export const PYTHON_WHITESPACE =
  '\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
/** A regex class source equal to Python's `\s`. */
export const PY_SPACE = `[${PYTHON_WHITESPACE}]`;
const spaceRun = new RegExp(`${PY_SPACE}+`, 'u');

/** Whether a UTF-16 code unit is one of PYTHON_WHITESPACE (all of them are in the BMP). */
function isPySpace(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d) || (code >= 0x1c && code <= 0x1f);
  if (code < 0x85) return false;
  return (
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

/**
 * str.strip() with no argument. A scan from both ends, not two regex replaces: the loose IFEval
 * variants strip every response about a dozen times, and the regexes were most of that check.
 */
export function pyStrip(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && isPySpace(text.charCodeAt(start))) start += 1;
  while (end > start && isPySpace(text.charCodeAt(end - 1))) end -= 1;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/** str.strip(chars) / lstrip / rstrip with explicit characters. */
export function pyStripChars(text: string, chars: string, side: 'both' | 'left' | 'right' = 'both'): string {
  let start = 0;
  let end = text.length;
  if (side !== 'right') while (start < end && chars.includes(text[start])) start += 1;
  if (side !== 'left') while (end > start && chars.includes(text[end - 1])) end -= 1;
  return text.slice(start, end);
}

/** str.split() with no argument: runs of whitespace, no empty pieces. */
export function pySplitWhitespace(text: string): string[] {
  return pyStrip(text)
    .split(spaceRun)
    .filter((piece) => piece !== '');
}

const upper = /\p{Uppercase}/u;
const lower = /\p{Lowercase}/u;
const title = /\p{Lt}/u;

/** str.isupper(): at least one cased character and no lowercase or titlecase one. */
export function pyIsUpper(text: string): boolean {
  let cased = false;
  for (const char of text) {
    if (lower.test(char) || title.test(char)) return false;
    if (upper.test(char)) cased = true;
  }
  return cased;
}

/** str.islower(): at least one cased character and no uppercase or titlecase one. */
export function pyIsLower(text: string): boolean {
  let cased = false;
  for (const char of text) {
    if (upper.test(char) || title.test(char)) return false;
    if (lower.test(char)) cased = true;
  }
  return cased;
}

/** Python's `\w` class in a str regex: letters, numbers and underscore (no combining marks). */
export const PY_WORD = '[\\p{L}\\p{N}_]';
const pyBoundary = `(?:(?<=${PY_WORD})(?!${PY_WORD})|(?<!${PY_WORD})(?=${PY_WORD}))`;

/**
 * Compiles a pattern the reference hands to Python's `re` (keywords are used as regexes there):
 * `\b`, `\w`, `\s`, `\d` get Python's Unicode meaning. A pattern JavaScript cannot compile is
 * matched as literal text.
 */
export function compilePythonPattern(pattern: string, flags: string): RegExp {
  const cacheKey = `${flags}\u0000${pattern}`;
  const cached = compiled.get(cacheKey);
  if (cached) {
    cached.lastIndex = 0;
    return cached;
  }
  const regex = compileUncached(pattern, flags);
  if (compiled.size > 10000) compiled.clear();
  compiled.set(cacheKey, regex);
  return regex;
}

const compiled = new Map<string, RegExp>();
const wordChar = /^[\p{L}\p{N}_]$/u;

function compileUncached(pattern: string, flags: string): RegExp {
  const translated = pattern.replace(/\\\\|\\b|\\B|\\w|\\W|\\s|\\S|\\d|\\D/g, (token) => {
    switch (token) {
      case '\\b':
        return pyBoundary;
      case '\\w':
        return PY_WORD;
      case '\\W':
        return '[^\\p{L}\\p{N}_]';
      case '\\s':
        return PY_SPACE;
      case '\\S':
        return `[^${PYTHON_WHITESPACE}]`;
      case '\\d':
        return '\\p{Nd}';
      case '\\D':
        return '\\P{Nd}';
      default:
        return token;
    }
  });
  try {
    return new RegExp(translated, `${flags}u`);
  } catch {
    try {
      return new RegExp(pattern, flags);
    } catch {
      return new RegExp(pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), `${flags}u`);
    }
  }
}

const plainWord = /^[\p{L}\p{N}_ '’-]+$/u;

/** The code point that ends just before `index` ('' at the start). */
function codePointEndingAt(text: string, index: number): string {
  if (index <= 0) return '';
  const low = text.charCodeAt(index - 1);
  if (low >= 0xdc00 && low <= 0xdfff && index >= 2) return text.slice(index - 2, index);
  return text[index - 1];
}

/**
 * Python's `re.search(r"\b" + word + r"\b", text, re.IGNORECASE)`. Plain words (letters, digits,
 * spaces, hyphens, apostrophes) are found case-insensitively and their edges checked by hand,
 * which is the same and much faster than a Unicode lookbehind at every position.
 */
export function containsWholeWord(text: string, word: string): boolean {
  if (!plainWord.test(word)) return compilePythonPattern(`\\b${word}\\b`, 'i').test(text);
  const pattern = compilePythonPattern(word, 'gi');
  pattern.lastIndex = 0;
  const startsWithWordChar = wordChar.test(String.fromCodePoint(word.codePointAt(0)!));
  const endsWithWordChar = wordChar.test([...word].at(-1)!);
  for (let match = pattern.exec(text); match; match = pattern.exec(text)) {
    const beforeChar = codePointEndingAt(text, match.index);
    const afterIndex = match.index + match[0].length;
    const afterChar = afterIndex < text.length ? String.fromCodePoint(text.codePointAt(afterIndex)!) : '';
    const boundaryBefore = (beforeChar !== '' && wordChar.test(beforeChar)) !== startsWithWordChar;
    const boundaryAfter = (afterChar !== '' && wordChar.test(afterChar)) !== endsWithWordChar;
    if (boundaryBefore && boundaryAfter) return true;
    pattern.lastIndex = match.index + 1;
  }
  return false;
}
