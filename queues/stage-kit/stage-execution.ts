import type { z } from 'zod';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { zodProblems } from '../../shared/config/zod-problems';
import { HatError, ProblemCollector } from '../../shared/errors';
import { hashValue } from '../../shared/hash/hash';
import type { Logger } from '../../shared/log/logger';
import { Rng } from '../../shared/random/rng';
import type {
  AnyStage,
  Clock,
  FanOutStageDefinition,
  StageDeps,
  StageOutputLocation,
  StageProgress,
  StageServices,
} from './define-stage';
import { partIdOf } from './job-ids';

/**
 * The parts of running a stage that do not depend on where it runs: input/output validation,
 * planning parts, running one part idempotently, building deps. Both bindings (BullMQ worker and
 * `hat stage`) use these, so a stage behaves the same in both.
 */

/** The output location of a stage whose objects go under `prefix` (`''` or ending in `/`). */
export function stageOutputLocation(store: ArtifactStore, prefix: string): StageOutputLocation {
  const normalized = prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`;
  return {
    prefix: normalized,
    manifestKey: `${normalized}manifest.json`,
    key: (name) => `${normalized}${name}`,
    uri: (name) => store.uriOf(`${normalized}${name}`),
  };
}

/** Parses with a schema; BadInputError `<code>` naming `where` and every field problem. */
export function parseOrThrow<T>(
  schema: z.ZodType<T>,
  value: unknown,
  code: string,
  summary: string,
  where?: string,
  pathPrefix = '',
): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const problems = new ProblemCollector();
  problems.addAll(zodProblems(result.error, where, pathPrefix));
  problems.throwIfAny(code, summary);
  throw new Error('unreachable');
}

/** The stage config checked against the stage's input schema. */
export function parseStageInput(stage: AnyStage, value: unknown, where?: string, pathPrefix = ''): unknown {
  return parseOrThrow(
    stage.input,
    value,
    'STAGE_INPUT_INVALID',
    `the config of stage "${stage.name}" is invalid; fix the fields named below`,
    where,
    pathPrefix,
  );
}

/**
 * A processor's result checked against its schema. A mismatch is a bug in the stage, not bad
 * input and not transient: a permanent HatError (the job fails once).
 */
export function checkResult<T>(schema: z.ZodType<T>, value: unknown, stage: string, what: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const detail = zodProblems(result.error)
    .map((problem) => `${problem.path}: ${problem.message}`)
    .join('; ');
  throw new HatError(
    'STAGE_OUTPUT_INVALID',
    `stage "${stage}" returned a ${what} that does not match its schema (${detail}); this is a bug in the stage`,
  );
}

/** A planned part: its validated input and the hash that goes into its job id and marker. */
export interface PlannedPart {
  index: number;
  id: string;
  input: unknown;
  inputHash: string;
}

/** Runs `plan` and validates every part input against the stage's part schema. */
export async function planParts(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  input: unknown,
  deps: StageDeps,
): Promise<PlannedPart[]> {
  const partInputs = await stage.plan(input, deps);
  return partInputs.map((partInput, index) => {
    const parsed = checkResult(stage.partInput, partInput, stage.name, `part input (part ${index})`);
    return { index, id: partIdOf(index), input: parsed, inputHash: hashValue(parsed) };
  });
}

/** Key of the record that says a part is done: `<prefix>_state/<partId>.json`. */
export function partMarkerKey(output: StageOutputLocation, partId: string): string {
  return output.key(`_state/${partId}.json`);
}

interface PartMarker {
  inputHash: string;
  output: unknown;
}

/**
 * Runs one part idempotently. A part that already finished with the same input (its marker is
 * there) returns the recorded output without redoing work; otherwise the processor writes the
 * part's own objects (a retry rewrites only those) and the marker is written after them.
 */
export async function runPart(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  deps: StageDeps,
  part: { id: string; input: unknown; inputHash: string },
): Promise<unknown> {
  const markerKey = partMarkerKey(deps.output, part.id);
  const marker = await readMarker(deps.store, markerKey);
  if (marker && marker.inputHash === part.inputHash) {
    const recorded = stage.partOutput.safeParse(marker.output);
    if (recorded.success) {
      deps.logger.debug({ part: part.id }, 'part already done; reusing its recorded output');
      return recorded.data;
    }
  }
  // A part that runs (again) first clears what a killed worker left half-written beside its outputs.
  const swept = (await deps.store.sweepTemporary?.(deps.output.prefix)) ?? 0;
  if (swept > 0) deps.logger.info({ part: part.id, swept }, 'removed temp files a killed writer left');
  const processor = stage.createProcessor(deps);
  const output = checkResult(stage.partOutput, await processor(part.input), stage.name, 'part output');
  const record: PartMarker = { inputHash: part.inputHash, output };
  await deps.store.put(markerKey, JSON.stringify(record), { contentType: 'application/json' });
  return output;
}

/** A planned fan-in task: its validated value and the hash that goes into its job id. */
export interface PlannedFanInTask {
  index: number;
  task: unknown;
  taskHash: string;
}

/** Key of the part outputs a stage's fan-in tasks read: `<prefix>_state/fan-in-parts.json`. */
export function fanInPartsKey(output: StageOutputLocation): string {
  return output.key('_state/fan-in-parts.json');
}

/**
 * Runs the stage's fan-in task plan and validates every task. When there are tasks, writes the
 * part outputs where the task jobs read them (the same bytes on every attempt).
 */
export async function planFanInTasks(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  input: unknown,
  partOutputs: unknown[],
  deps: StageDeps,
  options: { writeParts: boolean },
): Promise<PlannedFanInTask[]> {
  if (!stage.fanInTasks) return [];
  const tasks = await stage.fanInTasks.plan(input, partOutputs, deps);
  const planned = tasks.map((value, index) => {
    const task = checkResult(stage.fanInTasks!.task, value, stage.name, `fan-in task (task ${index})`);
    return { index, task, taskHash: hashValue(task) };
  });
  if (planned.length > 0 && options.writeParts)
    await deps.store.put(fanInPartsKey(deps.output), JSON.stringify(partOutputs), { contentType: 'application/json' });
  return planned;
}

/** Runs one fan-in task over the given part outputs, or over those the plan wrote; checks its result. */
export async function runFanInTask(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  input: unknown,
  task: unknown,
  deps: StageDeps,
  partOutputs?: unknown[],
): Promise<unknown> {
  const tasks = stage.fanInTasks;
  if (!tasks) throw new HatError('BAD_JOB_DATA', `stage "${stage.name}" has no fan-in tasks`);
  const parsedTask = checkResult(tasks.task, task, stage.name, 'fan-in task');
  let parts = partOutputs;
  if (!parts) {
    const key = fanInPartsKey(deps.output);
    const recorded = JSON.parse((await deps.store.getBuffer(key)).toString('utf8')) as unknown;
    if (!Array.isArray(recorded))
      throw new HatError('PART_OUTPUT_DAMAGED', `${deps.store.uriOf(key)} holds no part list; rerun the stage`);
    parts = recorded.map((value, index) =>
      checkResult(stage.partOutput, value, stage.name, `part output (part ${index})`),
    );
  }
  return checkResult(
    tasks.taskOutput,
    await tasks.run(input, parts, parsedTask, deps),
    stage.name,
    'fan-in task result',
  );
}

async function readMarker(store: ArtifactStore, key: string): Promise<PartMarker | undefined> {
  if (!(await store.head(key))) return undefined;
  try {
    const value = JSON.parse((await store.getBuffer(key)).toString('utf8')) as PartMarker;
    return typeof value?.inputHash === 'string' ? value : undefined;
  } catch {
    // A damaged marker means "not known to be done": the part runs again and rewrites it.
    return undefined;
  }
}

/** Inputs to build StageDeps for one job (or one part). */
export interface StageDepsOptions {
  store: ArtifactStore;
  outputPrefix: string;
  openObject: StageDeps['openObject'];
  runId: string;
  seed: string;
  stage: string;
  part?: StageDeps['part'];
  /** The BullMQ job id, bound into every log line the job emits (absent under `hat stage`). */
  jobId?: string;
  attempt: number;
  logger: Logger;
  clock: Clock;
  /**
   * Where progress reports go: a reporter used as it is, or `{ throttled: send }`, a sender the
   * deps throttle (throttledProgress) when the stage first reports (most small jobs never do).
   */
  progress: ((report: StageProgress) => void) | { throttled: (report: StageProgress) => Promise<unknown> | void };
  /** The job's signal, or a function that makes it on first use (most jobs never read it). */
  signal: AbortSignal | (() => AbortSignal);
  services: StageServices;
}

/**
 * The StageDeps of one job: a plain object. output, progress, rng, logger and signal are own
 * getters that build their value on first use (many small jobs never touch them, and the
 * framework's per-job overhead is measured against a raw BullMQ worker:
 * bench/framework.bench.ts). Own, enumerable getters, so a spread copy of deps (`{ ...deps,
 * logger }`) carries every field, the job's signal included.
 */
export function buildStageDeps(options: StageDepsOptions): StageDeps {
  let output: StageOutputLocation | undefined;
  let progress: ((report: StageProgress) => void) | undefined;
  let rng: Rng | undefined;
  let logger: Logger | undefined;
  let signal: AbortSignal | undefined = typeof options.signal === 'function' ? undefined : options.signal;
  return {
    store: options.store,
    openObject: options.openObject,
    run: { id: options.runId, seed: options.seed },
    stage: options.stage,
    part: options.part,
    attempt: options.attempt,
    clock: options.clock,
    services: options.services,
    get output(): StageOutputLocation {
      output ??= stageOutputLocation(options.store, options.outputPrefix);
      return output;
    },
    get progress(): (report: StageProgress) => void {
      const sink = options.progress;
      progress ??= typeof sink === 'function' ? sink : throttledProgress(sink.throttled);
      return progress;
    },
    get rng(): Rng {
      rng ??= new Rng(options.seed).fork(options.part ? `${options.stage}/${options.part.id}` : options.stage);
      return rng;
    },
    get logger(): Logger {
      logger ??= options.logger.child({
        runId: options.runId,
        stage: options.stage,
        ...(options.part ? { part: options.part.id } : {}),
        ...(options.jobId !== undefined ? { jobId: options.jobId } : {}),
      });
      return logger;
    },
    get signal(): AbortSignal {
      signal ??= (options.signal as () => AbortSignal)();
      return signal;
    },
  };
}

/**
 * A progress reporter that sends at most one report per interval (the last one wins) and never
 * throws: progress is for people watching, losing one must not fail the work.
 */
export function throttledProgress(
  send: (report: StageProgress) => Promise<unknown> | void,
  intervalMs = 500,
): (report: StageProgress) => void {
  let lastSent = 0;
  let pending: StageProgress | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    if (!pending) return;
    const report = pending;
    pending = undefined;
    lastSent = Date.now();
    Promise.resolve()
      .then(() => send(report))
      .catch(() => undefined);
  };
  return (report) => {
    pending = report;
    const wait = lastSent + intervalMs - Date.now();
    if (wait <= 0) flush();
    else if (!timer) {
      timer = setTimeout(flush, wait);
      timer.unref();
    }
  };
}

/** The `manifestUri` a stage output carries, if any. */
export function manifestUriOf(output: unknown): string | undefined {
  const value = (output as { manifestUri?: unknown } | null)?.manifestUri;
  return typeof value === 'string' ? value : undefined;
}
