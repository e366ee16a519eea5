import { z } from 'zod';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { tokenizerSourceNames } from '../../shared/models/onnx/tokenizer-source';
import { remoteScorerConfigSchema } from '../../shared/models/scoring/scoring-endpoint';
import { taskGeneratorSchema } from '../../shared/simulator/tasks/task-generator';
import {
  checkLogprobsModeOfEngine,
  servedSamplerFieldsSchema,
} from '../../shared/models/token-exact/served-token-sampler';
import { summarizeDistill } from './distill-summary';
import { tokenizerSourceSchema } from '../../shared/text/tokenizer-source-config';
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
 *     student: { engine: dummy, tokenizer: qwen3, layers: 2, hidden: 64, seed: student }
 *     teacher: { engine: vllm, baseUrl: http://teacher:8000/v1, model: Qwen/Qwen3-8B }
 *     samplesPerPrompt: 2
 *     sampling: { temperature: 1, maxNewTokens: 128 }
 *     teacherTopK: 8
 * ```
 */

const sha256Hex = z
  .string()
  .regex(
    /^[0-9a-f]{64}$/,
    'must be a lowercase hex sha256 (as recorded in a distill manifest under tokenizer.fingerprint)',
  );
const sourceName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'use lower-case letters, digits, ".", "_" and "-" (at most 64)');
const limit = z.number().int().positive().max(1_000_000).optional();
const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);

/** Settings every in-process model takes. */
const inProcessFields = {
  /** Id recorded with the rollouts. Default: the model directory's name. */
  modelId: z.string().min(1).optional(),
  /** onnxruntime intra-op threads. Default: onnxruntime's choice. */
  intraOpThreads: z.number().int().positive().optional(),
  /** Sequences per forward batch (sampling and scoring). Default 8. */
  batchSize: z.number().int().positive().max(256).default(8),
  /** Logits floats one forward call may return (long prompts are fed in chunks). Default: chunks of at most 64 tokens, at most 16M floats. */
  maxLogitsFloats: z.number().int().positive().optional(),
};

/** A decoder-only ONNX model directory (Optimum layout) run in-process. */
export const onnxModelSchema = z
  .object({
    engine: z.literal('onnx'),
    /** Directory with model.onnx, config.json, tokenizer.json, tokenizer_config.json. */
    modelDir: z.string().min(1),
    ...inProcessFields,
  })
  .strict();

/**
 * A random-weight decoder generated on first use into `modelCacheDir` (`makeDummyDecoder`):
 * for demos and tests. Its records and stats carry `dummyWeights: true`.
 */
export const dummyModelSchema = z
  .object({
    engine: z.literal('dummy'),
    /** `qwen3` (default), `deepseek_v3`, `llama3_1`, `bytes`, or a directory with tokenizer files. */
    tokenizer: z.string().min(1).default('qwen3'),
    layers: z.number().int().min(1).max(48).default(2),
    hidden: z.number().int().min(4).max(4096).default(64),
    heads: z.number().int().min(1).max(64).default(4),
    kvHeads: z.number().int().min(1).max(64).default(2),
    /** Weight seed: the same seed and shape give the same model. Default "0". */
    seed: seedValue.default('0'),
    ...inProcessFields,
  })
  .strict();

/**
 * A teacher behind a vLLM or SGLang server. Its tokenizer is checked against the student's
 * through the scoring endpoint (a probe of token ids whose texts must match), and against
 * `tokenizer`/`tokenizerFingerprint` when given.
 */
export const remoteTeacherSchema = remoteScorerConfigSchema
  .extend({
    /** A local copy of the teacher's tokenizer: its fingerprint must equal the student's. */
    tokenizer: tokenizerSourceSchema.optional(),
    /** The teacher tokenizer's fingerprint (as distill manifests record it): must equal the student's. */
    tokenizerFingerprint: sha256Hex.optional(),
  })
  .strict();

/**
 * A student behind a vLLM or SGLang server (a student too large for Node), sampled token-exact:
 * prompts rendered and tokenized locally with `tokenizer` (the served model's own tokenizer and
 * chat template), sent as token ids, sampled ids and their logprobs read back. `logprobsMode`
 * says what the server's logprobs are (vLLM default raw, SGLang default tempered); a mode whose
 * logprobs are not at `logprobTemperature` over the whole vocabulary is refused.
 */
export const servedStudentSchema = servedSamplerFieldsSchema
  .extend({
    /** The served model's tokenizer and chat template (a preset or a model directory); checked against the server by a probe. */
    tokenizer: tokenizerSourceSchema,
  })
  .strict()
  .superRefine(checkLogprobsModeOfEngine);
export type ServedStudentConfig = z.infer<typeof servedStudentSchema>;

export const studentModelSchema = z.discriminatedUnion('engine', [
  onnxModelSchema,
  dummyModelSchema,
  servedStudentSchema,
]);
export type StudentModelConfig = z.infer<typeof studentModelSchema>;
export const teacherModelSchema = z.discriminatedUnion('engine', [
  onnxModelSchema,
  dummyModelSchema,
  remoteTeacherSchema,
]);
export type TeacherModelConfig = z.infer<typeof teacherModelSchema>;
export type InProcessModelConfig = z.infer<typeof onnxModelSchema> | z.infer<typeof dummyModelSchema>;

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
    /** Where `engine: dummy` models are generated. Default `.hat/models`. */
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
  engine: z.enum(['onnx', 'vllm', 'sglang']),
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

/** Names `engine: dummy` accepts besides a directory, for messages. */
export const dummyTokenizerNames = tokenizerSourceNames;
