import { z } from 'zod';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { defaultFamilyWeights } from '../../shared/harness/hsa/generate-variant';
import { augmentFamilyWeightsSchema } from '../../shared/harness/hsa/family-weights';
import { summarizeAugment } from './augment-summary';
import { writtenObjectSchema } from '../../queues/stage-kit/written-object';

export { relabelEntrySchema, type RelabelEntry } from '../../shared/trajectory/relabel-entry';

/**
 * Config of the `augment` stage: HSA variants of the canonical harness, every input trajectory
 * rewritten into a few of them, each rewrite checked (round trip, schema validity, no leakage,
 * changed constraints, replay in the simulator) and only the ones passing every check emitted.
 *
 * ```yaml
 * stages:
 *   augment:
 *     trajectories: ["${stages.collect.manifestUri}"]
 *     tasks: ["s3://hat/runs/r1/collect/tasks.jsonl.gz"]
 *     harness: s3://hat/harness/live-host
 *     families: { tool_schemas: 0.8, skill_ids: 0.6, skill_content: 0.6, prompt_structure: 0.6, hooks: 0.4 }
 *     variantsPerTrajectory: 4
 * ```
 */

const uriList = z.union([
  z
    .string()
    .min(1)
    .transform((uri) => [uri]),
  z.array(z.string().min(1)).min(1),
]);

export const augmentInputSchema = z
  .object({
    /** Trajectories recorded under `harness`: gzip JSONL objects, or stage manifests (the trajectory objects they list, e.g. the collect stage's). */
    trajectories: uriList.optional(),
    /** Trajectory inputs given as `hat stage augment --in <uri>...` (added to `trajectories`). */
    inputs: z.array(z.string().min(1)).optional(),
    /**
     * The tasks the trajectories played (gzip JSONL of simulator tasks, or manifests listing
     * them), matched by `taskId`: the room each trajectory is re-rendered for, and the world the
     * replay check executes in. Optional when `replayCheck` is off and every trajectory records
     * `meta.renderContext`.
     */
    tasks: uriList.optional(),
    /** The canonical harness the trajectories were recorded under: a directory (local path or `file://`) or an `s3://` prefix holding its files. Default: the sample live-host harness. */
    harness: z.string().min(1).optional(),
    /** Share of variants that apply each family, 0..1 (at least one family applies to every variant). Default 0.6 each. */
    families: augmentFamilyWeightsSchema.default({ ...defaultFamilyWeights }),
    /** Variants each trajectory is rewritten into (distinct, drawn from the pool). Default 4. */
    variantsPerTrajectory: z.number().int().min(1).max(64).default(4),
    /** Distinct variants made for the run; trajectories share them, and each is stored once. Default 32. */
    variantPool: z.number().int().min(1).max(4096).default(32),
    /** Seed of the variants and of which trajectory gets which. Default: the run's seed. */
    seed: z.string().min(1).optional(),
    /** Execute every rewritten call in the simulator and re-score the trajectory under the variant. Default true. */
    replayCheck: z.boolean().default(true),
    /** Trajectories per part job (input objects with known record counts are split). Default 500. */
    recordsPerPart: z.number().int().min(1).max(1_000_000).default(500),
    /** Before/after pairs shown in the HTML report. Default 4. */
    reportSamples: z.number().int().min(0).max(50).default(4),
  })
  .strict()
  .refine((input) => (input.trajectories?.length ?? 0) + (input.inputs?.length ?? 0) > 0, {
    error: 'no trajectories: set trajectories (or pass --in <uri> to hat stage)',
    path: ['trajectories'],
  })
  .transform(({ inputs, trajectories, ...rest }) => ({
    ...rest,
    trajectories: [...(trajectories ?? []), ...(inputs ?? [])],
  }));
export type AugmentInput = z.infer<typeof augmentInputSchema>;

export const augmentPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  /** One input object and the record range of it this part handles (end exclusive; absent: to the end). */
  source: z.object({
    uri: z.string(),
    start: z.number().int().nonnegative(),
    end: z.number().int().positive().optional(),
    /** The sha256 the manifest that listed the object records (its records were checked when written; see readRecordRange). */
    sha256: z.string().optional(),
  }),
  tasks: z.array(z.string()),
  /** Absent: the sample live-host harness (found where each worker's code is). */
  harness: z.string().optional(),
  families: augmentFamilyWeightsSchema,
  variantsPerTrajectory: z.number().int().positive(),
  variantPool: z.number().int().positive(),
  seed: z.string(),
  replayCheck: z.boolean(),
  reportSamples: z.number().int().nonnegative(),
});
export type AugmentPartInput = z.infer<typeof augmentPartInputSchema>;

export const augmentPartOutputSchema = z.object({
  index: z.number().int().nonnegative(),
  trajectories: writtenObjectSchema,
  relabel: writtenObjectSchema,
  /** Before/after samples for the report (a JSON object; not part of the stage output). */
  samplesKey: z.string(),
  /** Hashes of the variants this part emitted trajectories or relabel entries under (the ones finish stores). */
  variantsUsed: z.array(z.string()),
  /** Counts (AugmentStats). */
  stats: z.record(z.string(), z.unknown()),
  /** sha256 of each input object read. */
  inputs: z.array(z.object({ uri: z.string(), sha256: z.string() })),
});
export type AugmentPartOutput = z.infer<typeof augmentPartOutputSchema>;

export const augmentOutputSchema = z.object({
  manifestUri: z.string(),
  /** Augmented trajectories emitted. */
  trajectories: z.number().int().nonnegative(),
  /** (trajectory, variant) pairs dropped by a check. */
  dropped: z.number().int().nonnegative(),
  /** Entries of the relabel list. */
  relabel: z.number().int().nonnegative(),
  /** Distinct variants stored under variants/. */
  variants: z.number().int().nonnegative(),
  /** Each verification check: (trajectory, variant) pairs checked and failed. */
  checks: z.record(
    z.string(),
    z.object({ checked: z.number().int().nonnegative(), failed: z.number().int().nonnegative() }),
  ),
  reportUri: z.string(),
  statsUri: z.string(),
});
export type AugmentOutput = z.infer<typeof augmentOutputSchema>;

export const augmentContract: FanOutContract<AugmentInput, AugmentOutput, AugmentPartInput, AugmentPartOutput> = {
  name: 'augment',
  description:
    'HSA: rewrite teacher trajectories into harness variants, verified by round trip, schema, leak and replay checks',
  input: augmentInputSchema,
  output: augmentOutputSchema,
  partInput: augmentPartInputSchema,
  partOutput: augmentPartOutputSchema,
  summarize: summarizeAugment,
  // Augmented (variant) trajectories emitted and relabel entries listed.
  partCounters: (part) => ({ variants: part.trajectories.records, relabel: part.relabel.records }),
  // Rewriting and replaying is pure CPU: run it where a busy event loop cannot starve lock renewal.
  queue: { cpuHeavy: true, attempts: 3 },
};
