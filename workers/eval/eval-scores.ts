import { scoreIfeval, type IfevalScores } from '../../shared/eval/ifeval';
import type { ItemOutcome } from '../../shared/eval/item-outcomes';
import { sha256Hex } from '../../shared/hash/hash';
import { bootstrapMean, bootstrapStatistic, mean, pairedDifference, type Interval } from './bootstrap-interval';
import type { Overlap, TrainedFamily } from './contamination';
import type { SuiteName } from './eval-contract';
import type { ExperimentOutcome } from './eval-experiment';
import type { EvalResult } from './eval-part';

/** 2: per-model error rate, failures and per-item outcomes (#33). */
export const EVAL_SCORES_SCHEMA_VERSION = 2;

/** Who was evaluated, as scores.json records it (never a secret: model configs name keys by env or file only). */
export interface ScoredModel {
  label: string;
  provider: string;
  modelId: string;
  /** The model config as given (adapter, endpoint, model name). */
  config: Record<string, unknown>;
  simulated: boolean;
  /** Why it is not a real model (test server, random weights, simulation policy). */
  simulatedReason?: string;
}

/** An item whose request failed or timed out: scored 0 on every check it carries. */
export interface ItemFailure {
  suite: string;
  itemId: string;
  status: 'model_error' | 'timeout';
  error: string;
}

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

export interface ModelScores {
  /** Flat metric name → value (0–100), what gate rules read: `live_stream_qa`, `ifeval.prompt_strict`, ... */
  metrics: Record<string, number>;
  live_stream_qa?: {
    overall: Interval;
    byCategory: Record<string, Interval>;
    components: Record<string, number>;
    byOrigin: Record<string, Interval>;
  };
  harness_variant_qa?: HarnessVariantBreakdown;
  ifeval?: IfevalScores & { promptStrictInterval: Interval };
  custom?: {
    overall: Interval | null;
    instructionStrict: number | null;
    instructionLoose: number | null;
    promptLoose: number | null;
  };
  /** Judge scores, reported apart from rule scores; `missing` items had no verdict. */
  judge?: Record<string, { overall: Interval | null; missing: number }>;
  modelErrors: number;
  /** Items it was asked (every suite it took). */
  evaluated: number;
  /** modelErrors / evaluated (0–1): what the gate's maxErrorRate reads. */
  errorRate: number;
  /** Each failed or timed-out item, with the error. */
  failures: ItemFailure[];
  /** Suite → every item's outcome, with stable ids: what `hat eval compare` pairs across runs. */
  items: Record<string, ItemOutcome[]>;
  /** Mean summed latency per item, ms (wall time). */
  meanLatencyMs: Record<string, number>;
}

export interface Comparison {
  a: string;
  b: string;
  suite: string;
  /** Mean of a − b over the items both answered, with a paired-bootstrap 95% interval. */
  difference: Interval;
}

export interface EvalScores {
  schemaVersion: number;
  runId: string;
  seed: string;
  models: ScoredModel[];
  suites: Record<string, { items: number }>;
  /** Label → suite → headline score (0–100) with its interval. */
  leaderboard: Record<string, Record<string, Interval>>;
  scores: Record<string, ModelScores>;
  comparisons: Comparison[];
  judge?: { model: string; rubricVersion: string; rubricHash: string; suites: string[]; missing: number };
  contamination: {
    manifests: string[];
    checked: number;
    overlapping: Overlap[];
    allowOverlap: boolean;
    /** Text overlap settings (config `contamination`). */
    ngram?: { n: number; threshold: number };
    /** Held-out families and operator variants training used (allowOverlap: true; refused otherwise): a flagged figure. */
    heldOutTrained?: { families: TrainedFamily[]; variants: Array<{ itemId: string; hash: string; stages: string[] }> };
  };
  /** Response cache (config `cache`): model calls answered from the cache and asked of the endpoint, per label. */
  cache?: { prefix: string; models: Record<string, { hits: number; misses: number }> };
  /** Arms of an experiment (config `experiment`): table, paired differences, claims, curves. */
  experiment?: ExperimentOutcome;
}

/** The headline score of a suite: what the leaderboard and an unqualified gate metric mean. */
export const headlineMetric: Record<SuiteName, string> = {
  live_stream_qa: 'live_stream_qa',
  harness_variant_qa: 'harness_variant_qa.variant',
  ifeval: 'ifeval.prompt_strict',
  custom: 'custom',
};

function group<T>(values: readonly T[], keyOf: (value: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const value of values) {
    const key = keyOf(value);
    if (key === undefined) continue;
    const list = groups.get(key) ?? [];
    list.push(value);
    groups.set(key, list);
  }
  return new Map([...groups.entries()].sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)));
}

const scoreOf = (result: EvalResult): number => result.score ?? 0;

const compareText = (left: string, right: string) => (left < right ? -1 : left > right ? 1 : 0);

/** Each item's headline score with its stable id (what the paired comparisons use), sorted by id. */
function itemOutcomes(results: readonly EvalResult[]): ItemOutcome[] {
  return results
    .map((result) => ({
      id: result.itemId,
      score:
        result.suite === 'ifeval' ? (result.followedStrict ? 100 : 0) : result.score === null ? null : result.score,
      ...(result.category !== undefined ? { category: result.category } : {}),
      ...(result.harness ? { harness: result.harness.kind } : {}),
      ...(result.status === 'model_error' || result.status === 'timeout' ? { failed: true } : {}),
      prompt: sha256Hex(result.prompt).slice(0, 16),
    }))
    .sort((left, right) => compareText(left.id, right.id));
}

function intervals(groups: Map<string, EvalResult[]>, samples: number, seed: string): Record<string, Interval> {
  return Object.fromEntries(
    [...groups].map(([key, list]) => [key, bootstrapMean(list.map(scoreOf), samples, `${seed}/${key}`)]),
  );
}

/** Live-Stream QA: mean verifier score × 100, per category, per origin (generated vs imported), mean components. */
function scoreLive(results: EvalResult[], samples: number, seed: string): NonNullable<ModelScores['live_stream_qa']> {
  const components: Record<string, number> = {};
  for (const name of [...new Set(results.flatMap((result) => Object.keys(result.components ?? {})))].sort()) {
    components[name] = mean(results.map((result) => (result.components?.[name] ?? 0) * 100));
  }
  return {
    overall: bootstrapMean(results.map(scoreOf), samples, seed),
    byCategory: intervals(
      group(results, (result) => result.category),
      samples,
      `${seed}/category`,
    ),
    components,
    byOrigin: intervals(
      group(results, (result) => result.origin),
      samples,
      `${seed}/origin`,
    ),
  };
}

/** Harness-Variant QA: canonical vs variant scores, the gap (bootstrap over tasks), held-out variants and operators, per family. */
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

function scoreIfevalSuite(results: EvalResult[], samples: number, seed: string): NonNullable<ModelScores['ifeval']> {
  const itemResults = results.map((result) => ({
    key: Number(result.itemId.replace(/^ifeval-/, '')),
    instructionIds: result.checks.map((check) => check.name),
    strict: result.checks.map((check) => check.strict),
    loose: result.checks.map((check) => check.loose),
    followedStrict: result.followedStrict ?? false,
    followedLoose: result.followedLoose ?? false,
  }));
  return {
    ...scoreIfeval(itemResults),
    promptStrictInterval: bootstrapMean(
      results.map((result) => (result.followedStrict ? 100 : 0)),
      samples,
      seed,
    ),
  };
}

function scoreCustom(results: EvalResult[], samples: number, seed: string): NonNullable<ModelScores['custom']> {
  const ruled = results.filter((result) => result.score !== null);
  const checks = ruled.flatMap((result) => result.checks);
  const share = (values: boolean[]) =>
    values.length === 0 ? null : (values.filter(Boolean).length / values.length) * 100;
  return {
    overall: ruled.length > 0 ? bootstrapMean(ruled.map(scoreOf), samples, seed) : null,
    instructionStrict: share(checks.map((check) => check.strict)),
    instructionLoose: share(checks.map((check) => check.loose)),
    promptLoose: share(ruled.map((result) => result.followedLoose ?? false)),
  };
}

export interface BuildScoresOptions {
  runId: string;
  seed: string;
  models: ScoredModel[];
  /** Suites in config order. */
  suites: SuiteName[];
  /** Items per suite (as planned). */
  itemCounts: Record<string, number>;
  compare: Array<[string, string]>;
  bootstrapSamples: number;
  judge?: EvalScores['judge'];
  contamination: EvalScores['contamination'];
}

/** scores.json from every result of every model (deterministic: same results and seed, same bytes). */
export function buildEvalScores(results: readonly EvalResult[], options: BuildScoresOptions): EvalScores {
  const samples = options.bootstrapSamples;
  const scores: Record<string, ModelScores> = {};
  const leaderboard: Record<string, Record<string, Interval>> = {};
  for (const model of options.models) {
    const own = results.filter((result) => result.model === model.label);
    const metrics: Record<string, number> = {};
    const failed = own.filter((result) => result.status === 'model_error' || result.status === 'timeout');
    const entry: ModelScores = {
      metrics,
      modelErrors: failed.length,
      evaluated: own.length,
      errorRate: own.length === 0 ? 0 : failed.length / own.length,
      failures: failed
        .map((result) => ({
          suite: result.suite,
          itemId: result.itemId,
          status: result.status as ItemFailure['status'],
          error: result.error ?? result.status,
        }))
        .sort((left, right) =>
          left.suite === right.suite ? compareText(left.itemId, right.itemId) : compareText(left.suite, right.suite),
        ),
      items: {},
      meanLatencyMs: {},
    };
    const board: Record<string, Interval> = {};
    for (const suite of options.suites) {
      const list = own.filter((result) => result.suite === suite);
      // A model that did not take this suite has no score on it (not a zero).
      if (list.length === 0) continue;
      const seed = `${options.seed}/${model.label}/${suite}`;
      entry.meanLatencyMs[suite] = mean(list.map((result) => result.latencyMs));
      entry.items[suite] = itemOutcomes(list);
      if (suite === 'live_stream_qa') {
        const live = scoreLive(list, samples, seed);
        entry.live_stream_qa = live;
        board[suite] = live.overall;
        metrics.live_stream_qa = live.overall.score;
        for (const [category, cell] of Object.entries(live.byCategory))
          metrics[`live_stream_qa.${category}`] = cell.score;
        for (const [component, value] of Object.entries(live.components))
          metrics[`live_stream_qa.component.${component}`] = value;
      } else if (suite === 'harness_variant_qa') {
        const variants = scoreVariants(list, samples, seed);
        entry.harness_variant_qa = variants;
        board[suite] = variants.variant;
        metrics.harness_variant_qa = variants.variant.score;
        metrics['harness_variant_qa.variant'] = variants.variant.score;
        metrics['harness_variant_qa.canonical'] = variants.canonical.score;
        metrics['harness_variant_qa.gap'] = variants.gap.score;
        if (variants.heldOutVariants) metrics['harness_variant_qa.held_out_variants'] = variants.heldOutVariants.score;
        if (variants.heldOutOperators)
          metrics['harness_variant_qa.held_out_operators'] = variants.heldOutOperators.score;
        for (const [family, cell] of Object.entries(variants.byFamily))
          metrics[`harness_variant_qa.${family}`] = cell.score;
      } else if (suite === 'ifeval') {
        const ifeval = scoreIfevalSuite(list, samples, seed);
        entry.ifeval = ifeval;
        board[suite] = { ...ifeval.promptStrictInterval, score: ifeval.promptStrict };
        metrics.ifeval = ifeval.promptStrict;
        metrics['ifeval.prompt_strict'] = ifeval.promptStrict;
        metrics['ifeval.instruction_strict'] = ifeval.instructionStrict;
        metrics['ifeval.prompt_loose'] = ifeval.promptLoose;
        metrics['ifeval.instruction_loose'] = ifeval.instructionLoose;
      } else {
        const custom = scoreCustom(list, samples, seed);
        entry.custom = custom;
        if (custom.overall) {
          board[suite] = custom.overall;
          metrics.custom = custom.overall.score;
        }
        if (custom.instructionStrict !== null) metrics['custom.instruction_strict'] = custom.instructionStrict;
        if (custom.promptLoose !== null) metrics['custom.prompt_loose'] = custom.promptLoose;
        if (custom.instructionLoose !== null) metrics['custom.instruction_loose'] = custom.instructionLoose;
      }
      const judged = list.filter((result) => result.judge !== undefined);
      if (judged.length > 0) {
        const present = judged
          .filter((result) => result.judge?.score !== null && result.judge?.score !== undefined)
          .map((result) => result.judge!.score as number);
        entry.judge ??= {};
        entry.judge[suite] = {
          overall: present.length > 0 ? bootstrapMean(present, samples, `${seed}/judge`) : null,
          missing: judged.length - present.length,
        };
        if (present.length > 0) metrics[`judge.${suite}`] = mean(present);
      }
    }
    scores[model.label] = entry;
    leaderboard[model.label] = board;
  }
  const comparisons: Comparison[] = [];
  for (const [a, b] of options.compare) {
    for (const suite of options.suites) {
      const headline = (label: string) =>
        new Map(
          results
            .filter(
              (result) =>
                result.model === label &&
                result.suite === suite &&
                (suite !== 'harness_variant_qa' || result.harness?.kind === 'variant') &&
                (suite !== 'custom' || result.score !== null),
            )
            .map((result) => [result.itemId, suite === 'ifeval' ? (result.followedStrict ? 100 : 0) : scoreOf(result)]),
        );
      const left = headline(a);
      const right = headline(b);
      const shared = [...left.keys()].filter((id) => right.has(id)).sort();
      if (shared.length === 0) continue;
      comparisons.push({
        a,
        b,
        suite,
        difference: pairedDifference(
          shared.map((id) => left.get(id)!),
          shared.map((id) => right.get(id)!),
          samples,
          `${options.seed}/paired/${a}/${b}/${suite}`,
        ),
      });
    }
  }
  return {
    schemaVersion: EVAL_SCORES_SCHEMA_VERSION,
    runId: options.runId,
    seed: options.seed,
    models: options.models,
    suites: Object.fromEntries(options.suites.map((suite) => [suite, { items: options.itemCounts[suite] ?? 0 }])),
    leaderboard,
    scores,
    comparisons,
    ...(options.judge ? { judge: options.judge } : {}),
    contamination: options.contamination,
  };
}
