import { z } from 'zod';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import {
  modelEndpointOf,
  modelCapabilityConfigSchema,
  type CapabilityModelConfig,
} from '../../shared/models/model-registry';
import { tokenizerSourceNames } from '../../shared/models/onnx/tokenizer-source';
import { taskGeneratorSchema } from '../../shared/simulator/tasks/task-generator';
import { summarizeDistill } from './distill-summary';
import { writtenObjectSchema, type WrittenObject } from '../../queues/stage-kit/written-object';

export { tokenizerSourceSchema } from '../../shared/text/tokenizer-source-config';

/**
 * Config of the `distill` stage: on-policy distillation rollouts. The student samples
 * completions of a prompt set (token ids and logprobs); the teacher scores exactly those token
 * ids; every response token gets both logprobs and the per-token reverse KL.
 *
 * ```yaml
 * stages:
 *   distill:
 *     prompts: [{ kind: builtin }, { kind: tasks, generate: { count: 20, seed: 7 } }]
 *     student: { adapter: dummy, tokenizer: qwen3, layers: 2, hidden: 64, seed: student }
 *     teacher: { adapter: vllm, baseUrl: http://teacher:8000/v1, model: Qwen/Qwen3-8B }
 *     samplesPerPrompt: 2
 *     sampling: { temperature: 1, maxNewTokens: 128 }
 *     teacherTopK: 8
 * ```
 */

const sourceName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'use lower-case letters, digits, ".", "_" and "-" (at most 64)');
const limit = z.number().int().positive().max(1_000_000).optional();
const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);

/**
 * The student: a model whose adapter samples token ids (`tokenSampler` in the model registry):
 * `onnx` (a model directory) and `dummy` (a generated random-weight model) in-process, `vllm` and
 * `sglang` served (prompts rendered and tokenized here with `tokenizer`, the served model's own
 * tokenizer and chat template, sent as token ids; `logprobsMode` says what the server's logprobs
 * are, and a mode whose logprobs are not at `logprobTemperature` over the whole vocabulary is
 * refused). Its tokenizer must be known from its config: an in-process model's is its
 * directory's, a served one names it. `engine:` is read as `adapter:` (deprecated).
 */
export const studentModelSchema = modelCapabilityConfigSchema(['tokenSampler']).superRefine((student, context) => {
  if (modelEndpointOf(student)?.tokenizer !== undefined) return;
  context.addIssue({
    code: 'custom',
    path: ['tokenizer'],
    message: `name the student's tokenizer and chat template (a preset or a model directory): prompts are rendered and tokenized with it before they are sent to the ${student.adapter} student`,
  });
});
export type StudentModelConfig = CapabilityModelConfig;

/**
 * The teacher: a model whose adapter scores token ids (`tokenScorer`): `onnx` and `dummy`
 * in-process, `vllm` and `sglang` served (scoring at temperature 1 only). A served teacher's
 * tokenizer is checked against the student's through its scoring endpoint (a probe of token ids
 * whose texts must match), and against its `tokenizer`/`tokenizerFingerprint` when given.
 */
export const teacherModelSchema = modelCapabilityConfigSchema(['tokenScorer']);
export type TeacherModelConfig = CapabilityModelConfig;

/** Where prompts come from. */
export const promptSourceSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('builtin'),
      /** The general instruction set shipped in examples/prompts/ (English and Chinese, IFEval-style constraints). */
      name: z.enum(['general-instructions']).default('general-instructions'),
      limit,
    })
    .strict(),
  z
    .object({
      kind: z.literal('jsonl'),
      /** JSONL(.gz) of `{id, messages, tools?}` or `{id, prompt, system?}`: an artifact URI or a local path. */
      uri: z.string().min(1),
      /** Source label in records and stats. Default: the file name without extensions. */
      name: sourceName.optional(),
      limit,
    })
    .strict(),
  z
    .object({
      kind: z.literal('tasks'),
      /** Simulator tasks (JSONL(.gz), `hat tasks generate`): an artifact URI or a local path. */
      uri: z.string().min(1).optional(),
      /** Or tasks generated here (the simulator's generator, as collect's and rl's `generate`). */
      generate: taskGeneratorSchema.optional(),
      /** Harness directory the tasks are rendered through (system prompt, tools, hooks). Default: the sample live-host harness. */
      harness: z.string().min(1).optional(),
      /** Source label. Default `tasks`. */
      name: sourceName.optional(),
      limit,
    })
    .strict()
    .refine(
      (value) => (value.uri === undefined) !== (value.generate === undefined),
      'give exactly one of uri or generate',
    ),
]);
export type PromptSource = z.infer<typeof promptSourceSchema>;

export const distillSamplingSchema = z
  .object({
    /** Sampling temperature of the student; 0 = greedy. Default 1. */
    temperature: z.number().min(0).max(2).default(1),
    /** Nucleus mass. Default 1 (off). */
    topP: z.number().gt(0).max(1).default(1),
    /** Keep the k most likely tokens; 0 = off. Default 0. */
    topK: z.number().int().min(0).default(0),
    /** New tokens per sample at most. Default 128. */
    maxNewTokens: z.number().int().min(1).max(32_768).default(128),
  })
  .strict();
export type DistillSampling = z.infer<typeof distillSamplingSchema>;

export const distillInputSchema = z
  .object({
    /** Prompt sets, in order. Default: the shipped general instruction set. */
    prompts: z
      .array(promptSourceSchema)
      .min(1)
      .default([{ kind: 'builtin', name: 'general-instructions' }]),
    /** More JSONL prompt files (`hat stage distill --in <uri>`), read like `{ kind: jsonl }` sources. */
    inputs: z.array(z.string().min(1)).default([]),
    student: studentModelSchema,
    teacher: teacherModelSchema,
    /** Completions sampled per prompt. Default 2. */
    samplesPerPrompt: z.number().int().min(1).max(256).default(2),
    sampling: distillSamplingSchema.default({ temperature: 1, topP: 1, topK: 0, maxNewTokens: 128 }),
    /**
     * Temperature both sides' logprobs are computed at (student logprobs, teacher logprobs and the
     * KL). Default: the sampling temperature (1 when greedy). Server teachers score at 1 only.
     */
    logprobTemperature: z.number().gt(0).max(10).optional(),
    /** Teacher's most likely tokens recorded per response token (0 = none). Servers cap it (vLLM --max-logprobs, default 20). Default 0. */
    teacherTopK: z.number().int().min(0).max(1_000).default(0),
    /** Prompts per part (one part job each). Default 16. */
    promptsPerPart: z.number().int().min(1).max(100_000).default(16),
    /** Passed to the chat template as `enable_thinking` (Qwen3) when set. */
    enableThinking: z.boolean().optional(),
    /** Seed of the samples. Default: the run's seed. */
    seed: seedValue.optional(),
    /** Where `adapter: dummy` models are generated. Default `.hat/models`. */
    modelCacheDir: z.string().min(1).default('.hat/models'),
    /**
     * Version of the student policy (round k of an on-policy stage samples with version k; the run
     * sets it). Every record carries it as `policy_version`. Default 1.
     */
    policyVersion: z.number().int().positive().optional(),
  })
  .strict();
export type DistillInput = z.infer<typeof distillInputSchema>;
export type DistillInputConfig = z.input<typeof distillInputSchema>;

export type ObjectRef = WrittenObject;

/** Sums of one source within a part (means are taken in finish). */
export const sourceTotalsSchema = z.object({
  prompts: z.number().int().nonnegative(),
  samples: z.number().int().nonnegative(),
  promptTokens: z.number().int().nonnegative(),
  responseTokens: z.number().int().nonnegative(),
  /** Sum of per-token reverse KL over every response token. */
  reverseKlSum: z.number(),
  /** Sum of per-sequence mean reverse KL. */
  sequenceReverseKlSum: z.number(),
  studentLogprobSum: z.number(),
  teacherLogprobSum: z.number(),
  finishedByStop: z.number().int().nonnegative(),
  finishedByLength: z.number().int().nonnegative(),
});
export type SourceTotals = z.infer<typeof sourceTotalsSchema>;

/** One side as the records, stats and manifest describe it. */
export const modelSummarySchema = z.object({
  /** Where its numbers came from: `onnx` in-process, `vllm`/`sglang` served, another adapter's own name. */
  engine: z.string().min(1),
  modelId: z.string(),
  /** Model directory or server URL. */
  location: z.string(),
  dummyWeights: z.boolean(),
  /** Temperature this side's logprobs were computed at. */
  logprobTemperature: z.number(),
});
export type ModelSummary = z.infer<typeof modelSummarySchema>;

export const distillModelsSummarySchema = z.object({
  student: modelSummarySchema,
  teacher: modelSummarySchema,
  tokenizer: z.object({
    fingerprint: z.string(),
    templateHash: z.string(),
    verifiedBy: z.array(z.enum(['fingerprint', 'probe'])),
    probedTokens: z.number().int().nonnegative(),
  }),
});
export type DistillModelsSummary = z.infer<typeof distillModelsSummarySchema>;

export const distillPartInputSchema = distillInputSchema
  .pick({
    student: true,
    teacher: true,
    samplesPerPrompt: true,
    sampling: true,
    teacherTopK: true,
    enableThinking: true,
    modelCacheDir: true,
    policyVersion: true,
  })
  .extend({
    index: z.number().int().nonnegative(),
    /** The prompt snapshot `plan` wrote, and this part's slice of it. */
    prompts: z.object({
      uri: z.string(),
      sha256: z.string(),
      start: z.number().int().nonnegative(),
      count: z.number().int().positive(),
    }),
    /** Resolved: the config's, else the sampling temperature (1 when greedy). */
    logprobTemperature: z.number().positive(),
    /** Resolved: the config's, else the run's. */
    seed: z.string(),
  });
export type DistillPartInput = z.infer<typeof distillPartInputSchema>;

export const distillPartOutputSchema = z.object({
  parquet: writtenObjectSchema,
  jsonl: writtenObjectSchema,
  rollouts: z.number().int().nonnegative(),
  sources: z.record(z.string(), sourceTotalsSchema),
  models: distillModelsSummarySchema,
});
export type DistillPartOutput = z.infer<typeof distillPartOutputSchema>;

export const distillOutputSchema = z.object({
  manifestUri: z.string(),
  statsUri: z.string(),
  parts: z.number().int().nonnegative(),
  prompts: z.number().int().nonnegative(),
  rollouts: z.number().int().nonnegative(),
  /** Token-weighted mean reverse KL over every response token. */
  meanReverseKl: z.number(),
  /** True when the student or the teacher has random weights. */
  dummyWeights: z.boolean(),
  /** Where the student sampled (`onnx` in-process, `vllm`/`sglang` served): every record is token-exact either way. */
  studentEngine: z.string().optional(),
});
export type DistillOutput = z.infer<typeof distillOutputSchema>;

export const distillContract: FanOutContract<DistillInput, DistillOutput, DistillPartInput, DistillPartOutput> = {
  name: 'distill',
  description:
    'on-policy distillation rollouts: student samples with token logprobs, teacher logprobs of the same token ids, per-token reverse KL',
  input: distillInputSchema,
  output: distillOutputSchema,
  summarize: summarizeDistill,
  partCounters: (part) => {
    const sources = Object.values(part.sources);
    return { rollouts: part.rollouts, tokens: sources.reduce((sum, source) => sum + source.responseTokens, 0) };
  },
  partInput: distillPartInputSchema,
  partOutput: distillPartOutputSchema,
  // Model-bound: several parts at once keep the student and the teacher busy together.
  queue: { attempts: 4, backoffMs: 1000, concurrency: 2, lockDurationMs: 120_000 },
};

/** Names `adapter: dummy` accepts besides a directory, for messages. */
export const dummyTokenizerNames = tokenizerSourceNames;
