import type { Rng } from '../../random/rng';

/**
 * A small curated lexicon of task-preserving Chinese rephrasings: each entry swaps a phrasing
 * for one that gives the same instruction with the same force (a request stays a request, a
 * prohibition stays a prohibition). Entries that would change meaning in some context are
 * guarded by the characters around them (`请` in `申请`/`请问` is not the imperative 请).
 * Nothing here is a banned advertising term or a tone marker, so a paraphrase never creates a
 * constraint violation the original did not have.
 */
export interface LexiconEntry {
  /** Matches the phrase to replace (global, no capture groups needed). */
  pattern: RegExp;
  /** Replacements with the same meaning; one is chosen per occurrence. */
  alternatives: readonly string[];
}

const entry = (phrase: string, alternatives: readonly string[], before = '', after = ''): LexiconEntry => ({
  pattern: new RegExp(`${before ? `(?<![${before}])` : ''}${phrase}${after ? `(?![${after}])` : ''}`, 'g'),
  alternatives,
});

export const chineseLexicon: readonly LexiconEntry[] = [
  entry('请', ['务必', '需要'], '申邀聘宴回', '问求教示假客'),
  entry('告知', ['说明', '告诉']),
  entry('告诉', ['告知']),
  entry('不要', ['切勿', '不得'], '可'),
  entry('一律', ['统一', '一概']),
  entry('例如', ['比如', '譬如']),
  entry('如果', ['若', '假如']),
  entry('调用', ['使用']),
  entry('查询', ['查找', '查一下'], '', '结'),
  entry('简短', ['简洁', '精简']),
  entry('确认', ['核实', '核对'], '', '收'),
  entry('引导', ['指引']),
  entry('必须', ['务必', '一定要'], '', '遵'),
  entry('禁止', ['严禁', '不得']),
  entry('不超过', ['最多', '不多于']),
  entry('然后', ['接着', '随后']),
  entry('立即', ['马上', '立刻']),
  entry('注意', ['留意']),
  entry('尽量', ['尽可能']),
  entry('根据', ['依据', '按照']),
  entry('避免', ['防止']),
  entry('询问', ['问']),
  entry('回答', ['答复'], '', '问'),
  entry('自然地', ['顺势']),
  entry('礼貌', ['客气'], '', '用'),
  entry('坦诚', ['如实']),
];

/**
 * Rewrites `text` with the lexicon, each occurrence with probability `rate`. Text inside any of
 * the `protect`ed phrases (names other text refers to, placeholders) is left untouched.
 */
export function paraphraseChinese(text: string, rng: Rng, rate = 0.5, protect: readonly string[] = []): string {
  const guarded = [...new Set(protect.filter((phrase) => phrase !== ''))].sort(
    (left, right) => right.length - left.length,
  );
  const guard = new RegExp(
    [String.raw`\{[A-Za-z_]+\}`, ...guarded.map((phrase) => phrase.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))].join('|'),
    'g',
  );
  let result = '';
  let last = 0;
  for (const match of text.matchAll(guard)) {
    result += paraphraseSpan(text.slice(last, match.index), rng, rate) + match[0];
    last = (match.index ?? 0) + match[0].length;
  }
  return result + paraphraseSpan(text.slice(last), rng, rate);
}

function paraphraseSpan(span: string, rng: Rng, rate: number): string {
  if (span === '' || !/[\u4e00-\u9fff]/.test(span)) return span;
  // Every entry matches against the original span, so a replacement is never rewritten again.
  const hits: Array<{ start: number; end: number; replacement: string }> = [];
  for (const { pattern, alternatives } of chineseLexicon) {
    pattern.lastIndex = 0;
    for (const match of span.matchAll(pattern)) {
      const start = match.index ?? 0;
      const end = start + match[0].length;
      if (hits.some((hit) => start < hit.end && hit.start < end)) continue;
      if (!rng.chance(rate)) continue;
      hits.push({ start, end, replacement: rng.pick(alternatives) });
    }
  }
  hits.sort((left, right) => left.start - right.start);
  let result = '';
  let last = 0;
  for (const hit of hits) {
    result += span.slice(last, hit.start) + hit.replacement;
    last = hit.end;
  }
  return result + span.slice(last);
}
