import { z } from 'zod';
import { BadInputError } from '../errors';
import { pairedDifference, type Interval } from './bootstrap-interval';

/**
 * Per-item outcomes as `scores.json` keeps them (`scores.<label>.items.<suite>`), so two runs
 * can be paired item by item (`hat eval compare`, the gate's night-to-night comparison with the
 * promoted checkpoint's stored results). An item's id is stable across runs: simulator task ids
 * are content hashes of the task, variant items add the variant's hash, IFEval items are
 * `ifeval-<key>`, custom items keep the user's id; `prompt` (a sha256 prefix of the prompt text)
 * tells when an id was reused for another prompt, and such items are not paired.
 */
export const itemOutcomeSchema = z.object({
  id: z.string(),
  /** The item's headline score, 0–100 (ifeval: prompt-level strict, 100 or 0). Null: judge-only. */
  score: z.number().nullable(),
  category: z.string().optional(),
  /** harness_variant_qa: the canonical harness or a variant (the headline pairs variants). */
  harness: z.enum(['canonical', 'variant']).optional(),
  /** The request failed or timed out (scored 0 on every check it carries). */
  failed: z.boolean().optional(),
  /** First 16 hex digits of sha256(prompt text). */
  prompt: z.string(),
});
export type ItemOutcome = z.infer<typeof itemOutcomeSchema>;

/** The part of a scores.json that pairing reads. */
export const pairableScoresSchema = z.object({
  runId: z.string(),
  seed: z.string(),
  models: z.array(z.object({ label: z.string() }).passthrough()).min(1),
  scores: z.record(
    z.string(),
    z.object({ items: z.record(z.string(), z.array(itemOutcomeSchema)).optional() }).passthrough(),
  ),
});
export type PairableScores = z.infer<typeof pairableScoresSchema>;

/**
 * Reads a parsed scores.json for pairing; a file that is not one, or one written before item
 * outcomes were stored, is refused naming the file (exit 2).
 */
export function parsePairableScores(value: unknown, name: string): PairableScores {
  const parsed = pairableScoresSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BadInputError(
      'EVAL_BAD_SCORES',
      `${name} is not an eval scores.json (${issue.path.length > 0 ? `${issue.path.join('.')}: ` : ''}${issue.message}); give the scores.json an eval stage wrote, or its manifest.json`,
    );
  }
  const labels = parsed.data.models.map((model) => model.label);
  if (labels.every((label) => parsed.data.scores[label]?.items === undefined))
    throw new BadInputError(
      'EVAL_SCORES_NO_ITEMS',
      `${name} has no per-item outcomes (scores.<label>.items; written before they were stored); rerun the eval stage to pair its items`,
    );
  return parsed.data;
}

/** One paired cell: B − A over the items both have. */
export interface PairedCell {
  suite: string;
  /** Absent: the whole suite. */
  category?: string;
  difference: Interval;
}

export interface FlippedItem {
  suite: string;
  id: string;
  category?: string;
  a: number;
  b: number;
}

export interface ScoresComparison {
  a: { name: string; runId: string; label: string };
  b: { name: string; runId: string; label: string };
  /** Per suite (headline items), then per category within it. */
  suites: PairedCell[];
  categories: PairedCell[];
  /** Items that passed (score ≥ 50) in one run and not in the other: `gained` passed in B only. */
  gained: FlippedItem[];
  lost: FlippedItem[];
  /** Items not paired: only in A, only in B, or the same id with another prompt. */
  unpaired: Record<string, { onlyA: number; onlyB: number; promptChanged: number }>;
}

/** An item passes when it scores at least this (IFEval and custom items score 0 or 100). */
export const PASS_SCORE = 50;

/** The items that make a suite's headline (what the eval's own paired comparisons use). */
function headlineItems(suite: string, items: readonly ItemOutcome[]): ItemOutcome[] {
  return items.filter((item) => item.score !== null && (suite !== 'harness_variant_qa' || item.harness === 'variant'));
}

function labelOf(scores: PairableScores, requested: string | undefined, name: string): string {
  const labels = scores.models.map((model) => model.label);
  const label = requested ?? labels[0];
  if (!labels.includes(label) || !scores.scores[label]?.items)
    throw new BadInputError(
      'EVAL_COMPARE_UNKNOWN_LABEL',
      `${name} has no per-item outcomes for model "${label}" (labels: ${labels.join(', ')}); name one with --label-a/--label-b`,
    );
  return label;
}

/**
 * Pairs the items of model `labelA` in A with those of `labelB` in B (default: each file's first
 * model) and gives B − A per suite and category with a paired-bootstrap 95% interval (seeded),
 * and the items that flipped between pass and fail.
 */
export function compareScores(
  a: { scores: PairableScores; name: string; label?: string },
  b: { scores: PairableScores; name: string; label?: string },
  options: { samples: number; seed: string },
): ScoresComparison {
  const labelA = labelOf(a.scores, a.label, a.name);
  const labelB = labelOf(b.scores, b.label, b.name);
  const itemsA = a.scores.scores[labelA].items ?? {};
  const itemsB = b.scores.scores[labelB].items ?? {};
  const suites: PairedCell[] = [];
  const categories: PairedCell[] = [];
  const gained: FlippedItem[] = [];
  const lost: FlippedItem[] = [];
  const unpaired: ScoresComparison['unpaired'] = {};
  const suiteNames = Object.keys(itemsA).filter((suite) => suite in itemsB);
  for (const suite of suiteNames) {
    const left = new Map(headlineItems(suite, itemsA[suite]).map((item) => [item.id, item]));
    const right = new Map(headlineItems(suite, itemsB[suite]).map((item) => [item.id, item]));
    const shared: Array<[ItemOutcome, ItemOutcome]> = [];
    let promptChanged = 0;
    for (const [id, item] of left) {
      const other = right.get(id);
      if (!other) continue;
      if (other.prompt !== item.prompt) promptChanged += 1;
      else shared.push([item, other]);
    }
    shared.sort(([x], [y]) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
    unpaired[suite] = {
      onlyA: [...left.keys()].filter((id) => !right.has(id)).length,
      onlyB: [...right.keys()].filter((id) => !left.has(id)).length,
      promptChanged,
    };
    if (shared.length === 0) continue;
    const cell = (pairs: Array<[ItemOutcome, ItemOutcome]>, seed: string) =>
      pairedDifference(
        pairs.map(([, item]) => item.score as number),
        pairs.map(([item]) => item.score as number),
        options.samples,
        seed,
      );
    suites.push({ suite, difference: cell(shared, `${options.seed}/compare/${suite}`) });
    const byCategory = new Map<string, Array<[ItemOutcome, ItemOutcome]>>();
    for (const pair of shared) {
      const category = pair[1].category ?? pair[0].category;
      if (category === undefined) continue;
      byCategory.set(category, [...(byCategory.get(category) ?? []), pair]);
    }
    for (const [category, pairs] of [...byCategory].sort(([x], [y]) => (x < y ? -1 : 1)))
      categories.push({ suite, category, difference: cell(pairs, `${options.seed}/compare/${suite}/${category}`) });
    for (const [itemA, itemB] of shared) {
      const passedA = (itemA.score as number) >= PASS_SCORE;
      const passedB = (itemB.score as number) >= PASS_SCORE;
      if (passedA === passedB) continue;
      const flipped: FlippedItem = {
        suite,
        id: itemA.id,
        ...((itemB.category ?? itemA.category) !== undefined ? { category: itemB.category ?? itemA.category } : {}),
        a: itemA.score as number,
        b: itemB.score as number,
      };
      (passedB ? gained : lost).push(flipped);
    }
  }
  return {
    a: { name: a.name, runId: a.scores.runId, label: labelA },
    b: { name: b.name, runId: b.scores.runId, label: labelB },
    suites,
    categories,
    gained,
    lost,
    unpaired,
  };
}

const signed = (value: number, digits = 2) => `${value >= 0 ? '+' : ''}${value.toFixed(digits)}`;

/** `+1.25 [-0.50, +3.00] (40 items)`, with ` *` when the interval excludes 0. */
export function formatDifference(difference: Interval): string {
  const clear = difference.low > 0 || difference.high < 0;
  return `${signed(difference.score)} [${signed(difference.low)}, ${signed(difference.high)}] (${difference.items} items)${clear ? ' *' : ''}`;
}

/** The comparison as text a person reads. */
export function formatScoresComparison(comparison: ScoresComparison, listLimit = 20): string {
  const lines = [
    `A: ${comparison.a.name} (run ${comparison.a.runId}, model ${comparison.a.label})`,
    `B: ${comparison.b.name} (run ${comparison.b.runId}, model ${comparison.b.label})`,
    'B − A per item, paired bootstrap 95% interval; * = the interval excludes 0',
    '',
  ];
  if (comparison.suites.length === 0) lines.push('no item is in both (nothing to pair)');
  for (const cell of comparison.suites) {
    lines.push(`${cell.suite}: ${formatDifference(cell.difference)}`);
    for (const category of comparison.categories.filter((entry) => entry.suite === cell.suite))
      lines.push(`  ${category.category}: ${formatDifference(category.difference)}`);
    const unpaired = comparison.unpaired[cell.suite];
    if (unpaired && unpaired.onlyA + unpaired.onlyB + unpaired.promptChanged > 0)
      lines.push(
        `  not paired: ${unpaired.onlyA} only in A, ${unpaired.onlyB} only in B, ${unpaired.promptChanged} with another prompt under the same id`,
      );
  }
  for (const [title, list] of [
    ['passed in A, failed in B', comparison.lost],
    ['failed in A, passed in B', comparison.gained],
  ] as const) {
    lines.push('', `${title}: ${list.length}`);
    for (const item of list.slice(0, listLimit))
      lines.push(
        `  ${item.suite} ${item.id}${item.category ? ` (${item.category})` : ''}: ${item.a.toFixed(1)} -> ${item.b.toFixed(1)}`,
      );
    if (list.length > listLimit) lines.push(`  … ${list.length - listLimit} more (--json lists all)`);
  }
  return `${lines.join('\n')}\n`;
}
