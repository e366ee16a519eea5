/**
 * Text normalization for matching what a host said against what the world holds, so a correct
 * answer phrased differently still counts: full-width and half-width forms (NFKC), case and
 * spacing, Chinese numerals (二百九十九, 两百, 三百五, 九块九), thousands separators and trailing
 * decimal zeros (299.00). Written by hand because no maintained npm library converts Chinese
 * numerals inside running text with the spoken shorthands (三百五 = 350, 九块九 = 9.9).
 */

const digitValues: Record<string, number> = {
  零: 0,
  〇: 0,
  一: 1,
  二: 2,
  两: 2,
  三: 3,
  四: 4,
  五: 5,
  六: 6,
  七: 7,
  八: 8,
  九: 9,
};
const smallUnits: Record<string, number> = { 十: 10, 百: 100, 千: 1000 };
const bigUnits: Record<string, number> = { 万: 10_000, 亿: 100_000_000 };

/** NFKC, lowercase, no whitespace: for comparing names and phrases. */
export function compactText(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(/\s+/g, '');
}

/**
 * Parses a run of Chinese numeral characters (二百九十九, 一千二, 二零二五, 十五); undefined
 * when the run is not a number.
 */
export function parseChineseInteger(run: string): number | undefined {
  if (run === '') return undefined;
  const chars = [...run];
  const hasUnit = chars.some((char) => char in smallUnits || char in bigUnits);
  if (!hasUnit) {
    // Read digit by digit (一九九 = 199, 二零二五 = 2025).
    if (!chars.every((char) => char in digitValues)) return undefined;
    return Number(chars.map((char) => digitValues[char]).join(''));
  }
  let total = 0;
  let section = 0;
  let digit: number | undefined;
  let lastUnit = 1;
  for (const char of chars) {
    if (char in digitValues) {
      digit = digitValues[char];
    } else if (char in smallUnits) {
      const unit = smallUnits[char];
      section += (digit ?? 1) * unit;
      digit = undefined;
      lastUnit = unit;
    } else if (char in bigUnits) {
      const unit = bigUnits[char];
      total += (section + (digit ?? 0)) * unit;
      section = 0;
      digit = undefined;
      lastUnit = unit;
    } else {
      return undefined;
    }
  }
  if (digit !== undefined) {
    // Spoken shorthand: a trailing digit after 百/千/万 counts in the next lower unit (三百五 = 350).
    const endsWithDigitAfterUnit = lastUnit >= 100 && chars.length >= 2 && !(chars[chars.length - 2] in digitValues);
    section += endsWithDigitAfterUnit ? digit * (lastUnit / 10) : digit;
  }
  return total + section;
}

const numeralRun = /[零〇一二两三四五六七八九十百千万亿]+(?:点[零〇一二三四五六七八九]+)?/g;
const digitChar = /[零〇一二两三四五六七八九]/;
const measureAfterTen = /^[元块件个天年月斤号码岁]/;

/** Replaces Chinese numerals in running text with Arabic digits. */
export function convertChineseNumerals(text: string): string {
  return text.replace(numeralRun, (run, offset: number, whole: string) => {
    const [integerPart, fractionPart] = run.split('点') as [string, string | undefined];
    // A lone unit word (百搭, 千万别, 十分) is not a number; 十 alone is one before a measure word.
    if (
      !digitChar.test(integerPart) &&
      !(
        integerPart.startsWith('十') &&
        (integerPart.length > 1 || measureAfterTen.test(whole.slice(offset + run.length)))
      )
    ) {
      return run;
    }
    const value = parseChineseInteger(integerPart);
    if (value === undefined) return run;
    if (fractionPart === undefined) return String(value);
    return `${value}.${[...fractionPart].map((char) => digitValues[char]).join('')}`;
  });
}

/**
 * Everything `compactText` does plus numerals: Chinese numerals to digits, 1,299 -> 1299,
 * 299.00 -> 299, 29块9 -> 29.9元, 1.5万 -> 15000, ￥ -> ¥.
 */
export function normalizeForMatch(text: string): string {
  let result = convertChineseNumerals(compactText(text));
  result = result.replace(/(\d),(?=\d{3}(?!\d))/g, '$1');
  result = result.replace(/(\d+(?:\.\d+)?)万/g, (_match, value: string) => String(Math.round(Number(value) * 10_000)));
  result = result.replace(/(\d+)块(\d)(?![\d.])/g, '$1.$2元');
  result = result.replace(/(\d+)\.(\d*?)0+(?!\d)/g, (_match, whole: string, fraction: string) =>
    fraction === '' ? whole : `${whole}.${fraction}`,
  );
  return result;
}

/** Every number in a text (after normalization). */
export function extractNumbers(text: string): number[] {
  return (normalizeForMatch(text).match(/\d+(?:\.\d+)?/g) ?? []).map(Number);
}

/** Amounts of money stated in a text: ¥N, N元, N块 (after normalization). */
export function extractMoneyAmounts(text: string): number[] {
  const amounts: number[] = [];
  for (const match of normalizeForMatch(text).matchAll(/¥(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)(?:元|块)/g)) {
    amounts.push(Number(match[1] ?? match[2]));
  }
  return amounts;
}
