import {
  DelayedError,
  RateLimitError,
  UnrecoverableError,
  WaitingChildrenError,
  WaitingError,
  type JobProgress,
  type JobsOptions,
} from 'bullmq';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { isStorageFault } from '../../shared/artifacts/storage-errors';
import { redactUrlCredentials } from '../../shared/config/url-credentials';
import { BadInputError, HatError } from '../../shared/errors';
import { redisFullError } from './redis-full';
import type { Logger } from '../../shared/log/logger';
import type {
  AnyStage,
  Clock,
  FanOutStageDefinition,
  StageDeps,
  StageProgress,
  StageServices,
} from '../stage-kit/define-stage';
import {
  fanInTaskJobDataSchema,
  holdOver,
  isFanInTaskResult,
  isPartJobResult,
  isStageJobResult,
  parseJobData,
  partJobDataSchema,
  stageJobDataSchema,
  type FanInTaskJobResult,
  type PartJobResult,
  type StageJobData,
  type StageJobResult,
} from './job-data';
import type { StageHold } from '../stage-kit/define-stage';
import { fanInTaskJobId, partIdOf, partJobId } from '../stage-kit/job-ids';
import { checkJobData, stageJobOptions } from './job-options';
import { JobCancel, type JobCancels } from './job-cancels';
import { LockGuardedStore, defaultLockDurationMs, lockLostReason, type JobLockProbe } from './job-lock';
import {
  buildStageDeps,
  checkResult,
  manifestUriOf,
  parseOrThrow,
  parseStageInput,
  planFanInTasks,
  planParts,
  runFanInTask,
  runPart,
} from '../stage-kit/stage-execution';

/**
 * The BullMQ binding of a stage. Job names: `stage` (the stage job: plan, then fan in) and
 * `part` (one part of a fanned-out stage). Both live in the stage's queue.
 *
 * Stage job, fanned out: (1) wait for child jobs still pending (upstream stages, retried parts);
 * (2) plan: add one child job per part (deterministic ids, so a re-plan adds nothing twice),
 * record `step: fan-in`, move to waiting-children; (3) when BullMQ hands it back, fan in: read
 * the part results from `getChildrenValues()`, call `finish` (which writes the manifest last).
 *
 * Errors: bad input and other permanent HatErrors become BullMQ UnrecoverableErrors (fail once,
 * message kept as `[CODE] ...`); everything else is retried with backoff.
 */

/** What a stage job reports as BullMQ progress; `hat run --wait` reads it. */
export interface StageJobProgress extends StageProgress {
  phase: 'plan' | 'parts' | 'finish' | 'done';
  /** Parts the plan made (fanned-out stages). */
  partsTotal?: number;
}

/** The part of a BullMQ Job (or sandboxed job) the binding uses. */
export interface StageJobHandle {
  id?: string;
  name: string;
  data: unknown;
  attemptsMade: number;
  opts: JobsOptions;
  queueQualifiedName: string;
  updateData(data: unknown): Promise<void>;
  updateProgress(value: JobProgress): Promise<void>;
  moveToWaitingChildren(token?: string): Promise<boolean>;
  moveToWait(token?: string): Promise<unknown>;
  moveToDelayed(timestamp: number, token?: string): Promise<void>;
  getChildrenValues(): Promise<Record<string, unknown>>;
}

/** A part job (or fan-in task job) to add under a stage job. */
export interface PartJobSpec {
  name: 'part' | 'fan-in-task';
  data: unknown;
  opts: JobsOptions;
}

/** What the binding needs from the process it runs in. */
export interface StageJobRuntime {
  /** HAT_JOB_DATA_LIMIT. */
  jobDataLimit: number;
  logger: Logger;
  clock: Clock;
  services: StageServices;
  /** The artifact store rooted at a run's `artifacts` URI (cached per root). */
  storeFor(rootUri: string): ArtifactStore;
  openObject(uri: string): { store: ArtifactStore; key: string };
  /** Adds part and fan-in task jobs to the stage's queue (as children of the job named in their `opts.parent`). */
  addParts(stage: string, parts: PartJobSpec[]): Promise<void>;
  /** Whether `hat runs cancel` marked the run. */
  isRunCancelled(runId: string): Promise<boolean>;
  /**
   * How long a job waits out a storage fault (HAT_STORAGE_RETRY_MS) before it spends an attempt
   * on it; 0 or unset: storage faults spend attempts like any transient fault.
   */
  storageRetry?: { budgetMs: number; maxDelayMs: number };
  /**
   * Whether the job's lock is still held with `token` (undefined: cannot tell). Given, a job that
   * has run past half its lock checks before each write (see job-lock.ts).
   */
  holdsLock?(job: StageJobHandle, token: string): Promise<boolean | undefined>;
}

/** Settings of the Worker a processor runs under. */
export interface StageJobProcessorOptions {
  /** The Worker's lock duration, ms. Default 30000 (BullMQ's). */
  lockDurationMs?: number;
}

export type StageJobProcessor = (
  job: StageJobHandle,
  token?: string,
  signal?: AbortSignal,
) => Promise<StageJobResult | PartJobResult | FanInTaskJobResult>;

/**
 * Builds the processor a sandboxed child (or any caller that owns the job's AbortSignal) runs for
 * one stage's queue. In-process workers use createInProcessStageJobProcessor instead.
 */
export function createStageJobProcessor(
  stage: AnyStage,
  runtime: StageJobRuntime,
  options: StageJobProcessorOptions = {},
): StageJobProcessor {
  const run = stageJobRunner(stage, runtime, (cancel) => cancel.dispose(), options);
  // Three declared parameters: BullMQ passes the abort signal only to processors that take it.
  return (job: StageJobHandle, token?: string, signal?: AbortSignal) => run(job, token, new JobCancel(signal));
}

/**
 * The processor of an in-process stage Worker. Two declared parameters, so BullMQ makes no
 * AbortController per job: the worker cancels jobs through `cancels` (see job-cancels.ts), and
 * a job's AbortSignal is made only when the stage reads `deps.signal`.
 */
export function createInProcessStageJobProcessor(
  stage: AnyStage,
  runtime: StageJobRuntime,
  cancels: JobCancels,
  options: StageJobProcessorOptions = {},
): (job: StageJobHandle, token?: string) => Promise<StageJobResult | PartJobResult | FanInTaskJobResult> {
  const run = stageJobRunner(stage, runtime, (cancel) => cancels.end(cancel), options);
  return (job: StageJobHandle, token?: string) => run(job, token, cancels.start(job.id));
}

/**
 * Runs one job; `release` gets its JobCancel back when it settles. When the job is cancelled (the
 * worker is shutting down past its bound), hands the job back to the wait list at once, so
 * another worker picks it up without waiting for the lock to lapse and without spending an
 * attempt. Work that ignores the signal is left to finish or be cut off with the process; its
 * writes are idempotent. (One async layer per job: every await costs on the per-job path.)
 */
function stageJobRunner(
  stage: AnyStage,
  runtime: StageJobRuntime,
  release: (cancel: JobCancel) => void,
  options: StageJobProcessorOptions,
): (
  job: StageJobHandle,
  token: string | undefined,
  cancel: JobCancel,
) => Promise<StageJobResult | PartJobResult | FanInTaskJobResult> {
  const outages = new StorageOutages(runtime.storageRetry);
  const lockMs = options.lockDurationMs ?? defaultLockDurationMs;
  const lockOf = (job: StageJobHandle, token: string | undefined, cancel: JobCancel) =>
    token && runtime.holdsLock ? new JobLock(runtime, job, token, cancel, lockMs) : undefined;
  const ended = (cancel: JobCancel) => {
    cancel.onCancel = undefined;
    release(cancel);
  };
  /** A job whose work failed or that was cancelled: always rejects, with what BullMQ should do. */
  const failed = async (job: StageJobHandle, token: string | undefined, cancel: JobCancel, error: unknown) => {
    try {
      // Lost its lock: the job is another worker's, there is nothing to hand back.
      if (cancel.cancelled && cancel.reason === lockLostReason) throw new WaitingError();
      if (cancel.cancelled) {
        await job.moveToWait(token).catch(() => undefined);
        outages.end(job);
        throw new WaitingError();
      }
      const wait = token ? outages.delayFor(job, error, runtime.clock.now()) : undefined;
      if (wait !== undefined) {
        // Waits without spending an attempt, so a storage outage of minutes delays the part
        // instead of failing the run after a few quick attempts.
        const cause = error instanceof Error ? error.message : String(error);
        runtime.logger.warn(
          { ...jobLogIds(job), err: error, delayMs: wait.delayMs, timeLeftMs: wait.timeLeftMs },
          `storage fault (${cause}); the job waits and tries again in ${Math.round(wait.delayMs / 100) / 10} s, ${Math.round(wait.timeLeftMs / 100) / 10} s of HAT_STORAGE_RETRY_MS left`,
        );
        await job.moveToDelayed(runtime.clock.now() + wait.delayMs, token);
        throw new DelayedError();
      }
      outages.end(job);
      throw toWorkerError(error);
    } finally {
      ended(cancel);
    }
  };
  // One promise per job, settled by the work or by a cancel, whichever comes first: no async
  // layer between the stage's own promise and BullMQ's await.
  return (job, token, cancel) =>
    new Promise<StageJobResult | PartJobResult | FanInTaskJobResult>((resolve, reject) => {
      let settled = false;
      const fail = (error: unknown) => {
        if (settled) return;
        settled = true;
        failed(job, token, cancel, error).then(resolve, reject);
      };
      cancel.onCancel = () => fail(new Error('aborted'));
      if (cancel.cancelled) cancel.onCancel();
      const guard = lockOf(job, token, cancel);
      const work =
        job.name === 'part'
          ? processPartJob(stage, runtime, job, cancel, guard)
          : job.name === 'fan-in-task'
            ? processFanInTaskJob(stage, runtime, job, cancel, guard)
            : processStageJob(stage, runtime, job, token, cancel, guard);
      work.then((result) => {
        if (settled) return;
        settled = true;
        outages.end(job);
        ended(cancel);
        resolve(result);
      }, fail);
    });
}

/** A job's lock as its store's guard asks about it (see job-lock.ts). */
class JobLock implements JobLockProbe {
  constructor(
    private readonly runtime: StageJobRuntime,
    private readonly job: StageJobHandle,
    private readonly token: string,
    private readonly cancel: JobCancel,
    readonly lockDurationMs: number,
  ) {}

  holds(): Promise<boolean | undefined> {
    return this.runtime.holdsLock ? this.runtime.holdsLock(this.job, this.token) : Promise.resolve(undefined);
  }

  cancelledForLostLock(): boolean {
    return this.cancel.reason === lockLostReason;
  }
}

/**
 * When each job's current storage outage began (in this process: a job that moves to another
 * worker starts a new budget there, which only lengthens the wait by one budget per worker).
 */
class StorageOutages {
  private readonly since = new Map<string, { at: number; waits: number }>();
  constructor(private readonly policy: StageJobRuntime['storageRetry']) {}

  /**
   * The wait before the next try and what is left of the budget, or undefined when the error is no
   * storage fault or the budget is spent.
   */
  delayFor(job: StageJobHandle, error: unknown, now: number): { delayMs: number; timeLeftMs: number } | undefined {
    if (!this.policy || this.policy.budgetMs <= 0 || !isStorageFault(error)) return undefined;
    const key = `${job.queueQualifiedName}:${job.id ?? ''}`;
    const outage = this.since.get(key) ?? { at: now, waits: 0 };
    const elapsed = now - outage.at;
    if (elapsed >= this.policy.budgetMs) return undefined;
    outage.waits += 1;
    this.since.set(key, outage);
    const exponential = Math.min(this.policy.maxDelayMs, 1_000 * 2 ** (outage.waits - 1));
    const timeLeftMs = this.policy.budgetMs - elapsed;
    return { delayMs: Math.min(Math.round(exponential * (0.5 + Math.random() * 0.5)), timeLeftMs), timeLeftMs };
  }

  end(job: StageJobHandle): void {
    if (this.since.size > 0) this.since.delete(`${job.queueQualifiedName}:${job.id ?? ''}`);
  }
}

/**
 * Maps our errors to BullMQ's: permanent ones (bad input included) become UnrecoverableError so
 * BullMQ fails the job once; BullMQ's own control-flow errors pass through; the rest is retried.
 */
export function toWorkerError(thrown: unknown): unknown {
  const error = redisFullError(thrown) ?? thrown;
  // The message becomes the job's failedReason (stored in Redis, shown by the dashboard).
  if (error instanceof Error) {
    error.message = redactUrlCredentials(error.message);
    if (error.stack) error.stack = redactUrlCredentials(error.stack);
  }
  if (
    error instanceof WaitingChildrenError ||
    error instanceof WaitingError ||
    error instanceof DelayedError ||
    error instanceof RateLimitError ||
    error instanceof UnrecoverableError
  ) {
    return error;
  }
  if (HatError.isInstance(error) && !error.retryable) {
    const unrecoverable = new UnrecoverableError(error.message);
    unrecoverable.stack = error.stack;
    return unrecoverable;
  }
  return error;
}

/**
 * The ids a line about a job carries (run, stage, part, job), read from its data: the same fields
 * the processor's own logger binds, so one query finds every line of a run or a part.
 */
export function jobLogIds(job: Pick<StageJobHandle, 'id' | 'name' | 'data'>): Record<string, unknown> {
  const data = (job.data ?? {}) as { runId?: unknown; stage?: unknown; index?: unknown };
  return {
    jobId: job.id,
    ...(typeof data.runId === 'string' ? { runId: data.runId } : {}),
    ...(typeof data.stage === 'string' ? { stage: data.stage } : {}),
    ...(job.name === 'part' && typeof data.index === 'number' ? { part: partIdOf(data.index) } : {}),
    ...(job.name === 'fan-in-task' && typeof data.index === 'number' ? { fanInTask: data.index } : {}),
  };
}

function jobLabel(job: StageJobHandle): string {
  return `${job.queueQualifiedName}:${job.id ?? '?'}`;
}

/** The deps of one stage or part job: the run's store, this stage's output, throttled progress. */
function jobDeps(
  stageName: string,
  runtime: StageJobRuntime,
  job: StageJobHandle,
  data: Pick<StageJobData, 'artifactsRoot' | 'outputPrefix' | 'runId' | 'seed' | 'stage' | 'kind'>,
  cancel: JobCancel,
  guard: JobLock | undefined,
  report: (progress: StageProgress) => Promise<unknown>,
  part?: StageDeps['part'],
): StageDeps {
  const kind = data.kind ?? data.stage;
  if (kind !== stageName)
    throw new BadInputError(
      'BAD_JOB_DATA',
      `job ${jobLabel(job)} is for stage "${kind}" but sits in the queue of stage "${stageName}"`,
    );
  const store = runtime.storeFor(data.artifactsRoot);
  return buildStageDeps({
    store: guard ? new LockGuardedStore(store, jobLabel(job), guard, guard.lockDurationMs) : store,
    outputPrefix: data.outputPrefix,
    openObject: runtime.openObject,
    runId: data.runId,
    seed: data.seed,
    stage: data.stage,
    part,
    jobId: job.id,
    attempt: job.attemptsMade + 1,
    logger: runtime.logger,
    clock: runtime.clock,
    progress: { throttled: report },
    signal: () => cancel.signal,
    services: runtime.services,
  });
}

async function processPartJob(
  stage: AnyStage,
  runtime: StageJobRuntime,
  job: StageJobHandle,
  cancel: JobCancel,
  guard: JobLock | undefined,
): Promise<PartJobResult> {
  const data = parseJobData(partJobDataSchema, job.data, jobLabel(job));
  if (stage.kind !== 'fan-out')
    throw new HatError(
      'BAD_JOB_DATA',
      `stage "${stage.name}" does not fan out, but job ${jobLabel(job)} is one of its parts`,
    );
  const input = parseOrThrow(
    stage.partInput,
    data.input,
    'PART_INPUT_INVALID',
    `part input of stage "${stage.name}" is invalid`,
    jobLabel(job),
    'input',
  );
  const part = { index: data.index, id: partIdOf(data.index), count: data.count };
  const deps = jobDeps(
    stage.name,
    runtime,
    job,
    data,
    cancel,
    guard,
    (report) => job.updateProgress({ ...report }),
    part,
  );
  const output = await runPart(stage, deps, { id: part.id, input, inputHash: data.inputHash });
  return { kind: 'part', index: data.index, output };
}

async function processFanInTaskJob(
  stage: AnyStage,
  runtime: StageJobRuntime,
  job: StageJobHandle,
  cancel: JobCancel,
  guard: JobLock | undefined,
): Promise<FanInTaskJobResult> {
  const data = parseJobData(fanInTaskJobDataSchema, job.data, jobLabel(job));
  if (stage.kind !== 'fan-out' || !stage.fanInTasks)
    throw new HatError(
      'BAD_JOB_DATA',
      `stage "${stage.name}" has no fan-in tasks, but job ${jobLabel(job)} is one of them`,
    );
  const input = parseStageInput(stage, data.input, jobLabel(job), 'input');
  const deps = jobDeps(stage.name, runtime, job, data, cancel, guard, (report) => job.updateProgress({ ...report }));
  const output = await runFanInTask(stage, input, data.task, deps);
  return { kind: 'fan-in-task', index: data.index, output };
}

async function processStageJob(
  stage: AnyStage,
  runtime: StageJobRuntime,
  job: StageJobHandle,
  token: string | undefined,
  cancel: JobCancel,
  guard: JobLock | undefined,
): Promise<StageJobResult> {
  let data = parseJobData(stageJobDataSchema, job.data, jobLabel(job));
  // Children first: upstream stages, or parts put back by `hat runs retry`. A job that can have
  // none skips the round trip (it matters for many small single-job stages).
  if ((data.upstream.length > 0 || data.step !== 'plan') && (await job.moveToWaitingChildren(token)))
    throw new WaitingChildrenError();
  const startedAt = data.startedAt ?? runtime.clock.now();
  if (data.step === 'plan' && data.upstream.length > 0) {
    // A stage below held this one back (the gate held its candidate): done, without running.
    const upstream = Object.values(await job.getChildrenValues()).filter(isStageJobResult);
    const heldBy = holdOver(data.stage, upstream);
    if (heldBy) {
      runtime.logger.info(
        { stage: data.stage, runId: data.runId, heldBy: heldBy.stage, reasons: heldBy.reasons },
        'stage held back; not run',
      );
      return { ...stageResult(data.stage, null, 0, startedAt, runtime.clock.now(), upstream), heldBy };
    }
  }
  const input = parseStageInput(stage, data.input, jobLabel(job), 'input');
  const sendProgress = (progress: StageJobProgress) => job.updateProgress({ ...progress });
  const deps = jobDeps(stage.name, runtime, job, data, cancel, guard, (report) =>
    sendProgress({ phase: data.step === 'plan' ? 'plan' : 'finish', partsTotal: data.partCount, ...report }),
  );

  if (stage.kind === 'single') {
    const processor = stage.createProcessor(deps);
    const output = checkResult(stage.output, await processor(input), stage.name, 'stage output');
    const upstream =
      data.upstream.length > 0 ? Object.values(await job.getChildrenValues()).filter(isStageJobResult) : noUpstream;
    return stageResult(data.stage, output, 0, startedAt, runtime.clock.now(), upstream, stage.holdOf?.(output));
  }

  for (let round = 0; ; round++) {
    if (data.step === 'plan') {
      if (await runtime.isRunCancelled(data.runId)) throw runCancelled(data.runId);
      data = await addParts(stage, runtime, job, data, input, deps, startedAt);
      await sendProgress({ phase: 'parts', partsTotal: data.partCount });
      if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
    }
    const values = Object.values(await job.getChildrenValues());
    const parts = values.filter(isPartJobResult).sort((left, right) => left.index - right.index);
    const upstream = values.filter(isStageJobResult);
    const expected = data.partCount ?? 0;
    if (parts.length === expected) {
      await sendProgress({ phase: 'finish', partsTotal: expected });
      const partOutputs = parts.map((part) => part.output);
      let taskOutputs: unknown[] = [];
      if (stage.fanInTasks) {
        if (data.step !== 'fan-in-tasks') {
          data = await addFanInTasks(stage, runtime, job, data, input, partOutputs, deps);
          if ((data.taskCount ?? 0) > 0 && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError();
        }
        const tasks = Object.values(await job.getChildrenValues())
          .filter(isFanInTaskResult)
          .sort((left, right) => left.index - right.index);
        if (tasks.length !== (data.taskCount ?? 0)) {
          if (round > 0)
            throw new HatError(
              'FAN_IN_TASKS_MISSING',
              `stage "${stage.name}" expected ${data.taskCount ?? 0} fan-in task results but found ${tasks.length} after re-adding the missing tasks`,
            );
          deps.logger.warn(
            { expected: data.taskCount, found: tasks.length },
            'fan-in task results missing; re-adding the missing tasks',
          );
          data = { ...data, step: 'fan-in' };
          continue;
        }
        taskOutputs = tasks.map((task) => task.output);
      }
      const finished = await stage.finish(input, partOutputs, deps, taskOutputs);
      const output = checkResult(stage.output, finished, stage.name, 'stage output');
      await sendProgress({ phase: 'done', partsTotal: expected });
      return stageResult(
        data.stage,
        output,
        expected,
        startedAt,
        runtime.clock.now(),
        upstream,
        stage.holdOf?.(output),
      );
    }
    // Fewer results than parts: some were removed (cancel, retention). Cancelled runs stop here;
    // otherwise plan again, which re-adds only the missing parts (ids are deterministic).
    if (await runtime.isRunCancelled(data.runId)) throw runCancelled(data.runId);
    if (round > 0) {
      throw new HatError(
        'PARTS_MISSING',
        `stage "${stage.name}" expected ${expected} part results but found ${parts.length} after re-adding the missing parts`,
      );
    }
    deps.logger.warn({ expected, found: parts.length }, 'part results missing; re-adding the missing parts');
    data = { ...data, step: 'plan' };
  }
}

async function addParts(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  runtime: StageJobRuntime,
  job: StageJobHandle,
  data: StageJobData,
  input: unknown,
  deps: StageDeps,
  startedAt: number,
): Promise<StageJobData> {
  const planned = await planParts(stage, input, deps);
  const specs = planned.map((part) =>
    childJobSpec(stage, runtime, job, data, {
      name: 'part',
      // The stage's name in the run, not its kind: two instances of one kind never share part ids.
      jobId: partJobId(data.runId, data.stage, part.index, part.inputHash),
      fields: { index: part.index, count: planned.length, input: part.input, inputHash: part.inputHash },
    }),
  );
  if (specs.length > 0) await runtime.addParts(stage.name, specs);
  const next: StageJobData = { ...data, step: 'fan-in', partCount: specs.length, startedAt };
  await job.updateData(next);
  return next;
}

/**
 * The fan-in task jobs of a stage whose parts are done: the part outputs go to the store (the
 * tasks read them there), one child job per task (deterministic ids, so adding again adds
 * nothing twice), and `step: fan-in-tasks`.
 */
async function addFanInTasks(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  runtime: StageJobRuntime,
  job: StageJobHandle,
  data: StageJobData,
  input: unknown,
  partOutputs: unknown[],
  deps: StageDeps,
): Promise<StageJobData> {
  const planned = await planFanInTasks(stage, input, partOutputs, deps, { writeParts: true });
  const specs = planned.map((task) =>
    childJobSpec(stage, runtime, job, data, {
      name: 'fan-in-task',
      jobId: fanInTaskJobId(data.runId, data.stage, task.index, task.taskHash),
      fields: { index: task.index, count: planned.length, task: task.task, input: data.input },
    }),
  );
  if (specs.length > 0) await runtime.addParts(stage.name, specs);
  const next: StageJobData = { ...data, step: 'fan-in-tasks', taskCount: specs.length };
  await job.updateData(next);
  return next;
}

/** A child job of a stage job (a part or a fan-in task): the run's fields, its own, the stage's queue options. */
function childJobSpec(
  stage: AnyStage,
  runtime: StageJobRuntime,
  job: StageJobHandle,
  data: StageJobData,
  child: { name: PartJobSpec['name']; jobId: string; fields: Record<string, unknown> },
): PartJobSpec {
  const childData = {
    v: 1 as const,
    runId: data.runId,
    stage: data.stage,
    ...(data.kind ? { kind: data.kind } : {}),
    seed: data.seed,
    artifactsRoot: data.artifactsRoot,
    outputPrefix: data.outputPrefix,
    ...child.fields,
  };
  checkJobData(childData, runtime.jobDataLimit, { stage: stage.name, jobId: child.jobId });
  const parent = { id: job.id as string, queue: job.queueQualifiedName };
  return {
    name: child.name,
    data: childData,
    opts: {
      ...stageJobOptions(stage.queue ?? {}, runtime.jobDataLimit),
      parent,
      failParentOnFailure: true,
      jobId: child.jobId,
    },
  };
}

/** The upstream results of a job that has none (read only). */
const noUpstream: StageJobResult[] = [];

function stageResult(
  stage: string,
  output: unknown,
  parts: number,
  startedAt: number,
  finishedAt: number,
  upstream: StageJobResult[],
  hold?: StageHold,
): StageJobResult {
  const manifestUri = manifestUriOf(output);
  // Kept small: BullMQ serializes, stores and publishes every job's result, so fields that say
  // nothing are left out (an empty upstream list; the job's own id, which no reader used). Two
  // literals rather than spreads of empty objects: this runs once per job.
  const result: StageJobResult = manifestUri
    ? { kind: 'stage', stage, output, manifestUri, parts, startedAt, finishedAt }
    : { kind: 'stage', stage, output, parts, startedAt, finishedAt };
  if (upstream.length > 0) result.upstream = upstream;
  if (hold) result.hold = hold;
  return result;
}

function runCancelled(runId: string): HatError {
  return new HatError('RUN_CANCELLED', `run ${runId} was cancelled`);
}
