import { PY_SPACE, pySplitWhitespace } from './python-text';
import { splitSentences } from './punkt-sentence-splitter';

/**
 * Word tokens as `nltk.word_tokenize` (NLTK 3.8) produces them: Punkt sentences, then the
 * improved Treebank rules on each sentence (quotes, punctuation, brackets, dashes, clitics such as
 * n't / 's, and the split forms cannot / gonna / wanna ...). IFEval counts all-capital words
 * (`change_case:capital_word_frequency`) on these tokens, so "DON'T" is two tokens, "DO" and "N'T".
 */
type Rule = [RegExp, string];

const startingQuotes: Rule[] = [
  [/([«“‘„]|[`]+)/gu, ' $1 '],
  [/^"/u, '``'],
  [/(``)/gu, ' $1 '],
  [/([ ([{<])("|'{2})/gu, '$1 `` '],
  [/(')(?!re|ve|ll|m|t|s|d|n)([\p{L}\p{N}_])(?![\p{L}\p{N}_])/giu, '$1 $2'],
];

const punctuation: Rule[] = [
  [/([^.])(\.)([\])}>"']*)\s*$/u, '$1 $2 $3 '],
  [/([:,])([^\p{Nd}])/gu, ' $1 $2'],
  [/([:,])$/u, ' $1 '],
  [/\.{2,}/gu, ' $& '],
  [/[;@#$%&]/gu, ' $& '],
  [/([^.])(\.)([\])}>"']*)\s*$/u, '$1 $2$3 '],
  [/[?!]/gu, ' $& '],
  [/([^'])' /gu, "$1 ' "],
  [/[*]/gu, ' $& '],
];

const parensBrackets: Rule = [/[\][(){}<>]/gu, ' $& '];
const doubleDashes: Rule = [/--/gu, ' -- '];

const endingQuotes: Rule[] = [
  [/([»”’])/gu, ' $1 '],
  [/''/gu, " '' "],
  [/"/gu, " '' "],
  [/([^' ])('[sS]|'[mM]|'[dD]|') /gu, '$1 $2 '],
  [/([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) /gu, '$1 $2 '],
];

const wordEdge = '(?<![\\p{L}\\p{N}_])';
const wordEnd = '(?![\\p{L}\\p{N}_])';
const contractions: RegExp[] = [
  ['can', 'not'],
  ['d', "'ye"],
  ['gim', 'me'],
  ['gon', 'na'],
  ['got', 'ta'],
  ['lem', 'me'],
  ['more', "'n"],
].map(([first, second]) => new RegExp(`${wordEdge}(${first})(${second})${wordEnd}`, 'giu'));
const contractionsWanna = new RegExp(`${wordEdge}(wan)(na)(?=${PY_SPACE})`, 'giu');
const contractionsTis: RegExp[] = [/ ('t)(is)(?![\p{L}\p{N}_])/giu, / ('t)(was)(?![\p{L}\p{N}_])/giu];

function applyRules(text: string, rules: Rule[]): string {
  return rules.reduce((current, [pattern, replacement]) => current.replace(pattern, replacement), text);
}

function tokenizeSentence(sentence: string): string[] {
  let text = applyRules(sentence, startingQuotes);
  text = applyRules(text, punctuation);
  text = applyRules(text, [parensBrackets, doubleDashes]);
  text = ` ${text} `;
  text = applyRules(text, endingQuotes);
  for (const pattern of [...contractions, contractionsWanna, ...contractionsTis])
    text = text.replace(pattern, ' $1 $2 ');
  return pySplitWhitespace(text);
}

/** `nltk.word_tokenize(text)` for English. */
export function wordTokenize(text: string): string[] {
  return splitSentences(text).flatMap(tokenizeSentence);
}
