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

/** Parses job data; BadInputError `BAD_JOB_DATA` naming the job and every problem. */
export function parseJobData<T>(schema: z.ZodType<T>, data: unknown, jobLabel: string): T {
  const fast = fastReaders.get(schema);
  if (fast) {
    const read = fast(data);
    if (read !== undefined) return read as T;
  }
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  const problems = new ProblemCollector();
  problems.addAll(zodProblems(result.error, jobLabel));
  problems.throwIfAny('BAD_JOB_DATA', `job ${jobLabel} has data this worker cannot read; enqueue it with \`hat run\``);
  throw new Error('unreachable');
}

/**
 * Stage and part job data are read for every job a worker takes, and zod's parse of them was a
 * quarter of the binding's own time per job. These readers check the same rules by hand and build
 * the same object zod would (keys in schema order, defaults filled, unknown keys dropped); for
 * anything they do not accept they return undefined and zod parses it, so a bad job still gets
 * zod's error naming each field. `job-data.test.ts` compares them with zod on valid and invalid
 * data. They are written out field by field: a table-driven reader (keyed loads and stores with a
 * different key each time) cost 3 µs a job on a slow core, a tenth of a no-op stage job.
 */
type Read = Record<string, unknown>;

const nonEmptyString = (value: unknown): boolean => typeof value === 'string' && value.length > 0;
const safeIntegerFrom = (value: unknown, minimum: number): boolean =>
  Number.isSafeInteger(value) && (value as number) >= minimum;

function isRecord(data: unknown): data is Read {
  return typeof data === 'object' && data !== null && !Array.isArray(data);
}

/** The fields every job carries, in schema order; undefined when one is not plainly valid. */
function readCommon(source: Read): Read | undefined {
  const { v, runId, stage, kind, seed, artifactsRoot, outputPrefix } = source;
  if (v !== 1 || !nonEmptyString(runId) || !nonEmptyString(stage)) return undefined;
  if (typeof seed !== 'string' || !nonEmptyString(artifactsRoot) || typeof outputPrefix !== 'string') return undefined;
  const read: Read = { v, runId, stage };
  if ('kind' in source) {
    if (kind !== undefined && !nonEmptyString(kind)) return undefined;
    read.kind = kind;
  }
  read.seed = seed;
  read.artifactsRoot = artifactsRoot;
  read.outputPrefix = outputPrefix;
  return read;
}

/** An optional key: absent stays absent, present-but-undefined stays so (as zod keeps it). */
function readOptional(source: Read, read: Read, key: string, valid: (value: unknown) => boolean): boolean {
  if (!(key in source)) return true;
  const value = source[key];
  if (value !== undefined && !valid(value)) return false;
  read[key] = value;
  return true;
}

function readStageJobData(data: unknown): Read | undefined {
  if (!isRecord(data) || !('input' in data)) return undefined;
  const read = readCommon(data);
  if (!read) return undefined;
  const { input, inputHash, upstream, step } = data;
  if (!nonEmptyString(inputHash)) return undefined;
  read.input = input;
  read.inputHash = inputHash;
  if (upstream === undefined) read.upstream = [];
  else if (Array.isArray(upstream) && upstream.every((item) => typeof item === 'string')) read.upstream = upstream;
  else return undefined;
  if (step === undefined) read.step = 'plan';
  else if (step === 'plan' || step === 'fan-in') read.step = step;
  else return undefined;
  if (!readOptional(data, read, 'partCount', (value) => safeIntegerFrom(value, 0))) return undefined;
  if (!readOptional(data, read, 'startedAt', (value) => typeof value === 'number' && Number.isFinite(value)))
    return undefined;
  return read;
}

function readPartJobData(data: unknown): Read | undefined {
  if (!isRecord(data) || !('input' in data)) return undefined;
  const read = readCommon(data);
  if (!read) return undefined;
  const { index, count, input, inputHash } = data;
  if (!safeIntegerFrom(index, 0) || !safeIntegerFrom(count, 1) || !nonEmptyString(inputHash)) return undefined;
  read.index = index;
  read.count = count;
  read.input = input;
  read.inputHash = inputHash;
  return read;
}

const fastReaders = new Map<z.ZodType, (data: unknown) => unknown>([
  [stageJobDataSchema, readStageJobData],
  [partJobDataSchema, readPartJobData],
]);

/** The hand-written reader of a job data schema, for tests. */
export function fastJobDataReader(schema: z.ZodType): ((data: unknown) => unknown) | undefined {
  return fastReaders.get(schema);
}
