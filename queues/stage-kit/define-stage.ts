import type { z } from 'zod';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import type { Logger } from '../../shared/log/logger';
import type { Rng } from '../../shared/random/rng';
import { BadInputError } from '../../shared/errors';
import { assertStageName } from './stage-names';
import type { StageSummary } from './stage-summary';

/**
 * A stage = contract (zod schemas of its input and output, queue defaults) + processor (plain
 * async functions built by `createProcessor(deps)`, knowing nothing of BullMQ) + binding (the
 * BullMQ worker in queues/bullmq/stage-job-processor.ts, or `hat stage` in queues/stage-kit/run-stage-locally.ts).
 *
 * A stage is either one job (`createProcessor` handles the whole input) or fans out:
 * `plan(input)` splits the input into part inputs (deterministically), the processor handles one
 * part (idempotently: it writes only its own objects, so a retry rewrites only them), and
 * `finish(input, partOutputs)` fans in and writes the stage manifest last.
 */

/** Wall clock, injectable for deterministic tests. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** What a processor reports while it works; shown by `hat run --wait` and `hat stage`. */
export interface StageProgress {
  /** Units done so far within this job (records, episodes, ...). */
  done?: number;
  /** Units this job will do, when known. */
  total?: number;
  message?: string;
}

/** Where a stage writes: `runs/<runId>/<stage>/` of the run's store, or the root of `--out`. */
export interface StageOutputLocation {
  /** Key prefix, empty or ending in `/`. */
  prefix: string;
  /** `<prefix>manifest.json`: written last by the stage. */
  manifestKey: string;
  /** Key of an object of this stage's output. */
  key(name: string): string;
  /** URI of an object of this stage's output. */
  uri(name: string): string;
}

/**
 * Long-lived services a worker process shares across jobs (model clients, endpoint limiters).
 * Open on purpose: a stage that needs one adds an optional field by declaration merging
 * (`declare module '.../queues/define-stage' { interface StageServices { x?: X } }`) and the
 * worker that runs it supplies it.
 */
export interface StageServices {
  [service: string]: unknown;
}

/** Everything a processor, `plan` and `finish` may use. They never read env or open connections. */
export interface StageDeps {
  /** The run's artifact store (its root is the run config's `artifacts`, or `--out` for `hat stage`). */
  store: ArtifactStore;
  /** Where this stage's output goes. */
  output: StageOutputLocation;
  /** The store and key of any input URI (inside `store` or elsewhere, e.g. another bucket). */
  openObject(uri: string): { store: ArtifactStore; key: string };
  run: {
    id: string;
    /** The run's seed; `rng` is already derived from it. */
    seed: string;
  };
  stage: string;
  /** Set while processing one part of a fanned-out stage. */
  part?: { index: number; id: string; count: number };
  /** 1 on the first attempt of this job, 2 on the first retry, ... */
  attempt: number;
  /** Seeded from (run seed, stage, part): the same inputs give the same draws on every attempt. */
  rng: Rng;
  logger: Logger;
  clock: Clock;
  /** Reports progress of this job (throttled; never throws). */
  progress(report: StageProgress): void;
  /** Aborted when the job is cancelled or the worker shuts down: stop early, the job is handed back. */
  signal: AbortSignal;
  services: StageServices;
}

/** A processor: one call per job (or per part of a fanned-out stage). */
export type StageProcessor<Input, Output> = (input: Input) => Promise<Output>;

/** Queue defaults of a stage. */
export interface StageQueueDefaults {
  /** Attempts per job (and per part) before it fails for good. Default 5. */
  attempts?: number;
  /** First backoff delay in ms; doubles per attempt, with jitter. Default 1000. */
  backoffMs?: number;
  /** Jobs at once per worker process. Default HAT_WORKER_CONCURRENCY, else the process's cores for `cpuHeavy` stages and 4 for others. */
  concurrency?: number;
  /**
   * CPU-bound work: run jobs in BullMQ sandboxed processors (worker threads) so a busy event loop
   * cannot starve lock renewal. Default false.
   */
  cpuHeavy?: boolean;
  /** How long a job's lock lasts without renewal, ms. Default 30000. */
  lockDurationMs?: number;
}

/** A hold decided by a stage (stage-contract `holdOf`). */
export interface StageHold {
  /** What was held (the gate's candidate label). */
  subject?: string;
  reasons: string[];
  /** Stages that do not run because of it (they complete at once with `heldBy`). */
  stages: string[];
}

/** The contract half of a stage; lives in queues/contracts/<stage>.ts. */
export interface StageContract<Input, Output> {
  /** Stage and queue name (kebab-case). */
  name: string;
  /** One line for `hat stage --help` and reports. */
  description: string;
  /** Schema of the stage config (job input); the only source of its type. */
  input: z.ZodType<Input>;
  /** Schema of the stage result; carries `manifestUri` when the stage writes a manifest. */
  output: z.ZodType<Output>;
  queue?: StageQueueDefaults;
  /** The key figures and report links of a completed stage, for the run report (stage-summary.ts). */
  summarize?(output: Output): StageSummary;
  /**
   * A decision to hold, when the output is one (the gate holding its candidate): a legitimate
   * outcome, not a failure. The job completes; the stages it names complete at once without
   * running, and runs show both as held.
   */
  holdOf?(output: Output): StageHold | undefined;
}

export interface FanOutContract<Input, Output, PartInput, PartOutput> extends StageContract<Input, Output> {
  /** Schema of one part's input (job data of a part job: URIs and small parameters). */
  partInput: z.ZodType<PartInput>;
  /** Schema of one part's result (small: counts, keys, hashes). */
  partOutput: z.ZodType<PartOutput>;
  /**
   * The work one completed part did, as Prometheus stage counters (`hat_stage_counter_total`):
   * trajectories, variants, tokens, episodes, ... counted as each part completes.
   */
  partCounters?(output: PartOutput): Record<string, number>;
}

/**
 * A fan-in split into tasks that run as jobs of their own, on any worker, between the parts and
 * `finish`: for a fan-in too long for one job on one core (shard's packing and exports). `plan`
 * lists the tasks from the part outputs (deterministic; `[]` lets `finish` do all the work
 * itself); each task writes only its own objects (a retry rewrites them) and returns a small
 * result; `finish` gets the results in task order and writes the manifest last.
 */
export interface FanInTasks<Input, PartOutput, Task, TaskOutput> {
  /** Schema of one task (job data: small). */
  task: z.ZodType<Task>;
  /** Schema of one task's result (small: keys, counts). */
  taskOutput: z.ZodType<TaskOutput>;
  plan(input: Input, partOutputs: PartOutput[], deps: StageDeps): Promise<Task[]>;
  run(input: Input, partOutputs: PartOutput[], task: Task, deps: StageDeps): Promise<TaskOutput>;
}

export interface SingleJobStageDefinition<Input, Output> extends StageContract<Input, Output> {
  kind: 'single';
  createProcessor(deps: StageDeps): StageProcessor<Input, Output>;
}

export interface FanOutStageDefinition<Input, Output, PartInput, PartOutput> extends FanOutContract<
  Input,
  Output,
  PartInput,
  PartOutput
> {
  kind: 'fan-out';
  /** Splits the input into part inputs; deterministic (same input, same parts, same order). */
  plan(input: Input, deps: StageDeps): PartInput[] | Promise<PartInput[]>;
  /** Processes one part. */
  createProcessor(deps: StageDeps): StageProcessor<PartInput, PartOutput>;
  /**
   * Fans in: gets the part outputs in part order (and, with `fanInTasks`, the task results in task
   * order; none when the plan made no tasks), writes the stage manifest last.
   */
  finish(input: Input, partOutputs: PartOutput[], deps: StageDeps, taskOutputs: unknown[]): Promise<Output>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  fanInTasks?: FanInTasks<Input, PartOutput, any, any>;
}

export type StageDefinition<Input = unknown, Output = unknown, PartInput = unknown, PartOutput = unknown> =
  SingleJobStageDefinition<Input, Output> | FanOutStageDefinition<Input, Output, PartInput, PartOutput>;

/** Any registered stage, types erased. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyStage = SingleJobStageDefinition<any, any> | FanOutStageDefinition<any, any, any, any>;

export type SingleJobStageSpec<Input, Output> = StageContract<Input, Output> & {
  createProcessor(deps: StageDeps): StageProcessor<Input, Output>;
  plan?: undefined;
  finish?: undefined;
};

export type FanOutStageSpec<Input, Output, PartInput, PartOutput> = FanOutContract<
  Input,
  Output,
  PartInput,
  PartOutput
> & {
  plan(input: Input, deps: StageDeps): PartInput[] | Promise<PartInput[]>;
  createProcessor(deps: StageDeps): StageProcessor<PartInput, PartOutput>;
  finish(input: Input, partOutputs: PartOutput[], deps: StageDeps, taskOutputs: unknown[]): Promise<Output>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  fanInTasks?: FanInTasks<Input, PartOutput, any, any>;
};

/** Defines a single-job stage or a fan-out stage (when `plan` is given). Does not register it. */
export function defineStage<Input, Output>(
  spec: SingleJobStageSpec<Input, Output>,
): SingleJobStageDefinition<Input, Output>;
export function defineStage<Input, Output, PartInput, PartOutput>(
  spec: FanOutStageSpec<Input, Output, PartInput, PartOutput>,
): FanOutStageDefinition<Input, Output, PartInput, PartOutput>;
export function defineStage(
  spec: SingleJobStageSpec<unknown, unknown> | FanOutStageSpec<unknown, unknown, unknown, unknown>,
): AnyStage {
  assertStageName(spec.name);
  const queue = spec.queue ?? {};
  for (const [field, value] of Object.entries(queue)) {
    if (typeof value === 'number' && (!Number.isInteger(value) || value < 1)) {
      throw new BadInputError(
        'BAD_STAGE_DEFINITION',
        `stage "${spec.name}": queue.${field} must be a positive integer, got ${value}`,
      );
    }
  }
  const { plan, finish } = spec as { plan?: unknown; finish?: unknown };
  if (plan) {
    if (!finish)
      throw new BadInputError(
        'BAD_STAGE_DEFINITION',
        `stage "${spec.name}" has plan() but no finish(); a fanned-out stage must fan in`,
      );
    return { ...spec, kind: 'fan-out' } as FanOutStageDefinition<unknown, unknown, unknown, unknown>;
  }
  if (finish || (spec as { fanInTasks?: unknown }).fanInTasks)
    throw new BadInputError(
      'BAD_STAGE_DEFINITION',
      `stage "${spec.name}" has ${finish ? 'finish()' : 'fanInTasks'} but no plan(); a fan-in needs the parts that plan() makes`,
    );
  return { ...spec, kind: 'single' } as SingleJobStageDefinition<unknown, unknown>;
}
