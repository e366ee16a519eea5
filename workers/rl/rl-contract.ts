import { z } from 'zod';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { defaultFamilyWeights } from '../../shared/harness/hsa/generate-variant';
import {
  capabilityOf,
  modelCapabilityConfigSchema,
  modelConfigSchema,
  type ModelCapability,
} from '../../shared/models/model-registry';
import { samplingSettingsSchema } from '../../shared/models/openai/openai-model-config';
import { rewardComponents } from '../../shared/simulator/verifier/verify-episode';
import { augmentFamilyWeightsSchema } from '../../shared/harness/hsa/family-weights';
import { taskGeneratorSchema } from '../../shared/simulator/tasks/task-generator';
import { tokenizerSourceSchema } from '../../shared/text/tokenizer-source-config';
import { rlPartCounters, summarizeRl } from './rl-summary';
import { writtenObjectSchema } from '../../queues/stage-kit/written-object';

/**
 * Config of the `rl` stage: groups of simulator episodes for GRPO. Each group is one task under
 * one harness (a fresh HSA variant, or the canonical harness for `canonicalShare` of the groups)
 * played `groupSize` times by the policy with different sampling seeds; each episode gets the
 * verifier's reward, a group-normalized advantage and a token view (ids and a loss mask over the
 * policy's own tokens) by the target model's tokenizer and chat template.
 *
 * ```yaml
 * stages:
 *   rl:
 *     generate: { count: 200, seed: 7 }          # or tasks: s3://hat/tasks/live-room.jsonl.gz
 *     harness: examples/harness/live-host
 *     families: { tool_schemas: 0.6, skill_ids: 0.6, skill_content: 0.6, prompt_structure: 0.6, hooks: 0.6 }
 *     canonicalShare: 0.25
 *     policy: { adapter: openai, baseUrl: http://policy:8000/v1, model: current }   # default: the stochastic scripted policy
 *     groupSize: 8
 *     groups: 200
 *     tokenizer: { preset: qwen3 }
 *     advantage: { normalizeByStd: true, epsilon: 1e-6 }
 * ```
 */

const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);
const uriList = z.union([
  z
    .string()
    .min(1)
    .transform((uri) => [uri]),
  z.array(z.string().min(1)).min(1),
]);

/** Who speaks the viewer's follow-up turns. */
export const rlViewerSchema = z.discriminatedUnion('kind', [
  /** The task's own follow-up messages, word for word. */
  z.object({ kind: z.literal('task') }).strict(),
  z
    .object({
      kind: z.literal('scripted'),
      /** Chance of rephrasing a follow-up (same intent, seeded template wording). Default 1. */
      paraphraseRate: z.number().min(0).max(1).default(1),
      /**
       * Reword per episode instead of per group. Default false: the G episodes of a group hear
       * the same follow-ups, so reward differences within a group come from the policy alone.
       */
      perEpisode: z.boolean().default(false),
    })
    .strict(),
  z
    .object({
      kind: z.literal('model'),
      /** The model that writes the viewer's comments (falls back to the task's wording when it fails). */
      model: modelConfigSchema,
      sampling: samplingSettingsSchema.optional(),
    })
    .strict(),
]);
export type RlViewerConfig = z.infer<typeof rlViewerSchema>;

export const rlAdvantageSchema = z
  .object({
    /** Divide by the group's sample standard deviation (GRPO); false gives r - mean (Dr. GRPO). Default true. */
    normalizeByStd: z.boolean().default(true),
    /** Added to the std before dividing. Default 1e-6. */
    epsilon: z.number().min(0).max(1).default(1e-6),
  })
  .strict();
export type RlAdvantageOptions = z.infer<typeof rlAdvantageSchema>;

export const rlCurriculumSchema = z
  .object({
    /** A previous rl run's `stats.json` (or its `manifest.json`): mean reward per task category. */
    statsUri: z.string().min(1),
    /** Weight every category keeps however well it went, so solved categories still appear. Default 0.05. */
    floor: z.number().min(0).max(1).default(0.05),
    /** Sharpness: weights are raised to this power. Default 1. */
    power: z.number().gt(0).max(10).default(1),
  })
  .strict();
export type RlCurriculum = z.infer<typeof rlCurriculumSchema>;

export const defaultRlPolicy = { adapter: 'scripted', policy: 'stochastic' } as const;

/** How the policy is played: through its adapter's chat client when it has one, else its token sampler. */
const policyCapabilities: readonly ModelCapability[] = ['chat', 'tokenSampler'];

/**
 * The policy: any registered model adapter. One with a chat client is played through it (`{
 * adapter: openai | onnx | scripted, ... }`: chat messages, records marked `token_exact: false`);
 * one that only samples token ids is sampled token-exact (`{ adapter: vllm | sglang, baseUrl,
 * model, logprobsMode? }` or `{ adapter: dummy, ... }`: token-id prompts rendered with
 * `tokenizer`, sampled ids and rollout logprobs recorded). `engine:` is read as `adapter:`
 * (deprecated).
 */
export const rlPolicySchema = modelCapabilityConfigSchema(policyCapabilities);

/** Whether the policy is sampled token-exact: its adapter has a token sampler and no chat client. */
export function isTokenExactPolicy(policy: RlInput['policy']): boolean {
  return capabilityOf(policy, policyCapabilities) === 'tokenSampler';
}

export const rlInputSchema = z
  .object({
    /** Task sets (gzip JSONL of `hat tasks generate`, or stage manifests listing them): artifact URIs or local paths. */
    tasks: uriList.optional(),
    /** Task sets given as `hat stage rl --in <uri>...` (added to `tasks`). */
    inputs: z.array(z.string().min(1)).default([]),
    /** Or tasks generated here, as `hat tasks generate` would. Default (no task set given): 64 tasks, seed "rl". */
    generate: taskGeneratorSchema.optional(),
    /** Use only the first n tasks of the set. */
    taskLimit: z.number().int().positive().optional(),
    /** The canonical harness: a directory (local path or `file://`) or an `s3://` prefix. Default: the sample live-host harness. */
    harness: z.string().min(1).optional(),
    /** Share of variant groups that apply each HSA family, 0..1 (every variant applies at least one). Default 0.6 each. */
    families: augmentFamilyWeightsSchema.default({ ...defaultFamilyWeights }),
    /** Share of groups played under the canonical harness (rounded to whole groups). Default 0.25. */
    canonicalShare: z.number().min(0).max(1).default(0.25),
    /**
     * The policy: any registered model adapter; `openai` for the endpoint serving the current
     * checkpoint. Default: the stochastic scripted policy (a simulation, labelled as such).
     */
    policy: rlPolicySchema.default({ ...defaultRlPolicy }),
    /** Sampling settings of every policy call; each episode also gets its own `seed`. Default temperature 1. */
    sampling: samplingSettingsSchema.default({ temperature: 1 }),
    /** Episodes per group (G). Default 8. */
    groupSize: z.number().int().min(1).max(256).default(8),
    /** Groups in all. Default 32. */
    groups: z.number().int().min(1).max(1_000_000).default(32),
    /** Viewer turns per episode at most. Default: every turn of the task. */
    maxTurns: z.number().int().min(1).max(64).optional(),
    /** Model calls per viewer turn before the episode ends with status step_limit. Default 6. */
    maxStepsPerTurn: z.number().int().min(1).max(64).default(6),
    /** Wall-clock limit of one episode, ms; past it the episode ends with status timeout. Default 600000. */
    episodeTimeoutMs: z.number().int().positive().default(600_000),
    /** Follow-up turns. Default: scripted paraphrases, the same within a group. */
    viewer: rlViewerSchema.default({ kind: 'scripted', paraphraseRate: 1, perEpisode: false }),
    /** Reward component weights over the verifier's defaults. */
    rewardWeights: z.partialRecord(z.enum(rewardComponents), z.number().min(0)).optional(),
    /** Tokenizer and chat template of the token view: a registry preset or a model directory (as the shard stage). Default qwen3. */
    tokenizer: tokenizerSourceSchema.default({ preset: 'qwen3' }),
    /** Passed to the chat template as `enable_thinking` when set (Qwen3). */
    enableThinking: z.boolean().optional(),
    /**
     * Chat-completions policies (`adapter: openai`): what the endpoint's logprobs are, recorded
     * with them (`metadata.chat_logprobs.logprob_distribution`). The endpoint does not say; vLLM and
     * `hat serve` report raw logprobs unless served with `--logprobs-mode processed_logprobs`.
     * Default raw_logprobs.
     */
    chatLogprobsMode: z.enum(['raw_logprobs', 'processed_logprobs', 'tempered_logprobs']).default('raw_logprobs'),
    advantage: rlAdvantageSchema.default({ normalizeByStd: true, epsilon: 1e-6 }),
    /** Groups whose scored rewards are all equal (no learning signal): kept with advantage 0, or dropped. Counted either way. Default keep. */
    zeroVarianceGroups: z.enum(['keep', 'drop']).default('keep'),
    /** Groups with a failed episode (model error, timeout, step limit, token view failed): kept or dropped. Counted either way. Default keep. */
    groupsWithFailures: z.enum(['keep', 'drop']).default('keep'),
    /** Reward at or above which an episode passes (pass@k). Default 0.95. */
    passThreshold: z.number().min(0).max(1).default(0.95),
    /** Sample task categories by a previous run's rewards (lower reward, sampled more). */
    curriculum: rlCurriculumSchema.optional(),
    /** Groups per part job. Default 16. */
    groupsPerPart: z.number().int().min(1).max(100_000).default(16),
    /** Episodes played at once within a part (the endpoint's own limit still applies). Default 8. */
    episodeConcurrency: z.number().int().min(1).max(1024).default(8),
    /**
     * Share of a part's episodes that may end in model_error or timeout before the part fails as
     * transient (retried later: the endpoint looks down). 1 never fails the part. Default 0.5.
     */
    maxPolicyErrorShare: z.number().min(0).max(1).default(0.5),
    /** Seed of every draw (tasks, variants, sampling seeds, viewer). Default: the run's seed. */
    seed: seedValue.optional(),
    /**
     * Version of the policy (round k of an on-policy stage plays with version k; the run sets it).
     * Every episode record carries it as `policy_version`. Default 1.
     */
    policyVersion: z.number().int().positive().optional(),
    /** Where an `adapter: dummy` policy is generated. Default `.hat/models`. */
    modelCacheDir: z.string().min(1).optional(),
  })
  .strict()
  .superRefine((input, context) => {
    if (input.generate !== undefined && (input.tasks !== undefined || input.inputs.length > 0)) {
      context.addIssue({
        code: 'custom',
        path: ['generate'],
        message: 'give task sets (tasks, --in) or generate, not both',
      });
    }
  });
export type RlInput = z.infer<typeof rlInputSchema>;
export type RlInputConfig = z.input<typeof rlInputSchema>;

export const rlPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  /** The group plan `plan` wrote, and this part's slice of it. */
  groups: z.object({
    uri: z.string(),
    sha256: z.string(),
    start: z.number().int().nonnegative(),
    count: z.number().int().positive(),
  }),
  /** The stage config (references resolved). */
  config: rlInputSchema,
  /** Resolved: the config's seed, else the run's. */
  seed: z.string(),
  /** Content hash of the canonical harness as planned (a part refuses a harness that changed). */
  harnessHash: z.string(),
});
export type RlPartInput = z.infer<typeof rlPartInputSchema>;

/** Where a part's time went, ms (not written to artifacts: wall time is not deterministic). */
export const rlPartTimingSchema = z.object({
  /** Whole part, from reading the plan to the written objects. */
  partMs: z.number().nonnegative(),
  /** Inside runEpisode (policy, tools, viewer, verifier), summed over episodes. */
  episodeMs: z.number().nonnegative(),
  /** Inside the policy's chat calls, summed. */
  policyMs: z.number().nonnegative(),
  /** Building and checking token views, summed. */
  tokenViewMs: z.number().nonnegative(),
  /** Drawing the groups' HSA variants, summed. */
  variantMs: z.number().nonnegative(),
  /** Environment steps (policy calls). */
  steps: z.number().int().nonnegative(),
  episodes: z.number().int().nonnegative(),
});
export type RlPartTiming = z.infer<typeof rlPartTimingSchema>;

export const rlPartOutputSchema = z.object({
  index: z.number().int().nonnegative(),
  parquet: writtenObjectSchema,
  jsonl: writtenObjectSchema,
  /** Mergeable totals of this part (RlTotals). */
  totals: z.record(z.string(), z.unknown()),
  policy: z.object({
    provider: z.string(),
    modelId: z.string(),
    simulated: z.boolean(),
    /** Set for model policies: whether records carry the ids as sampled (served token-exact) or re-tokenized messages (chat endpoints). */
    tokenExact: z.boolean().optional(),
    /** Token-exact policies: what the rollout logprobs are of; chat-completions policies: what the endpoint's logprobs are of (`chatLogprobsMode`). */
    logprobDistribution: z
      .object({ kind: z.string(), temperature: z.number(), topP: z.number(), topK: z.number(), engine: z.string() })
      .optional(),
  }),
  tokenizer: z.object({ name: z.string(), fingerprint: z.string(), templateHash: z.string() }),
  timing: rlPartTimingSchema,
});
export type RlPartOutput = z.infer<typeof rlPartOutputSchema>;

export const rlOutputSchema = z.object({
  manifestUri: z.string(),
  statsUri: z.string(),
  reportUri: z.string(),
  parts: z.number().int().nonnegative(),
  groups: z.number().int().nonnegative(),
  groupsKept: z.number().int().nonnegative(),
  episodes: z.number().int().nonnegative(),
  episodesWritten: z.number().int().nonnegative(),
  meanReward: z.number(),
  /** Mean reward under the canonical harness minus under variants (null without both). */
  canonicalVariantGap: z.number().nullable(),
  /** True when the policy is a simulation (the stochastic scripted policy) or has random weights. */
  simulatedPolicy: z.boolean(),
  /** Model policies: whether records hold the ids as sampled (served token-exact) or re-tokenized chat messages. */
  tokenExact: z
    .object({
      exact: z.boolean(),
      engine: z.string(),
      episodes: z.number().int().nonnegative(),
      drifted: z.number().int().nonnegative(),
    })
    .optional(),
  /** Summed part timings (wall time; for benchmarks and logs). */
  timing: rlPartTimingSchema,
});
export type RlOutput = z.infer<typeof rlOutputSchema>;

export const rlContract: FanOutContract<RlInput, RlOutput, RlPartInput, RlPartOutput> = {
  name: 'rl',
  description:
    'RL episode groups: HSA-randomized simulator episodes of the policy with rewards, GRPO advantages and loss-masked token views',
  input: rlInputSchema,
  output: rlOutputSchema,
  summarize: summarizeRl,
  partCounters: rlPartCounters,
  partInput: rlPartInputSchema,
  partOutput: rlPartOutputSchema,
  // Model-bound: a few parts at once keep the endpoint busy; episodes within a part run concurrently too.
  queue: { attempts: 4, backoffMs: 2000, concurrency: 2, lockDurationMs: 120_000 },
};
