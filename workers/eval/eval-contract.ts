import { z } from 'zod';
import { experimentProblems, experimentSchema } from './eval-experiment';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { modelConfigSchema } from '../../shared/models/model-registry';
import { samplingSettingsSchema } from '../../shared/models/openai/openai-model-config';
// Registers the `scripted` adapter, so `model: { adapter: scripted }` validates.
import '../../shared/simulator/tasks/task-schema';
import { evalPartCounters, summarizeEval } from './eval-summary';
import { writtenObjectSchema } from '../../queues/stage-kit/written-object';
import {
  evalSuiteNames,
  evalSuites,
  findEvalSuite,
  type EvalSuiteConfigInputs,
  type EvalSuiteConfigs,
} from './suites/registry';

export { liveStreamQaSchema } from './suites/live-stream-qa';
export { harnessVariantQaSchema } from './suites/harness-variant-qa';
export { ifevalSuiteSchema } from './suites/ifeval';
export { customSuiteSchema } from './suites/custom';

/**
 * Config of the `eval` stage: models under test, side by side, on the report's suites.
 *
 * ```yaml
 * stages:
 *   eval:
 *     models:
 *       - { label: new, model: { adapter: openai, baseUrl: "${checkpoint.endpoint}", model: "${checkpoint.model}" } }
 *       - { label: base, model: { adapter: openai, baseUrl: http://base:8000/v1, model: Qwen/Qwen3-4B } }
 *     suites:
 *       live_stream_qa: { size: 220, seed: lsqa-v1 }
 *       harness_variant_qa: { size: 110, variantsPerTask: 2, heldOutFamilies: [hooks] }
 *       ifeval: {}                                   # all 541 prompts
 *       custom: { prompts: s3://hat/eval/brand-voice.jsonl }
 *     judge: { model: { adapter: openai, baseUrl: http://judge:8000/v1, model: judge }, suites: [custom] }
 *     trainingManifests: ["${stages.shard.manifestUri}"]
 *     compare: [[new, base]]
 * ```
 */

import { seedValue, uriList } from './suites/suite-kit';

const label = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,39}$/,
    'use 1-40 lowercase letters, digits, "_" or "-", starting with a letter (e.g. base, hat-new)',
  );

/** A suite's name: a key of the registry (suites/registry.ts). */
export type SuiteName = string;

/** A registered suite's name (the registry is read when a config is parsed, so a test's suite counts). */
const suiteName = z.string().superRefine((name, context) => {
  if (!findEvalSuite(name))
    context.addIssue({
      code: 'custom',
      message: `"${name}" is not an eval suite; suites: ${evalSuiteNames().join(', ')}`,
    });
});

/**
 * `suites:`: each key a registered suite, its value parsed by that suite's `configSchema`; the
 * output lists them in registry order.
 */
const suitesSchema = z.record(z.string(), z.unknown()).transform((given, context) => {
  const parsed: Record<string, unknown> = {};
  for (const name of Object.keys(given))
    if (!findEvalSuite(name))
      context.addIssue({
        code: 'custom',
        path: [name],
        message: `"${name}" is not an eval suite; suites: ${evalSuiteNames().join(', ')}`,
      });
  for (const suite of evalSuites()) {
    if (given[suite.name] === undefined) continue;
    const result = suite.configSchema.safeParse(given[suite.name]);
    if (result.success) parsed[suite.name] = result.data;
    else
      for (const issue of result.error.issues)
        context.addIssue({ code: 'custom', path: [suite.name, ...issue.path], message: issue.message });
  }
  if (Object.keys(given).every((name) => given[name] === undefined))
    context.addIssue({ code: 'custom', message: `name at least one suite: ${evalSuiteNames().join(', ')}` });
  return parsed;
}) as unknown as z.ZodType<EvalSuiteConfigs, EvalSuiteConfigInputs>;

/** One model under test. */
export const evalModelSchema = z
  .object({
    /** Its name in results, leaderboards, comparisons and gate rules. */
    label,
    /** Any registered model adapter: `openai` (vLLM, SGLang, hosted endpoints), `onnx` (in-process), `scripted`. */
    model: modelConfigSchema,
    /** Sampling of every call. Default temperature 0 (greedy: scores do not depend on luck). */
    sampling: samplingSettingsSchema.default({ temperature: 0 }),
    /** Mark the model as random-weight (a demo's dummy model); onnx dummy models are detected anyway. Default false. */
    dummyWeights: z.boolean().default(false),
    /**
     * Identity of the served weights (a checkpoint URI, a weights sha256, the run that trained
     * them): with the model id it keys the response cache, wherever the weights are served.
     * Unset: the endpoint URL and model id stand for them, so an endpoint that serves new weights
     * under the same URL and name needs it (or `cache: { enabled: false }`).
     */
    checkpoint: z.string().min(1).max(500).optional(),
    /** Suites this model takes (scripted simulator policies answer simulator tasks only). Default: every suite of the config. */
    suites: z.array(suiteName).min(1).optional(),
  })
  .strict();
export type EvalModel = z.infer<typeof evalModelSchema>;

export const JUDGE_RUBRIC_VERSION = 'hat-judge-v1';

export const judgeSchema = z
  .object({
    /** An OpenAI-compatible judge (any registered adapter works). */
    model: modelConfigSchema,
    /** Suites whose responses it rates (pointwise). Default [custom]. */
    suites: z.array(suiteName).min(1).default(['custom']),
    /** The rubric: a version name and its text. Default the built-in `hat-judge-v1` (engagement, persuasion, tone). */
    rubric: z
      .object({ version: z.string().min(1), text: z.string().min(1) })
      .strict()
      .optional(),
    sampling: samplingSettingsSchema.default({ temperature: 0, maxTokens: 256 }),
  })
  .strict();
export type JudgeConfig = z.infer<typeof judgeSchema>;

export const evalInputSchema = z
  .object({
    models: z.array(evalModelSchema).min(1).max(16),
    suites: suitesSchema,
    /** The canonical harness (directory, `file://` or `s3://` prefix). Default: the sample live-host harness. */
    harness: z.string().min(1).optional(),
    judge: judgeSchema.optional(),
    /** Training data to check for contamination (collect, augment, shard, distill manifests or JSONL). Default none. */
    trainingManifests: uriList.default([]),
    /** Keep eval items that overlap training data (listed in the report) instead of refusing the run. Default false. */
    allowOverlap: z.boolean().default(false),
    /**
     * Text overlap with training data (IFEval and custom items): an item counts as seen when one
     * training record (its messages of every role, content parts, tool results, prompt fields)
     * holds at least `threshold` of the item's distinct `n`-word n-grams, normalized. Items shorter
     * than `n` words match a training text only whole. Default { n: 13, threshold: 0.5 }.
     */
    /**
     * Response cache of served models (workers/eval/response-cache.ts): answers stored per
     * endpoint identity and exact request, so an unchanged model is asked nothing again. `prefix`:
     * where (a `file://` or `s3://` folder); default `cache/eval-responses/` under the artifact root.
     */
    cache: z
      .object({
        enabled: z.boolean().default(true),
        prefix: z
          .string()
          .regex(
            /^(s3:\/\/[^/]+\/[^/].*|file:\/\/\/.+)$/,
            'must be a folder URI such as s3://bucket/cache/eval-responses/ or file:///data/cache/eval-responses/',
          )
          .optional(),
      })
      .strict()
      .default({ enabled: true }),
    contamination: z
      .object({
        n: z.number().int().min(3).max(64).default(13),
        threshold: z.number().gt(0).max(1).default(0.5),
      })
      .strict()
      .default({ n: 13, threshold: 0.5 }),
    /** Pairs of labels to compare on the same items (difference with a paired-bootstrap interval). Default: the first model against each other. */
    compare: z.array(z.tuple([label, label])).optional(),
    /** Bootstrap resamples for the 95% intervals. Default 1000. */
    bootstrapSamples: z.number().int().min(100).max(100_000).default(1000),
    /** Model calls per agent turn before an episode stops. Default 6. */
    maxStepsPerTurn: z.number().int().min(1).max(64).default(6),
    /** Items per part job. Default 50. */
    itemsPerPart: z.number().int().min(1).max(100_000).default(50),
    /** Items evaluated at once within a part (the endpoint's own limit still applies). Default 8. */
    itemConcurrency: z.number().int().min(1).max(1024).default(8),
    /** Wall-clock limit of one item, ms. Default 300000. */
    itemTimeoutMs: z.number().int().positive().default(300_000),
    /** Share of a part's items that may fail with endpoint errors before the part is retried (endpoint down). Default 0.5. */
    maxModelErrorShare: z.number().min(0).max(1).default(0.5),
    /** Seed of every draw. Default: the run's seed. */
    seed: seedValue.optional(),
    /** Arms of an experiment over the models (several training seeds each): a table, paired differences and claims (eval-experiment.ts). */
    experiment: experimentSchema.optional(),
  })
  .strict()
  .superRefine((input, context) => {
    const labels = input.models.map((model) => model.label);
    if (input.experiment)
      for (const problem of experimentProblems(input.experiment, labels))
        context.addIssue({ code: 'custom', path: ['experiment', ...problem.path], message: problem.message });
    labels.forEach((name, index) => {
      if (labels.indexOf(name) !== index)
        context.addIssue({
          code: 'custom',
          path: ['models', index, 'label'],
          message: `label "${name}" is used twice; labels name models in results and gate rules`,
        });
    });
    (input.compare ?? []).forEach((pair, index) => {
      pair.forEach((name, side) => {
        if (!labels.includes(name))
          context.addIssue({
            code: 'custom',
            path: ['compare', index, side],
            message: `"${name}" is not a model label here (labels: ${labels.join(', ')})`,
          });
      });
    });
  });
export type EvalInput = z.infer<typeof evalInputSchema>;
export type EvalInputConfig = z.input<typeof evalInputSchema>;

export const evalPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  model: evalModelSchema,
  suite: suiteName,
  /** The item plan `plan` wrote, and this part's slice of it (items of `suite`). */
  items: z.object({
    uri: z.string(),
    sha256: z.string(),
    start: z.number().int().nonnegative(),
    count: z.number().int().positive(),
  }),
  config: evalInputSchema,
  seed: z.string(),
  harnessHash: z.string(),
});
export type EvalPartInput = z.infer<typeof evalPartInputSchema>;

export const evalPartOutputSchema = z.object({
  index: z.number().int().nonnegative(),
  label,
  suite: suiteName,
  results: writtenObjectSchema,
  items: z.number().int().nonnegative(),
  modelErrors: z.number().int().nonnegative(),
  judgeMissing: z.number().int().nonnegative(),
  /** Model calls (the judge's too) answered from the response cache, and asked of the endpoint. */
  cache: z.object({ hits: z.number().int().nonnegative(), misses: z.number().int().nonnegative() }).optional(),
  model: z.object({ provider: z.string(), modelId: z.string(), simulated: z.boolean() }),
});
export type EvalPartOutput = z.infer<typeof evalPartOutputSchema>;

/** One leaderboard cell: a model's headline score on a suite, 0–100, with its bootstrap 95% interval. */
export const leaderboardCellSchema = z.object({
  score: z.number(),
  low: z.number(),
  high: z.number(),
  items: z.number().int(),
});

export const evalOutputSchema = z.object({
  manifestUri: z.string(),
  scoresUri: z.string(),
  reportUri: z.string(),
  items: z.number().int().nonnegative(),
  /** Label → suite → cell. */
  leaderboard: z.record(z.string(), z.record(z.string(), leaderboardCellSchema)),
  /** Labels of random-weight or simulated models (their numbers show plumbing, not quality). */
  simulatedModels: z.array(z.string()),
  /** Eval items found in training data (allowOverlap: true only; otherwise the stage refuses). */
  overlapping: z.number().int().nonnegative(),
  judgeMissing: z.number().int().nonnegative(),
  /** Label → items whose request failed or timed out, of the items it was asked (rate 0–1). */
  errors: z
    .record(
      z.string(),
      z.object({ failed: z.number().int().nonnegative(), items: z.number().int().nonnegative(), rate: z.number() }),
    )
    .default({}),
  /** Response cache, all models: calls answered from it and requests sent (absent: no served model, or the cache off). */
  cache: z.object({ hits: z.number().int().nonnegative(), misses: z.number().int().nonnegative() }).optional(),
  /** With `experiment`: each claim's sentence, reproduced or not. */
  claims: z.array(z.object({ reproduced: z.boolean(), sentence: z.string() })).optional(),
});
export type EvalOutput = z.infer<typeof evalOutputSchema>;

export const evalContract: FanOutContract<EvalInput, EvalOutput, EvalPartInput, EvalPartOutput> = {
  name: 'eval',
  description:
    'Evaluation: models under test side by side on Live-Stream QA, Harness-Variant QA, IFEval and custom prompts, with intervals',
  input: evalInputSchema,
  output: evalOutputSchema,
  summarize: summarizeEval,
  partCounters: evalPartCounters,
  partInput: evalPartInputSchema,
  partOutput: evalPartOutputSchema,
  // Model-bound: a few parts at once; items within a part run concurrently too.
  queue: { attempts: 4, backoffMs: 2000, concurrency: 2, lockDurationMs: 120_000 },
};
