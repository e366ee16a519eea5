import type { ItemOutcome } from '../../shared/eval/item-outcomes';
import { sha256Hex } from '../../shared/hash/hash';
import { bootstrapMean, mean, pairedDifference, type Interval } from './bootstrap-interval';
import type { Overlap, TrainedFamily } from './contamination';
import type { ExperimentOutcome } from './eval-experiment';
import type { EvalResult } from './eval-part';
import type { CustomBreakdown } from './suites/custom';
import type { HarnessVariantBreakdown } from './suites/harness-variant-qa';
import type { IfevalBreakdown } from './suites/ifeval';
import type { LiveStreamQaBreakdown } from './suites/live-stream-qa';
import { evalSuiteOf } from './suites/registry';
import { compareText } from './suites/suite-kit';

export type { HarnessVariantBreakdown } from './suites/harness-variant-qa';

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

export interface ModelScores {
  /** Flat metric name → value (0–100), what gate rules read: `live_stream_qa`, `ifeval.prompt_strict`, ... */
  metrics: Record<string, number>;
  live_stream_qa?: LiveStreamQaBreakdown;
  harness_variant_qa?: HarnessVariantBreakdown;
  ifeval?: IfevalBreakdown;
  custom?: CustomBreakdown;
  /** Any other registered suite's breakdown, under its name. */
  [suite: string]: unknown;
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
  /**
   * Suite → items planned, the suite's version and the sha256 of its data (the shipped IFEval
   * prompts file, the custom prompts file, or the generated item set).
   */
  suites: Record<string, { items: number; version?: number; data?: { source: string; sha256: string } }>;
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

/** The headline metric of a suite: what the leaderboard and an unqualified gate metric mean. */
export function headlineMetricOf(suite: string): string {
  return evalSuiteOf(suite).headlineMetric;
}

/** Each item's headline score with its stable id (what the paired comparisons use), sorted by id. */
function itemOutcomes(results: readonly EvalResult[]): ItemOutcome[] {
  return results
    .map((result) => ({
      id: result.itemId,
      score: evalSuiteOf(result.suite).outcomeScore(result),
      ...(result.category !== undefined ? { category: result.category } : {}),
      ...(result.harness ? { harness: result.harness.kind } : {}),
      ...(result.status === 'model_error' || result.status === 'timeout' ? { failed: true } : {}),
      prompt: sha256Hex(result.prompt).slice(0, 16),
    }))
    .sort((left, right) => compareText(left.id, right.id));
}

export interface BuildScoresOptions {
  runId: string;
  seed: string;
  models: ScoredModel[];
  /** Suites in registry order. */
  suites: string[];
  /** Items per suite (as planned). */
  itemCounts: Record<string, number>;
  /** Suite → its version and data sha256 (plan records them). Absent: not recorded (a plan of older code). */
  suiteData?: Record<string, { version: number; data: { source: string; sha256: string } }>;
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
      const scored = evalSuiteOf(suite).score(list, { samples, seed });
      entry[suite] = scored.breakdown;
      if (scored.headline) board[suite] = scored.headline;
      Object.assign(metrics, scored.metrics);
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
      const definition = evalSuiteOf(suite);
      const comparable = (result: EvalResult) => definition.comparable?.(result) ?? true;
      const headline = (label: string) =>
        new Map(
          results
            .filter((result) => result.model === label && result.suite === suite && comparable(result))
            .map((result) => [result.itemId, definition.outcomeScore(result) ?? 0]),
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
    suites: Object.fromEntries(
      options.suites.map((suite) => [
        suite,
        { items: options.itemCounts[suite] ?? 0, ...(options.suiteData?.[suite] ?? {}) },
      ]),
    ),
    leaderboard,
    scores,
    comparisons,
    ...(options.judge ? { judge: options.judge } : {}),
    contamination: options.contamination,
  };
}
