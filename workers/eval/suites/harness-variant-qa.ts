import { referenceSharesSchema } from '../../../shared/simulator/tasks/task-generator';
import { z } from 'zod';
import { loadHarnessFromUri } from '../../../queues/stage-kit/load-harness-from-uri';
import { HatError, BadInputError } from '../../../shared/errors';
import { harnessHash } from '../../../shared/harness/harness-hash';
import type { FamilyWeights } from '../../../shared/harness/hsa/generate-variant';
import { hsaFamilies, hsaFamilySchema, type HsaFamily } from '../../../shared/harness/hsa/variant-mapping';
import { Rng } from '../../../shared/random/rng';
import { textStyles } from '../../../shared/simulator/world/text-style';
import { taskCategories, taskSchema } from '../../../shared/simulator/tasks/task-schema';
import { bootstrapMean, bootstrapStatistic, mean, type Interval } from '../bootstrap-interval';
import type { EvalResult } from '../eval-part';
import { fixed, intervalTable } from '../report-cells';
import { defineEvalSuite } from './eval-suite';
import { trainedHeldOutFamilies, trainedHeldOutVariants } from './held-out-operators';
import {
  group,
  meanStderr,
  heldOutTasks,
  intervals,
  itemHarnessSchema,
  playEpisode,
  rebuildVariant,
  refuseDuplicateIds,
  scoreOf,
  seedValue,
} from './suite-kit';

/**
 * Harness-Variant QA: held-out tasks, each under the canonical harness, seeded HSA variants, seen
 * variants from training's augment outputs and, with `heldOutFamilies`, one variant applying only
 * held-out operators. Headline: the mean over variant items; the gap is canonical − variant.
 */

export const harnessVariantQaSchema = z
  .object({
    /** Tasks, each played under the canonical harness and its variants. Default 22 (2 per category). */
    size: z.number().int().min(1).max(100_000).default(22),
    /** Seed of tasks and variants. Default "eval/harness_variant_qa". */
    seed: seedValue.default('eval/harness_variant_qa'),
    /** HSA variants per task. Default 2. */
    variantsPerTask: z.number().int().min(1).max(32).default(2),
    /** Share of variant draws that apply each family. Default 0.6 each. */
    families: z
      .partialRecord(hsaFamilySchema, z.number().min(0).max(1))
      .default(Object.fromEntries(hsaFamilies.map((family) => [family, 0.6]))),
    /**
     * Held-out transform operators: families excluded from training augmentation. Every task gets
     * one extra variant applying only these families; their scores are reported apart. Default none.
     */
    heldOutFamilies: z.array(hsaFamilySchema).default([]),
    /** Task categories, in turn (e.g. those the harness's tools answer). Default: every category. */
    categories: z.array(z.enum(taskCategories)).min(1).optional(),
    /** How viewers refer to items in the generated tasks (as collect's `generate.references`). */
    references: referenceSharesSchema.optional(),
    /** The text of the generated tasks (as collect's `generate.text`): `default` or `cjk-heavy`. Default `default`. */
    text: z.enum(textStyles).optional(),
    /**
     * Variants training saw, per task: drawn (seeded) from the HSA variants stored by the augment
     * outputs in `trainingManifests` (`variants/<hash>/`) and reported as `seen_variants`. Default 0.
     */
    seenVariantsPerTask: z.number().int().min(0).max(32).default(0),
  })
  .strict();

export const harnessVariantQaItemSchema = z.object({
  suite: z.literal('harness_variant_qa'),
  id: z.string(),
  category: z.string(),
  taskId: z.string(),
  task: taskSchema,
  harness: itemHarnessSchema,
});

export interface HarnessVariantBreakdown {
  canonical: Interval;
  variant: Interval;
  /** canonical − variant, with a bootstrap interval over tasks. */
  gap: Interval;
  heldOutVariants: Interval | null;
  heldOutOperators: Interval | null;
  /** Share of variant items whose hash is in no training manifest given. */
  heldOutVariantShare: number;
  byFamily: Record<string, Interval>;
  byCategory: Record<string, Interval>;
}

type HarnessVariantItem = z.infer<typeof harnessVariantQaItemSchema>;

export const harnessVariantQaSuite = defineEvalSuite({
  name: 'harness_variant_qa',
  version: 1,
  title: 'Harness-Variant QA',
  shortName: 'HVQA',
  configSchema: harnessVariantQaSchema,
  itemSchema: harnessVariantQaItemSchema,
  needsHarness: true,
  usesTrainingFootprint: true,
  headlineMetric: 'harness_variant_qa.variant',

  async buildItems(variantSuite, { canonical, footprint }) {
    if (!canonical)
      throw new HatError(
        'EVAL_NO_HARNESS',
        'harness_variant_qa needs the canonical harness; plan loads it for the episode suites, so this is a bug',
      );
    const trainingVariants = footprint.variantHashes;
    const tasks = heldOutTasks(
      variantSuite.size,
      variantSuite.seed,
      variantSuite.categories,
      variantSuite.references,
      variantSuite.text,
    );
    const stored = [...footprint.variantDirs.keys()].sort();
    if (variantSuite.seenVariantsPerTask > stored.length)
      throw new BadInputError(
        'EVAL_NO_SEEN_VARIANTS',
        `suites.harness_variant_qa.seenVariantsPerTask is ${variantSuite.seenVariantsPerTask}, but the augment outputs of trainingManifests store ${stored.length} variant(s); name the augment manifest in trainingManifests or lower seenVariantsPerTask`,
      );
    const items: HarnessVariantItem[] = [];
    const heldOutWeights = Object.fromEntries(
      hsaFamilies.map((family) => [family, variantSuite.heldOutFamilies.includes(family) ? 1 : 0]),
    );
    for (const [taskIndex, task] of tasks.entries()) {
      items.push({
        suite: 'harness_variant_qa',
        id: `${task.id}/canonical`,
        category: task.category,
        taskId: task.id,
        task,
        harness: { kind: 'canonical' },
      });
      const draws: Array<{ seed: string; weights: FamilyWeights; heldOutOperator: boolean }> = Array.from(
        { length: variantSuite.variantsPerTask },
        (_, variantIndex) => ({
          seed: `${variantSuite.seed}/task-${taskIndex}/variant-${variantIndex}`,
          weights: variantSuite.families,
          heldOutOperator: false,
        }),
      );
      if (variantSuite.heldOutFamilies.length > 0)
        draws.push({
          seed: `${variantSuite.seed}/task-${taskIndex}/held-out-operator`,
          weights: heldOutWeights,
          heldOutOperator: true,
        });
      const seenRng = new Rng(`${variantSuite.seed}/task-${taskIndex}/seen`);
      for (const hash of seenRng.sample(stored, variantSuite.seenVariantsPerTask)) {
        const uri = footprint.variantDirs.get(hash) as string;
        items.push({
          suite: 'harness_variant_qa',
          id: `${task.id}/${hash.slice(0, 12)}`,
          category: task.category,
          taskId: task.id,
          task,
          harness: {
            kind: 'variant',
            uri,
            hash,
            families: (footprint.variantFamilies.get(hash) ?? []).filter((family): family is HsaFamily =>
              (hsaFamilies as readonly string[]).includes(family),
            ),
            heldOutVariant: false,
            heldOutOperator: false,
          },
        });
      }
      for (const draw of draws) {
        const variant = rebuildVariant(canonical, draw.seed, draw.weights);
        items.push({
          suite: 'harness_variant_qa',
          id: `${task.id}/${variant.hash.slice(0, 12)}`,
          category: task.category,
          taskId: task.id,
          task,
          harness: {
            kind: 'variant',
            seed: draw.seed,
            weights: draw.weights,
            hash: variant.hash,
            families: variant.families,
            heldOutVariant: !trainingVariants.has(variant.hash),
            heldOutOperator: draw.heldOutOperator,
          },
        });
      }
    }
    refuseDuplicateIds(items, 'suites.harness_variant_qa');
    return { items, lineage: [] };
  },

  promptText: (item) => item.task.turns.map((turn) => turn.message).join('\n'),
  simulatorTask: (item) => item.task,
  failedChecks: () => [],

  trainedHeldOutFamilies(config, footprint, allowOverlap) {
    const trained = trainedHeldOutFamilies(config.heldOutFamilies, footprint);
    if (trained.length > 0 && !allowOverlap)
      throw new BadInputError(
        'EVAL_HELD_OUT_TRAINED',
        `suites.harness_variant_qa.heldOutFamilies: training used ${trained.map((entry) => `${entry.family} in ${entry.variants} variant(s) of stage ${entry.stage}`).join(', ')} (records of trainingManifests); ` +
          'hold the family out of augment and rl (families: { <family>: 0 }) or out of the shard (heldOut: { families: [...] }), name another family, or set allowOverlap: true to report it as a flagged figure',
      );
    return trained;
  },

  trainedHeldOutItems(items, footprint, allowOverlap) {
    const trained = trainedHeldOutVariants(items, footprint);
    if (trained.length > 0 && !allowOverlap)
      throw new BadInputError(
        'EVAL_HELD_OUT_TRAINED',
        `suites.harness_variant_qa: ${trained.length} held-out operator variant(s) appear in training data: ${trained
          .slice(0, 5)
          .map((entry) => `${entry.itemId} (variant ${entry.hash.slice(0, 12)}, stage ${entry.stages.join(', ')})`)
          .join(
            ', ',
          )}; draw other variants (suites.harness_variant_qa.seed) or set allowOverlap: true to report them as a flagged figure`,
      );
    return trained;
  },

  async prepareHarness(item, { canonical, openObject }) {
    if (item.harness.kind === 'canonical') return canonical;
    if (item.harness.uri !== undefined) {
      // A variant training saw, as the augment stage stored it.
      const stored = await loadHarnessFromUri(item.harness.uri, openObject);
      return {
        harness: stored,
        hash: harnessHash(stored),
        variant: { hash: item.harness.hash, families: item.harness.families },
      };
    }
    const variant = rebuildVariant(canonical!.harness, item.harness.seed ?? '', item.harness.weights ?? {});
    if (variant.hash !== item.harness.hash)
      throw new HatError(
        'EVAL_VARIANT_CHANGED',
        `variant ${item.harness.hash.slice(0, 12)} of item ${item.id} rebuilt differently (${variant.hash.slice(0, 12)}); the HSA code changed since the plan: rerun the whole stage`,
      );
    return {
      harness: variant.harness,
      hash: harnessHash(variant.harness),
      variant: { hash: variant.hash, families: variant.families },
    };
  },

  evaluate: (item, context) =>
    playEpisode(item.task, context, {
      category: item.category,
      harness:
        item.harness.kind === 'canonical'
          ? { kind: 'canonical' as const }
          : {
              kind: 'variant' as const,
              hash: item.harness.hash,
              families: item.harness.families,
              heldOutVariant: item.harness.heldOutVariant,
              heldOutOperator: item.harness.heldOutOperator,
            },
    }),

  outcomeScore: (result) => result.score,
  // The headline is over variant items: comparisons pair those.
  comparable: (result) => result.harness?.kind === 'variant',

  score(results, { samples, seed }) {
    const breakdown = scoreVariants(results, samples, seed);
    const metrics: Record<string, number> = {
      harness_variant_qa: breakdown.variant.score,
      'harness_variant_qa.variant': breakdown.variant.score,
      'harness_variant_qa.canonical': breakdown.canonical.score,
      'harness_variant_qa.gap': breakdown.gap.score,
    };
    if (breakdown.heldOutVariants) metrics['harness_variant_qa.held_out_variants'] = breakdown.heldOutVariants.score;
    if (breakdown.heldOutOperators) metrics['harness_variant_qa.held_out_operators'] = breakdown.heldOutOperators.score;
    for (const [family, cell] of Object.entries(breakdown.byFamily))
      metrics[`harness_variant_qa.${family}`] = cell.score;
    return { breakdown, headline: breakdown.variant, metrics };
  },

  reportHtml({ labels, modelName, breakdownOf }) {
    const rows: Array<[string, Array<Interval | null | undefined>]> = labels.map((label) => {
      const breakdown = breakdownOf(label);
      return [
        modelName(label),
        [
          breakdown?.canonical,
          breakdown?.variant,
          breakdown?.gap,
          breakdown?.heldOutVariants,
          breakdown?.heldOutOperators,
        ],
      ];
    });
    const share = labels.map((label) => breakdownOf(label)?.heldOutVariantShare).find((value) => value !== undefined);
    const families = [...new Set(labels.flatMap((label) => Object.keys(breakdownOf(label)?.byFamily ?? {})))].sort();
    return (
      `<h2>Harness-Variant QA</h2><p class="meta">Canonical harness vs HSA variants of the same tasks; gap = canonical − variant (interval over tasks). Held-out variants: hashes in no training manifest given (${fixed((share ?? 0) * 100)}% of variants). Held-out operators: variants applying only families excluded from training augmentation.</p>` +
      intervalTable(['canonical', 'variant', 'gap', 'held-out variants', 'held-out operators'], rows) +
      '\n' +
      `<h3>By HSA family</h3>${intervalTable(
        labels.map(modelName),
        families.map((family) => [family, labels.map((label) => breakdownOf(label)?.byFamily[family])]),
      )}`
    );
  },

  lmEvalMetrics(breakdown, results) {
    const variants = results.filter((result) => result.harness?.kind === 'variant').map((r) => scoreOf(r) / 100);
    const canonical = results.filter((result) => result.harness?.kind === 'canonical').map((r) => scoreOf(r) / 100);
    return [
      { name: 'score', value: breakdown.variant.score / 100, stderr: meanStderr(variants), higherIsBetter: true },
      {
        name: 'canonical',
        value: breakdown.canonical.score / 100,
        stderr: meanStderr(canonical),
        higherIsBetter: true,
      },
      { name: 'gap', value: breakdown.gap.score / 100, stderr: 'N/A', higherIsBetter: false },
    ];
  },
});

/** Canonical vs variant scores, the gap (bootstrap over tasks), held-out variants and operators, per family. */
function scoreVariants(results: EvalResult[], samples: number, seed: string): HarnessVariantBreakdown {
  const canonical = results.filter((result) => result.harness?.kind === 'canonical');
  const variants = results.filter((result) => result.harness?.kind === 'variant');
  const taskOf = (result: EvalResult) => result.itemId.slice(0, result.itemId.lastIndexOf('/'));
  const tasks = [...group(results, taskOf).entries()].map(([, list]) => ({
    canonical: list.filter((result) => result.harness?.kind === 'canonical').map(scoreOf),
    variant: list.filter((result) => result.harness?.kind === 'variant').map(scoreOf),
  }));
  const gapOf = (indices: readonly number[]) => {
    const chosen = indices.map((index) => tasks[index]);
    return mean(chosen.flatMap((task) => task.canonical)) - mean(chosen.flatMap((task) => task.variant));
  };
  const gapBounds = bootstrapStatistic(tasks.length, gapOf, samples, `${seed}/gap`);
  const heldOutVariants = variants.filter((result) => result.harness?.heldOutVariant);
  const heldOutOperators = variants.filter((result) => result.harness?.heldOutOperator);
  const byFamily = new Map<string, EvalResult[]>();
  for (const result of variants)
    for (const family of result.harness?.families ?? [])
      byFamily.set(family, [...(byFamily.get(family) ?? []), result]);
  return {
    canonical: bootstrapMean(canonical.map(scoreOf), samples, `${seed}/canonical`),
    variant: bootstrapMean(variants.map(scoreOf), samples, `${seed}/variant`),
    gap: {
      score: gapOf(tasks.map((_, index) => index)),
      low: gapBounds.low,
      high: gapBounds.high,
      items: tasks.length,
    },
    heldOutVariants:
      heldOutVariants.length > 0
        ? bootstrapMean(heldOutVariants.map(scoreOf), samples, `${seed}/held-out-variants`)
        : null,
    heldOutOperators:
      heldOutOperators.length > 0
        ? bootstrapMean(heldOutOperators.map(scoreOf), samples, `${seed}/held-out-operators`)
        : null,
    heldOutVariantShare: variants.length > 0 ? heldOutVariants.length / variants.length : 0,
    byFamily: intervals(
      new Map([...byFamily].sort(([left], [right]) => (left < right ? -1 : 1))),
      samples,
      `${seed}/family`,
    ),
    byCategory: intervals(
      group(variants, (result) => result.category),
      samples,
      `${seed}/category`,
    ),
  };
}
