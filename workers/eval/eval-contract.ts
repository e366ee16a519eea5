import { z } from 'zod';
import { experimentProblems, experimentSchema } from './eval-experiment';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { hsaFamilies, hsaFamilySchema } from '../../shared/harness/hsa/variant-mapping';
import { modelConfigSchema } from '../../shared/models/model-registry';
import { samplingSettingsSchema } from '../../shared/models/openai/openai-model-config';
// Registers the `scripted` adapter, so `model: { adapter: scripted }` validates.
import { taskCategories } from '../../shared/simulator/tasks/task-schema';
import { evalPartCounters, summarizeEval } from './eval-summary';
import { writtenObjectSchema } from '../../queues/stage-kit/written-object';

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

const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);
const uriList = z.union([
  z
    .string()
    .min(1)
    .transform((uri) => [uri]),
  z.array(z.string().min(1)),
]);
const label = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,39}$/,
    'use 1-40 lowercase letters, digits, "_" or "-", starting with a letter (e.g. base, hat-new)',
  );

export const suiteNames = ['live_stream_qa', 'harness_variant_qa', 'ifeval', 'custom'] as const;
export type SuiteName = (typeof suiteNames)[number];

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
    suites: z
      .array(z.enum(['live_stream_qa', 'harness_variant_qa', 'ifeval', 'custom']))
      .min(1)
      .optional(),
  })
  .strict();
export type EvalModel = z.infer<typeof evalModelSchema>;

export const liveStreamQaSchema = z
  .object({
    /** Held-out generated tasks, spread evenly over every task category. Default 44 (4 per category). 0 with `tasks` for imported ones only. */
    size: z.number().int().min(0).max(100_000).default(44),
    /** Seed of the held-out task generator: never a training seed. Default "eval/live_stream_qa". */
    seed: seedValue.default('eval/live_stream_qa'),
    /** Categories to draw from. Default: every category. */
    categories: z.array(z.enum(taskCategories)).min(1).optional(),
    /** Imported production Q&A (`hat tasks import` output or a collect manifest): played and scored like generated tasks. */
    tasks: uriList.default([]),
  })
  .strict();

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
    /**
     * Variants training saw, per task: drawn (seeded) from the HSA variants stored by the augment
     * outputs in `trainingManifests` (`variants/<hash>/`) and reported as `seen_variants`. Default 0.
     */
    seenVariantsPerTask: z.number().int().min(0).max(32).default(0),
  })
  .strict();

export const ifevalSuiteSchema = z
  .object({
    /** Prompts drawn (seeded) from the 541. Default: all of them. */
    size: z.number().int().min(1).max(541).optional(),
    /** Or exactly these prompt keys. */
    keys: z.array(z.number().int().nonnegative()).min(1).optional(),
    seed: seedValue.default('eval/ifeval'),
    /** Tokens per response at most. Default 1024. */
    maxTokens: z.number().int().positive().default(1024),
  })
  .strict()
  .refine((suite) => suite.size === undefined || suite.keys === undefined, {
    message: 'give size or keys, not both',
    path: ['keys'],
  });

export const customSuiteSchema = z
  .object({
    /** JSONL of `{ id, prompt, checks?: [{ instruction, kwargs? }], rubric? }` (file, `file://` or `s3://`). */
    prompts: z.string().min(1),
    /** Tokens per response at most. Default 1024. */
    maxTokens: z.number().int().positive().default(1024),
  })
  .strict();

export const JUDGE_RUBRIC_VERSION = 'hat-judge-v1';

export const judgeSchema = z
  .object({
    /** An OpenAI-compatible judge (any registered adapter works). */
    model: modelConfigSchema,
    /** Suites whose responses it rates (pointwise). Default [custom]. */
    suites: z.array(z.enum(suiteNames)).min(1).default(['custom']),
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
    suites: z
      .object({
        live_stream_qa: liveStreamQaSchema.optional(),
        harness_variant_qa: harnessVariantQaSchema.optional(),
        ifeval: ifevalSuiteSchema.optional(),
        custom: customSuiteSchema.optional(),
      })
      .strict()
      .refine(
        (suites) => Object.values(suites).some((suite) => suite !== undefined),
        'name at least one suite: live_stream_qa, harness_variant_qa, ifeval, custom',
      ),
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
    const live = input.suites.live_stream_qa;
    if (live && live.size === 0 && live.tasks.length === 0)
      context.addIssue({
        code: 'custom',
        path: ['suites', 'live_stream_qa', 'size'],
        message: 'size 0 needs imported tasks; give tasks or a size',
      });
  });
export type EvalInput = z.infer<typeof evalInputSchema>;
export type EvalInputConfig = z.input<typeof evalInputSchema>;

export const evalPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  model: evalModelSchema,
  suite: z.enum(suiteNames),
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
  suite: z.enum(suiteNames),
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
