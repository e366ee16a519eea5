import { z } from 'zod';
import { zodProblems } from '../../shared/config/zod-problems';
import { ProblemCollector } from '../../shared/errors';
import type { StageHold } from '../stage-kit/define-stage';

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
  /** `plan` until the part jobs are added, then `fan-in`; `fan-in-tasks` once the fan-in task jobs are added. */
  step: z.enum(['plan', 'fan-in', 'fan-in-tasks']).default('plan'),
  /** Parts added by the plan step. */
  partCount: z.number().int().nonnegative().optional(),
  /** Fan-in task jobs added once the parts were done (stages with `fanInTasks`). */
  taskCount: z.number().int().nonnegative().optional(),
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

/** One task of a stage's fan-in; it reads the part outputs from the stage's `_state/fan-in-parts.json`. */
export const fanInTaskJobDataSchema = z.object({
  ...common,
  index: z.number().int().nonnegative(),
  count: z.number().int().positive(),
  /** The task, validated against the stage's task schema. */
  task: z.unknown(),
  /** The stage config (as the stage job carries it). */
  input: z.unknown(),
});
export type FanInTaskJobData = z.infer<typeof fanInTaskJobDataSchema>;

/** What a fan-in task job returns (kept by BullMQ in its parent's processed set). */
export interface FanInTaskJobResult<TaskOutput = unknown> {
  kind: 'fan-in-task';
  index: number;
  output: TaskOutput;
}

export function isFanInTaskResult(value: unknown): value is FanInTaskJobResult {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'fan-in-task';
}

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
  output: Output;
  /** The stage manifest, when its output names one. */
  manifestUri?: string;
  /** Parts it fanned out into (0 for a single-job stage). */
  parts: number;
  startedAt: number;
  finishedAt: number;
  /** The stage jobs this one waited for (absent when none). */
  upstream?: StageJobResult[];
  /** The stage decided to hold something (a gate that held its candidate): why, and the stages it keeps from running. */
  hold?: StageHold;
  /** The stage did not do its work: a stage below it held it back (`by`), for these reasons. */
  heldBy?: { stage: string; reasons: string[] };
}

/** The hold among a job's upstream results (the whole tree below it) that keeps `stage` from running. */
export function holdOver(stage: string, upstream: Iterable<StageJobResult>): StageJobResult['heldBy'] {
  for (const result of flattenStageResults(upstream).values()) {
    if (result.hold?.stages.includes(stage)) return { stage: result.stage, reasons: result.hold.reasons };
  }
  return undefined;
}

export function isPartJobResult(value: unknown): value is PartJobResult {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'part';
}

export function isStageJobResult(value: unknown): value is StageJobResult {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'stage';
}

/** Stage results by stage name, including the upstream results each one carries (the whole tree below a job). */
export function flattenStageResults(
  results: Iterable<StageJobResult>,
  into = new Map<string, StageJobResult>(),
): Map<string, StageJobResult> {
  for (const result of results) {
    into.set(result.stage, result);
    flattenStageResults(result.upstream ?? [], into);
  }
  return into;
}

/**
 * Parses job data with its schema (the one definition of each job's data); BadInputError
 * `BAD_JOB_DATA` naming the job and every problem.
 */
export function parseJobData<T>(schema: z.ZodType<T>, data: unknown, jobLabel: string): T {
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  const problems = new ProblemCollector();
  problems.addAll(zodProblems(result.error, jobLabel));
  problems.throwIfAny('BAD_JOB_DATA', `job ${jobLabel} has data this worker cannot read; enqueue it with \`hat run\``);
  throw new Error('unreachable');
}
