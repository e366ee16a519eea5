import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ifevalDataDirectory } from './ifeval-data-directory';
import { PYTHON_WHITESPACE, PY_SPACE, pyIsLower, pyIsUpper } from './python-text';

/**
 * Sentence splitting as NLTK's Punkt tokenizer does it with its pretrained English model, which
 * IFEval's `length_constraints:number_sentences` counts with (and `nltk.word_tokenize` splits
 * with before tokenizing words). The model's parameters (abbreviations, collocations, frequent
 * sentence starters, orthographic context) are shipped in data/ifeval/punkt-english.json; the
 * algorithm follows NLTK 3.8: candidate sentence ends are `.`, `?`, `!` followed by punctuation or
 * by whitespace and a token; a candidate is a break when Punkt's two annotation passes mark the
 * token before it as a sentence break; closing quotes and brackets after a break are moved back
 * onto the sentence they close.
 */
interface PunktParameters {
  abbrevTypes: Set<string>;
  collocations: Set<string>;
  sentStarters: Set<string>;
  orthoContext: Map<string, number>;
}

const orthoBeginUpper = 1 << 1;
const orthoMiddleUpper = 1 << 2;
const orthoUnknownUpper = 1 << 3;
const orthoBeginLower = 1 << 4;
const orthoMiddleLower = 1 << 5;
const orthoUnknownLower = 1 << 6;
const orthoUpper = orthoBeginUpper | orthoMiddleUpper | orthoUnknownUpper;
const orthoLower = orthoBeginLower | orthoMiddleLower | orthoUnknownLower;

let parameters: PunktParameters | undefined;

function loadParameters(): PunktParameters {
  if (parameters) return parameters;
  const raw = JSON.parse(readFileSync(join(ifevalDataDirectory(), 'punkt-english.json'), 'utf8')) as {
    abbrevTypes: string[];
    collocations: [string, string][];
    sentStarters: string[];
    orthoContext: Record<string, number>;
  };
  parameters = {
    abbrevTypes: new Set(raw.abbrevTypes),
    collocations: new Set(raw.collocations.map(([first, second]) => `${first}\u0000${second}`)),
    sentStarters: new Set(raw.sentStarters),
    orthoContext: new Map(Object.entries(raw.orthoContext)),
  };
  return parameters;
}

const nonWordChars = `[)";}\\]*:@'({\\[!?]`;
const multiCharPunctuation = `(?:-{2,}|\\.{2,}|(?:\\.${PY_SPACE}){2,}\\.)`;
const wordStart = `[^("\`{\\[:;&#*@)}\\]\\-,]`;
const notSpace = `[^${PYTHON_WHITESPACE}]`;
// A word ends before whitespace, the end, punctuation, a multi-character mark, or a comma that ends the word.
const wordEnd = `(?=${PY_SPACE}|$|${nonWordChars}|${multiCharPunctuation}|,(?=$|${PY_SPACE}|${nonWordChars}|${multiCharPunctuation}))`;
const wordTokenizer = new RegExp(`${multiCharPunctuation}|(?=${wordStart})${notSpace}+?${wordEnd}|${notSpace}`, 'gu');
const periodContext = new RegExp(`[.?!](?=(${nonWordChars}|${PY_SPACE}+(${notSpace}+)))`, 'gu');
const numericToken = /^-?[.,]?\p{Nd}[\p{Nd},.-]*\.?$/u;
const ellipsisToken = /^\.\.+$/;
const initialToken = /^[\p{L}\p{Nl}\p{No}_]\.$/u;
const boundaryRealignment = new RegExp(`^["')\\]}]+?(?:${PY_SPACE}+|(?=--)|$)`, 'u');
const trailingSpace = new RegExp(`${PY_SPACE}+$`, 'u');
const sentenceEndChars = new Set(['.', '?', '!']);
const punctuationTokens = new Set([';', ':', ',', '.', '!', '?']);

interface PunktToken {
  tok: string;
  type: string;
  periodFinal: boolean;
  sentbreak: boolean;
  abbr: boolean;
  ellipsis: boolean;
}

function makeToken(tok: string): PunktToken {
  const lowered = tok.toLowerCase();
  return {
    tok,
    type: numericToken.test(lowered) ? '##number##' : lowered,
    periodFinal: tok.endsWith('.'),
    sentbreak: false,
    abbr: false,
    ellipsis: false,
  };
}

function typeNoPeriod(token: PunktToken): string {
  return token.type.length > 1 && token.type.endsWith('.') ? token.type.slice(0, -1) : token.type;
}

function typeNoSentPeriod(token: PunktToken): string {
  return token.sentbreak ? typeNoPeriod(token) : token.type;
}

function firstChar(token: PunktToken): string {
  return String.fromCodePoint(token.tok.codePointAt(0)!);
}

function firstUpper(token: PunktToken): boolean {
  return pyIsUpper(firstChar(token));
}

function firstLower(token: PunktToken): boolean {
  return pyIsLower(firstChar(token));
}

function tokenizeWords(text: string): PunktToken[] {
  const tokens: PunktToken[] = [];
  for (const line of text.split('\n')) {
    if (line.replace(new RegExp(PY_SPACE, 'gu'), '') === '') continue;
    for (const match of line.matchAll(wordTokenizer)) tokens.push(makeToken(match[0]));
  }
  return tokens;
}

function firstPass(token: PunktToken, params: PunktParameters): void {
  const tok = token.tok;
  if (sentenceEndChars.has(tok)) {
    token.sentbreak = true;
  } else if (ellipsisToken.test(tok)) {
    token.ellipsis = true;
  } else if (token.periodFinal && !tok.endsWith('..')) {
    const stem = tok.slice(0, -1).toLowerCase();
    if (params.abbrevTypes.has(stem) || params.abbrevTypes.has(stem.split('-').at(-1)!)) token.abbr = true;
    else token.sentbreak = true;
  }
}

/** true: starts a sentence, false: does not, undefined: cannot tell. */
function orthographicHeuristic(token: PunktToken, params: PunktParameters): boolean | undefined {
  if (punctuationTokens.has(token.tok)) return false;
  const context = params.orthoContext.get(typeNoSentPeriod(token)) ?? 0;
  if (firstUpper(token) && context & orthoLower && !(context & orthoMiddleUpper)) return true;
  if (firstLower(token) && (context & orthoUpper || !(context & orthoBeginLower))) return false;
  return undefined;
}

function secondPass(token: PunktToken, next: PunktToken, params: PunktParameters): void {
  if (!token.periodFinal) return;
  const type = typeNoPeriod(token);
  const nextType = typeNoSentPeriod(next);
  const isInitial = initialToken.test(token.tok);
  if (params.collocations.has(`${type}\u0000${nextType}`)) {
    token.sentbreak = false;
    token.abbr = true;
    return;
  }
  if ((token.abbr || token.ellipsis) && !isInitial) {
    if (orthographicHeuristic(next, params) === true) {
      token.sentbreak = true;
      return;
    }
    if (firstUpper(next) && params.sentStarters.has(nextType)) {
      token.sentbreak = true;
      return;
    }
  }
  if (isInitial || type === '##number##') {
    const startsSentence = orthographicHeuristic(next, params);
    if (startsSentence === false) {
      token.sentbreak = false;
      token.abbr = true;
      return;
    }
    if (
      startsSentence === undefined &&
      isInitial &&
      firstUpper(next) &&
      !((params.orthoContext.get(nextType) ?? 0) & orthoLower)
    ) {
      token.sentbreak = false;
      token.abbr = true;
    }
  }
}

function containsSentenceBreak(context: string, params: PunktParameters): boolean {
  const tokens = tokenizeWords(context);
  for (const token of tokens) firstPass(token, params);
  // A break counts only when some token follows it, as in Punkt's lazy pairwise pass.
  for (let index = 0; index + 1 < tokens.length; index += 1) {
    secondPass(tokens[index], tokens[index + 1], params);
    if (tokens[index].sentbreak) return true;
  }
  return false;
}

const pythonWhitespaceChars = new Set([' ', '\t', '\n', '\r', '\x0b', '\x0c']);

/** Index of the last ASCII whitespace of `text`, 0 when none (Punkt's own quirk: 0 also for a space at 0). */
function lastWhitespaceIndex(text: string): number {
  for (let index = text.length - 1; index >= 0; index -= 1) if (pythonWhitespaceChars.has(text[index])) return index;
  return 0;
}

interface Candidate {
  end: number;
  nextTokenStart: number | undefined;
  context: string;
}

function potentialEnds(text: string): Candidate[] {
  const candidates: Candidate[] = [];
  let previousStart = 0;
  let previousStop = 0;
  let previous: RegExpExecArray | undefined;
  const describe = (match: RegExpExecArray, start: number, stop: number): Candidate => {
    const afterToken = match[1];
    const nextToken = match[2];
    return {
      end: match.index + 1,
      nextTokenStart: nextToken ? match.index + 1 + afterToken.length - nextToken.length : undefined,
      context: text.slice(start, stop) + match[0] + afterToken,
    };
  };
  periodContext.lastIndex = 0;
  for (let match = periodContext.exec(text); match; match = periodContext.exec(text)) {
    const before = text.slice(previousStop, match.index);
    let wordStartIndex = lastWhitespaceIndex(before);
    wordStartIndex = wordStartIndex ? wordStartIndex + previousStop + 1 : previousStart;
    if (previous && previousStop <= wordStartIndex) candidates.push(describe(previous, previousStart, previousStop));
    previous = match;
    previousStart = wordStartIndex;
    previousStop = match.index;
  }
  if (previous) candidates.push(describe(previous, previousStart, previousStop));
  return candidates;
}

/** The sentences of `text` as Punkt (English) splits them. */
export function splitSentences(text: string): string[] {
  const params = loadParameters();
  const slices: Array<[number, number]> = [];
  let lastBreak = 0;
  for (const candidate of potentialEnds(text)) {
    if (!containsSentenceBreak(candidate.context, params)) continue;
    slices.push([lastBreak, candidate.end]);
    lastBreak = candidate.nextTokenStart ?? candidate.end;
  }
  slices.push([lastBreak, text.replace(trailingSpace, '').length]);

  const sentences: string[] = [];
  let realign = 0;
  for (let index = 0; index < slices.length; index += 1) {
    const [start, stop] = slices[index];
    const current: [number, number] = [start + realign, stop];
    const next = slices[index + 1];
    if (!next) {
      if (current[1] > current[0]) sentences.push(text.slice(current[0], current[1]));
      continue;
    }
    const realigned = boundaryRealignment.exec(text.slice(next[0], next[1]));
    if (realigned) {
      sentences.push(text.slice(current[0], next[0] + realigned[0].replace(trailingSpace, '').length));
      realign = realigned[0].length;
    } else {
      realign = 0;
      if (current[1] > current[0]) sentences.push(text.slice(current[0], current[1]));
    }
  }
  return sentences;
}

/** How many sentences IFEval counts in `text`. */
export function countSentences(text: string): number {
  return splitSentences(text).length;
}
