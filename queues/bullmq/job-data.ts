import { z } from 'zod';
import { zodProblems } from '../../shared/config/zod-problems';
import { ProblemCollector } from '../../shared/errors';
import { resolvedInputSchema } from '../runs/latest-inputs';
import { runHandoffEntrySchema } from '../runs/run-handoff';

/**
 * What Redis carries for each kind of job: URIs, hashes and small parameters (see
 * HAT_JOB_DATA_LIMIT). Workers parse job data with these schemas, so a job written by another
 * version or by hand fails once with `BAD_JOB_DATA` instead of misbehaving.
 */

const common = {
  /** Job data format version. */
  v: z.literal(1),
  runId: z.string().min(1),
  /** The stage's name in the run (its objects go under `runs/<runId>/<stage>/`). */
  stage: z.string().min(1),
  /** The registered stage it runs (its queue) when the run names it differently (`sft_data: { stage: shard }`). */
  kind: z.string().min(1).optional(),
  /** The run's seed (every random draw derives from it). */
  seed: z.string(),
  /** Root URI of the run's artifact store. */
  artifactsRoot: z.string().min(1),
  /** Key prefix of the stage's output inside that store: `runs/<runId>/<stage>/`. */
  outputPrefix: z.string(),
};

/** A stage job: the stage config, and where it is in its plan / fan-in cycle. */
export const stageJobDataSchema = z.object({
  ...common,
  /** The stage config, references already resolved; validated against the stage's input schema. */
  input: z.unknown(),
  inputHash: z.string().min(1),
  /** Stages whose jobs are this job's children (they finish before it starts). */
  upstream: z.array(z.string()).default([]),
  /** `plan` until the part jobs are added, then `fan-in`. */
  step: z.enum(['plan', 'fan-in']).default('plan'),
  /** Parts added by the plan step. */
  partCount: z.number().int().nonnegative().optional(),
  /** When the plan step started, epoch ms (stage duration is measured from here). */
  startedAt: z.number().optional(),
});
export type StageJobData = z.infer<typeof stageJobDataSchema>;

/** One part of a fanned-out stage. */
export const partJobDataSchema = z.object({
  ...common,
  index: z.number().int().nonnegative(),
  count: z.number().int().positive(),
  input: z.unknown(),
  inputHash: z.string().min(1),
});
export type PartJobData = z.infer<typeof partJobDataSchema>;

/** One stage of a run, as the run's parent job records it. */
export const runStageEntrySchema = z.object({
  name: z.string().min(1),
  /** The registered stage (queue) when it differs from the name. */
  kind: z.string().min(1).optional(),
  jobId: z.string().min(1),
  /** Stages this one reads from (its `${stages.<name>...}` references). */
  dependsOn: z.array(z.string()).default([]),
  /** Enqueued by a trainer handoff once a checkpoint is registered (absent: part of the first flow). */
  afterHandoff: z.boolean().optional(),
  /** The handoff that enqueues it (absent with `afterHandoff`: the single handoff, `train`). */
  handoff: z.string().optional(),
  /** For a round of an on-policy stage: the policy version it samples with. */
  policyVersion: z.number().int().positive().optional(),
});

/** The queue of a stage entry or job: its kind, else its name. */
export function stageKindOf(entry: { name?: string; stage?: string; kind?: string }): string {
  return entry.kind ?? entry.name ?? entry.stage ?? '';
}
export type RunStageEntry = z.infer<typeof runStageEntrySchema>;

/** The run's parent job (queue `runs`, name `run`, id = run id). */
export const runJobDataSchema = z.object({
  v: z.literal(1),
  runId: z.string().min(1),
  configHash: z.string().min(1),
  artifactsRoot: z.string().min(1),
  seed: z.string(),
  /** Epoch ms when the run was enqueued. */
  createdAt: z.number(),
  /** `cli`, `schedule:<name>`, `demo`, ... */
  source: z.string().default('cli'),
  stages: z.array(runStageEntrySchema),
  /** Set by `hat runs cancel`. */
  cancelledAt: z.number().optional(),
  /** The trainer handoffs in chain order, when the run has any (queues/runs/run-handoff.ts). */
  handoffs: z.array(runHandoffEntrySchema).optional(),
  /** What the config's `latest` inputs resolved to when the run was created. */
  resolvedInputs: z.array(resolvedInputSchema).optional(),
  /**
   * The run's whole plan (stage inputs are URIs and small parameters), so `hat runs retry` can
   * resume a cancelled run: its removed jobs are enqueued again and finished parts are reused.
   */
  plan: z.unknown().optional(),
});
export type RunJobData = z.infer<typeof runJobDataSchema>;

/** A scheduled kickoff (queue `runs`, name `kickoff`): the run config to start at each firing. */
export const kickoffJobDataSchema = z.object({
  v: z.literal(1),
  schedule: z.string().min(1),
  /** The run config as parsed from its YAML (validated again at each firing). */
  config: z.unknown(),
  /** Where the config came from, for messages. */
  configFile: z.string().optional(),
});
export type KickoffJobData = z.infer<typeof kickoffJobDataSchema>;

/** What a part job returns (kept by BullMQ in its parent's processed set). */
export interface PartJobResult<PartOutput = unknown> {
  kind: 'part';
  index: number;
  output: PartOutput;
}

/** What a stage job returns; carries its upstream stages' results so the run sees the whole tree. */
export interface StageJobResult<Output = unknown> {
  kind: 'stage';
  stage: string;
  jobId: string;
  output: Output;
  /** The stage manifest, when its output names one. */
  manifestUri?: string;
  /** Parts it fanned out into (0 for a single-job stage). */
  parts: number;
  startedAt: number;
  finishedAt: number;
  upstream: StageJobResult[];
}

export function isPartJobResult(value: unknown): value is PartJobResult {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'part';
}

export function isStageJobResult(value: unknown): value is StageJobResult {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'stage';
}

/** Stage results by stage name, including the upstream results each one carries (the whole tree below a job). */
export function flattenStageResults(results: Iterable<StageJobResult>, into = new Map<string, StageJobResult>()): Map<string, StageJobResult> {
  for (const result of results) {
    into.set(result.stage, result);
    flattenStageResults(result.upstream ?? [], into);
  }
  return into;
}

/** Parses job data; BadInputError `BAD_JOB_DATA` naming the job and every problem. */
export function parseJobData<T>(schema: z.ZodType<T>, data: unknown, jobLabel: string): T {
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  const problems = new ProblemCollector();
  problems.addAll(zodProblems(result.error, jobLabel));
  problems.throwIfAny('BAD_JOB_DATA', `job ${jobLabel} has data this worker cannot read; enqueue it with \`hat run\``);
  throw new Error('unreachable');
}
