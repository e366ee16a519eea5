import { z } from 'zod';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { modelConfigSchema } from '../../shared/models/model-registry';
import { samplingSettingsSchema } from '../../shared/models/openai/openai-model-config';
import { collectCountsSchema } from './collect-stats';
import { summarizeCollect } from './collect-summary';
import { taskGeneratorSchema } from '../../shared/simulator/tasks/task-generator';
import { writtenObjectSchema as baseWrittenObjectSchema } from '../../queues/stage-kit/written-object';

export { taskGeneratorSchema, type TaskGenerator } from '../../shared/simulator/tasks/task-generator';

/**
 * Config of the `collect` stage: a teacher (any model adapter: an OpenAI-compatible server, or
 * the simulator's scripted expert) plays simulator tasks under a harness, N samples per task;
 * the verifier's reward decides which samples are kept.
 *
 * ```yaml
 * stages:
 *   collect:
 *     generate: { count: 200, seed: 7 }          # or tasks: s3://hat/tasks/live-room.jsonl.gz
 *     harness: s3://hat/harness/live-host        # default: the sample live-host harness
 *     teacher: { adapter: openai, baseUrl: http://teacher:8000/v1, model: Qwen/Qwen3-32B, apiKeyEnv: TEACHER_API_KEY }
 *     samplesPerTask: 4
 *     selection: { mode: best, minReward: 0.8 }
 * ```
 */

const uriList = z.union([
  z
    .string()
    .min(1)
    .transform((uri) => [uri]),
  z.array(z.string().min(1)).min(1),
]);
const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);

/** Why a sample was not kept. */
export const rejectionReasons = ['below_threshold', 'not_selected', 'model_error', 'step_limit', 'timeout'] as const;
export type RejectionReason = (typeof rejectionReasons)[number];

export const collectSelectionSchema = z
  .object({
    /**
     * `best`: per task, the passing sample with the highest reward (ties: the lowest sample
     * index), the others `not_selected`; `all`: every passing sample. Default best.
     */
    mode: z.enum(['best', 'all']).default('best'),
    /** A sample passes when its episode ended ok with reward total >= this (0..1). Default 0.8. */
    minReward: z.number().min(0).max(1).default(0.8),
  })
  .strict();
export type CollectSelection = z.infer<typeof collectSelectionSchema>;

export const collectInputSchema = z
  .object({
    /** Task sets (gzip JSONL from `hat tasks generate` / `hat tasks import`): artifact URIs or local paths. */
    tasks: uriList.optional(),
    /** Task sets given as `hat stage collect --in <uri>...` (same as `tasks`). */
    inputs: z.array(z.string().min(1)).optional(),
    /** Or tasks generated here, exactly as `hat tasks generate --count --seed --items` would. */
    generate: taskGeneratorSchema.optional(),
    /** The harness: a directory (local path or `file://`) or an `s3://` prefix with its files. Default: the sample live-host harness. */
    harness: z.string().min(1).optional(),
    /**
     * Play again what augment could not carry over: its stage manifest (or `relabel.jsonl.gz`).
     * Each listed task (from tasks/inputs/generate, e.g. the first collect's manifest) is played
     * under the variant harness the entry names (`variants/<hash>/` beside the list), and the
     * trajectories record that variant. `harness` then only labels the report.
     */
    relabel: z.string().min(1).optional(),
    /**
     * The teacher: a model config of any registered adapter (`openai` with baseUrl, model,
     * apiKeyEnv/apiKeyFile, ...; `scripted` for the simulator's expert). Never the key itself.
     * Default `{ adapter: scripted }`.
     */
    teacher: modelConfigSchema.default({ adapter: 'scripted' }),
    /** Episodes per task (N of best-of-N). Default 1. */
    samplesPerTask: z.number().int().min(1).max(64).default(1),
    selection: collectSelectionSchema.prefault({}),
    /** Model calls per viewer turn before the episode stops with status step_limit. Default 6. */
    maxSteps: z.number().int().min(1).max(64).default(6),
    /** Viewer turns played per task. Default: all of the task's turns. */
    maxTurns: z.number().int().min(1).max(32).optional(),
    /**
     * Sampling settings sent with every call (over the teacher config's own). With
     * `samplesPerTask` > 1 each sample sends seed `sampling.seed + sampleIndex` (base 0), so the
     * samples differ and repeat under the seed.
     */
    sampling: samplingSettingsSchema.optional(),
    /** Limit of one episode, ms; an episode over it ends with status timeout. Default: none (the client's per-call timeout still applies). */
    episodeTimeoutMs: z.number().int().positive().optional(),
    /** Tasks per part job. Default 100. */
    tasksPerPart: z.number().int().min(1).max(100_000).default(100),
    /** Episodes in flight at once within a part (the teacher's endpoint limit still caps requests). Default 8. */
    concurrency: z.number().int().min(1).max(1024).default(8),
    /** Seed recorded with (and identifying) the trajectories. Default: the run's seed. */
    seed: seedValue.optional(),
  })
  .strict()
  .superRefine((input, context) => {
    const given = [input.tasks, input.inputs, input.generate].filter((value) => value !== undefined).length;
    if (given !== 1) {
      context.addIssue({
        code: 'custom',
        path: given === 0 ? [] : ['generate'],
        message:
          given === 0
            ? 'no tasks: give tasks (URIs of `hat tasks generate` output), --in <uri>, or generate: { count, seed }'
            : 'give exactly one of tasks, inputs (--in) and generate',
      });
    }
  });
export type CollectInput = z.infer<typeof collectInputSchema>;

const sha256 = z.string().regex(/^[0-9a-f]{64}$/);
const lineageEntrySchema = z.object({ uri: z.string(), sha256 });

const writtenObjectSchema = baseWrittenObjectSchema.extend({ sha256 });

export const collectPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  /** This part's slice of the tasks (`tasks/part-NNNNN.jsonl.gz`), written by the plan; or, with `generate`, absent. */
  tasks: writtenObjectSchema.optional(),
  /**
   * Generated tasks: the part generates tasks [start, start + count) of the generator's sequence
   * itself and writes the slice (task i depends only on the seed, i and the generator options),
   * so a large generated run is not generated and written by the one plan job.
   */
  generate: taskGeneratorSchema.extend({ start: z.number().int().nonnegative() }).optional(),
  /** Harness URI (absent: the sample harness) and the hash it had when planned. */
  harness: z.object({ uri: z.string().optional(), hash: sha256 }),
  /** Set when the harness is an HSA variant from augment's relabel list: recorded on every trajectory. */
  variant: z.object({ hash: z.string(), families: z.array(z.string()).optional() }).optional(),
  teacher: z.looseObject({ adapter: z.string() }),
  samplesPerTask: z.number().int().positive(),
  selection: collectSelectionSchema,
  maxSteps: z.number().int().positive(),
  maxTurns: z.number().int().positive().optional(),
  sampling: samplingSettingsSchema.optional(),
  episodeTimeoutMs: z.number().int().positive().optional(),
  concurrency: z.number().int().positive(),
  seed: z.string(),
  /** Inputs read at plan time (task sets, harness), echoed into the manifest's lineage. */
  lineage: z.array(lineageEntrySchema),
});
export type CollectPartInput = z.infer<typeof collectPartInputSchema>;

export const collectPartOutputSchema = z.object({
  index: z.number().int().nonnegative(),
  /** The task slice played (as planned). */
  tasks: writtenObjectSchema,
  accepted: writtenObjectSchema,
  rejected: writtenObjectSchema,
  /** Tasks of this part with no accepted sample (merged into review.jsonl.gz by finish). */
  review: writtenObjectSchema,
  /** The teacher as trajectories record it. */
  teacher: z.object({ provider: z.string(), model: z.string(), simulated: z.boolean() }),
  /** Counts by task category. */
  stats: z.record(z.string(), collectCountsSchema),
  /** Wall-clock window of the part (epoch ms). */
  startedAt: z.number(),
  endedAt: z.number(),
  lineage: z.array(lineageEntrySchema),
});
export type CollectPartOutput = z.infer<typeof collectPartOutputSchema>;

export const collectOutputSchema = z.object({
  manifestUri: z.string(),
  tasks: z.number().int().nonnegative(),
  samples: z.number().int().nonnegative(),
  accepted: z.number().int().nonnegative(),
  rejected: z.number().int().nonnegative(),
  /** Tasks listed for review (no sample accepted). */
  review: z.number().int().nonnegative(),
  /** Tasks with an accepted trajectory / tasks. */
  acceptanceRate: z.number().min(0).max(1),
  reviewUri: z.string(),
  statsUri: z.string(),
  reportUri: z.string(),
});
export type CollectOutput = z.infer<typeof collectOutputSchema>;

/** One entry of review.jsonl.gz: a task none of whose samples was accepted, and why each failed. */
export const reviewEntrySchema = z.object({
  taskId: z.string(),
  category: z.string(),
  /** Samples played. */
  attempts: z.number().int().positive(),
  reasons: z.array(
    z.object({
      sampleIndex: z.number().int().nonnegative(),
      trajectoryId: z.string(),
      status: z.string(),
      reason: z.enum(rejectionReasons),
      reward: z.number(),
      detail: z.string(),
    }),
  ),
});
export type ReviewEntry = z.infer<typeof reviewEntrySchema>;

export const collectContract: FanOutContract<CollectInput, CollectOutput, CollectPartInput, CollectPartOutput> = {
  name: 'collect',
  description:
    'teacher trajectories: a model (OpenAI-compatible server or the scripted expert) plays simulator tasks, best-of-N by verifier reward',
  input: collectInputSchema,
  output: collectOutputSchema,
  summarize: summarizeCollect,
  partCounters: (part) => ({
    tasks: part.tasks.records,
    trajectories: part.accepted.records,
    rejected: part.rejected.records,
    review: part.review.records,
  }),
  partInput: collectPartInputSchema,
  partOutput: collectPartOutputSchema,
  // Model-bound: a part waits on the teacher; the per-endpoint limiter caps what reaches it.
  queue: { attempts: 5, backoffMs: 2000 },
};
