import type { z } from 'zod';
import type { StageDeps } from '../../../queues/stage-kit/define-stage';
import type { Harness } from '../../../shared/harness/harness-types';
import type { ModelClient } from '../../../shared/models/model-client';
import type { Task } from '../../../shared/simulator/tasks/task-schema';
import type { Interval } from '../bootstrap-interval';
import type { TrainedFamily, TrainingFootprint } from '../contamination';
import type { EvalInput, EvalPartInput } from '../eval-contract';
import type { EvalResult } from '../eval-part';
import type { EvalScores } from '../eval-scores';

/**
 * One eval suite, one object (#33 item 8, #36 item 4): its config piece, how it builds items, how
 * it answers and scores one item, its leaderboard cell and metrics, its report section and its
 * lm-evaluation-harness figures. The stage (plan, parts, finish, report, run report) iterates
 * over the registry (`registry.ts`) and never names a suite; adding one is a file here and one
 * registry entry. Methods (not function-valued properties) so a suite of a narrower item type is
 * still an `AnyEvalSuite`.
 */

/** What every item has: the suite that built it and an id unique within the suite. */
export interface SuiteItem {
  suite: string;
  id: string;
}

/** The harness an episode item plays under (canonical, or a variant). */
export interface PreparedHarness {
  harness: Harness;
  hash: string;
  variant?: { hash: string; families: string[] };
}

export interface SuiteBuildContext {
  /** The whole eval config (its seed, judge, ...). */
  input: EvalInput;
  /** The canonical harness, loaded when a planned suite has `needsHarness`. */
  canonical: Harness | undefined;
  /** What training saw (empty for suites built before the training manifests are read). */
  footprint: Pick<TrainingFootprint, 'variantHashes' | 'variantDirs' | 'variantFamilies'>;
  openObject: StageDeps['openObject'];
}

export interface BuiltSuite<Item> {
  items: Item[];
  /** Input objects the items came from (manifest lineage). */
  lineage: Array<{ uri: string; sha256: string }>;
  /**
   * The data the items come from, for `scores.json` (`suites.<name>.data`): a shipped or given
   * file's sha256, or unset, when the stage records the sha256 of the built item set itself.
   */
  data?: { source: string; sha256: string };
}

/** What evaluating one item has at hand. */
export interface SuiteItemContext {
  client: ModelClient;
  /** From `prepareHarness` (episode suites). */
  harness: PreparedHarness | undefined;
  part: EvalPartInput;
  signal: AbortSignal;
  /** The item's OpenAI sampling seed (the same on every attempt). */
  samplingSeed: number;
  /** The fields every result starts with (schema version, suite, item id, model label, prompt text). */
  base: Pick<EvalResult, 'schemaVersion' | 'suite' | 'itemId' | 'model' | 'prompt'>;
}

/** One model's figures on one suite. */
export interface SuiteScore<Breakdown> {
  /** `scores.<label>.<suite>` in scores.json. */
  breakdown: Breakdown;
  /** The leaderboard cell (null: no headline, e.g. a custom suite of judge-only items). */
  headline: Interval | null;
  /** Flat metrics (what gate rules read), in the order they are written. */
  metrics: Record<string, number>;
}

export interface SuiteReportContext<Breakdown> {
  scores: EvalScores;
  labels: string[];
  /** A label as the report shows it ("(dummy weights)" added). */
  modelName: (label: string) => string;
  breakdownOf: (label: string) => Breakdown | undefined;
}

/** One lm-evaluation-harness metric of a task: value 0–1 and its standard error, or "N/A". */
export interface LmEvalMetric {
  name: string;
  value: number;
  stderr: number | 'N/A';
  higherIsBetter: boolean;
}

export interface EvalSuite<Name extends string, Schema extends z.ZodType, Item extends SuiteItem, Breakdown> {
  /** The key under `suites:` in the config, `items/<name>.jsonl.gz`, metric prefixes. */
  readonly name: Name;
  /** Bumped when item building or scoring changes what a score means; in scores.json and the lm-eval output. */
  readonly version: number;
  /** Report heading and leaderboard column. */
  readonly title: string;
  /** Run-report name (a few letters). */
  readonly shortName: string;
  /** Its piece of the config: `suites.<name>`. */
  readonly configSchema: Schema;
  /** One item as `plan` writes it (`suite: <name>` literal). */
  readonly itemSchema: z.ZodType<Item>;
  /** Items play agent episodes under the canonical harness (plan and parts load it). */
  readonly needsHarness: boolean;
  /** Items depend on what training saw (built after the training manifests are read, so not n-gram checked). */
  readonly usesTrainingFootprint: boolean;
  /** The flat metric its leaderboard cell is (what an unqualified gate metric means). */
  readonly headlineMetric: string;
  /** Builds its items, deterministic under its seed; ids unique within the suite. */
  buildItems(config: z.output<Schema>, context: SuiteBuildContext): Promise<BuiltSuite<Item>>;
  /** The text a model is asked (the judge's prompt, scores.json's prompt hash). */
  promptText(item: Item): string;
  /** Text checked for n-gram overlap with training records; unset: not text-checked. */
  contaminationText?(item: Item): string | undefined;
  /** The simulator task an item plays (the scripted policies are handed them; task-id contamination). */
  simulatorTask?(item: Item): Task | undefined;
  /** The harness an item plays under (episode suites). */
  prepareHarness?(
    item: Item,
    context: { canonical: PreparedHarness | undefined; openObject: StageDeps['openObject'] },
  ): Promise<PreparedHarness | undefined>;
  /**
   * What training applied of what this suite holds out (harness_variant_qa: held-out operator
   * families), once the training manifests are read and before footprint-dependent items are
   * built. Refuses with `[EVAL_HELD_OUT_TRAINED]` unless `allowOverlap`; else returns it as a
   * flagged figure (scores.json `contamination.heldOutTrained.families`).
   */
  trainedHeldOutFamilies?(
    config: z.output<Schema>,
    footprint: TrainingFootprint,
    allowOverlap: boolean,
  ): TrainedFamily[];
  /** Its built items training played although held out (the same refusal or flagged figure, `.variants`). */
  trainedHeldOutItems?(
    items: Item[],
    footprint: TrainingFootprint,
    allowOverlap: boolean,
  ): Array<{ itemId: string; hash: string; stages: string[] }>;
  /** Extra guidance for the judge (a custom item's rubric). */
  judgeRubric?(item: Item): string | undefined;
  /** Every check an item carries, failed (an item whose request failed stays in every denominator). */
  failedChecks(item: Item): Array<{ name: string; strict: boolean; loose: boolean }>;
  /** Asks the model and scores the answer (score 0–100; a failed request scores 0 with status model_error/timeout). */
  evaluate(item: Item, context: SuiteItemContext & { config: z.output<Schema> }): Promise<EvalResult>;
  /** An item's headline outcome, 0–100 (null: not scored by rules), paired across models and runs. */
  outcomeScore(result: EvalResult): number | null;
  /** Whether a result counts in paired comparisons of its suite (default: every scored one). */
  comparable?(result: EvalResult): boolean;
  /** One model's figures from its results on this suite (seeded bootstrap). */
  score(results: EvalResult[], context: { samples: number; seed: string }): SuiteScore<Breakdown>;
  /** Its section of report.html (unset: the leaderboard column only). */
  reportHtml?(context: SuiteReportContext<Breakdown>): string;
  /** Its lm-evaluation-harness metrics (unset: `score`, the mean outcome / 100 with its standard error). */
  lmEvalMetrics?(breakdown: Breakdown, results: EvalResult[]): LmEvalMetric[];
}

/** Any suite, as the registry holds them. */
export type AnyEvalSuite = EvalSuite<string, z.ZodType, SuiteItem, unknown>;

/** Declares a suite, keeping its literal name and types (what the config's static types are built from). */
export function defineEvalSuite<Name extends string, Schema extends z.ZodType, Item extends SuiteItem, Breakdown>(
  suite: EvalSuite<Name, Schema, Item, Breakdown>,
): EvalSuite<Name, Schema, Item, Breakdown> {
  return suite;
}
