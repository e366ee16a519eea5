import { extractMoneyAmounts, extractNumbers, normalizeForMatch } from '../text/normalize-text';
import type { Fact } from '../tasks/task-schema';

/**
 * Matching of expected facts and phrases against a spoken reply, on normalized text (see
 * normalize-text): the verifier's tolerance for correct answers phrased differently.
 */

const clauseBreak = /[，。！？,.!?；;～~\n]/;
const negators = /[不没无未非别]/;
const latinOrDigit = /[a-z0-9]/;

/** A reply prepared once for many checks. */
export class ReplyText {
  readonly raw: string;
  readonly normalized: string;
  private numbersCache?: number[];
  private moneyCache?: number[];

  constructor(raw: string) {
    this.raw = raw;
    this.normalized = normalizeForMatch(raw);
  }

  get numbers(): number[] {
    this.numbersCache ??= extractNumbers(this.raw);
    return this.numbersCache;
  }

  get money(): number[] {
    this.moneyCache ??= extractMoneyAmounts(this.raw);
    return this.moneyCache;
  }

  /**
   * Whether the phrase occurs as a whole token (a Latin/digit edge is not glued to another
   * Latin letter or digit, so `L` is not found in `XL` nor `30` in `300`), and, when
   * `negatable`, not after 不/没/无/未/非/别 in the same clause (没有货 does not say 有货).
   */
  contains(phrase: string, negatable = false): boolean {
    const needle = normalizeForMatch(phrase);
    if (needle === '') return false;
    const text = this.normalized;
    for (let index = text.indexOf(needle); index !== -1; index = text.indexOf(needle, index + 1)) {
      const before = text[index - 1];
      const after = text[index + needle.length];
      if (latinOrDigit.test(needle[0]) && before !== undefined && /[a-z0-9.]/.test(before)) continue;
      if (latinOrDigit.test(needle[needle.length - 1]) && after !== undefined && latinOrDigit.test(after)) continue;
      if (negatable && negatedBefore(text, index)) continue;
      return true;
    }
    return false;
  }

  containsAny(phrases: readonly string[], negatable = false): string | undefined {
    return phrases.find((phrase) => this.contains(phrase, negatable));
  }

  /** Whether a number within tolerance is stated. */
  states(value: number, tolerance: number): boolean {
    return this.numbers.some((number) => Math.abs(number - value) <= tolerance + 1e-9);
  }
}

function negatedBefore(text: string, index: number): boolean {
  for (let position = index - 1; position >= 0; position--) {
    const char = text[position];
    if (clauseBreak.test(char)) return false;
    if (negators.test(char)) return true;
  }
  return false;
}

/** Whether the reply states a fact (any accepted value or phrase). */
export function factStated(reply: ReplyText, fact: Fact): boolean {
  if (fact.values?.some((value) => reply.states(value, fact.tolerance ?? 0.01))) return true;
  return fact.accepted?.some((phrase) => reply.contains(phrase, fact.negatable ?? false)) ?? false;
}

/** Human-readable expected value of a fact, for notes. */
export function describeFact(fact: Fact): string {
  const parts = [...(fact.values ?? []).map(String), ...(fact.accepted ?? []).slice(0, 3)];
  return `${fact.label} (${parts.join(' / ')})`;
}
