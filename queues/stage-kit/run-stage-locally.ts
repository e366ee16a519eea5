import { setTimeout as sleep } from 'node:timers/promises';
import { isStorageFault } from '../../shared/artifacts/storage-errors';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { HatError } from '../../shared/errors';
import type { Logger } from '../../shared/log/logger';
import {
  systemClock,
  type AnyStage,
  type Clock,
  type FanOutStageDefinition,
  type StageDeps,
  type StageServices,
} from './define-stage';
import { backoffDelay, defaultAttempts, defaultBackoffMs } from './retry-policy';
import {
  buildStageDeps,
  checkResult,
  parseStageInput,
  planFanInTasks,
  planParts,
  runFanInTask,
  runPart,
  type PlannedPart,
} from './stage-execution';

/**
 * `hat stage`: one stage in this process, no Redis. The same processor, `plan`, parts and
 * `finish` as under BullMQ, with the stage's attempts and backoff applied locally (permanent
 * errors stop at once), parts run `concurrency` at a time, and part markers so an interrupted
 * run resumes where it stopped.
 */

export interface LocalStageProgress {
  stage: string;
  phase: 'plan' | 'parts' | 'finish' | 'done';
  partsDone: number;
  partsTotal: number;
}

export interface LocalStageOptions {
  /** The store the output goes to (`--out`). */
  store: ArtifactStore;
  /** Key prefix inside it. Default '' (the stage writes at the root of `--out`). */
  outputPrefix?: string;
  openObject: StageDeps['openObject'];
  /** Recorded in manifests. Default `local`. */
  runId?: string;
  seed?: string;
  logger: Logger;
  clock?: Clock;
  services?: StageServices;
  /** Parts at once. Default the stage's concurrency, else 4. */
  concurrency?: number;
  signal?: AbortSignal;
  onProgress?: (progress: LocalStageProgress) => void;
  /** How long a part waits out storage faults before they spend its attempts, ms (HAT_STORAGE_RETRY_MS). Default 0. */
  storageRetryMs?: number;
}

export interface LocalStageResult {
  output: unknown;
  parts: number;
}

export async function runStageLocally(
  stage: AnyStage,
  config: unknown,
  options: LocalStageOptions,
): Promise<LocalStageResult> {
  const input = parseStageInput(stage, config, undefined);
  const controller = new AbortController();
  const abort = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', abort, { once: true });
  const depsFor = (part?: PlannedPart, count = 0, attempt = 1) =>
    buildStageDeps({
      store: options.store,
      outputPrefix: options.outputPrefix ?? '',
      openObject: options.openObject,
      runId: options.runId ?? 'local',
      seed: options.seed ?? '0',
      stage: stage.name,
      ...(part ? { part: { index: part.index, id: part.id, count } } : {}),
      attempt,
      logger: options.logger,
      clock: options.clock ?? systemClock,
      progress: () => undefined,
      signal: controller.signal,
      services: options.services ?? {},
    });
  const report = (phase: LocalStageProgress['phase'], partsDone: number, partsTotal: number) =>
    options.onProgress?.({ stage: stage.name, phase, partsDone, partsTotal });
  try {
    if (stage.kind === 'single') {
      report('plan', 0, 0);
      const output = await withAttempts(stage, options.storageRetryMs ?? 0, options.logger, (attempt) =>
        stage.createProcessor(depsFor(undefined, 0, attempt))(input),
      );
      report('done', 0, 0);
      return { output: checkResult(stage.output, output, stage.name, 'stage output'), parts: 0 };
    }
    report('plan', 0, 0);
    const parts = await planParts(stage, input, depsFor());
    const outputs = await runParts(
      stage,
      parts,
      options.concurrency ?? stage.queue?.concurrency ?? 4,
      controller,
      depsFor,
      (done) => report('parts', done, parts.length),
      options.storageRetryMs ?? 0,
      options.logger,
    );
    report('finish', parts.length, parts.length);
    const taskOutputs = await runFanInTasks(
      stage,
      input,
      outputs,
      options.concurrency ?? stage.queue?.concurrency ?? 4,
      controller,
      depsFor,
      options.storageRetryMs ?? 0,
      options.logger,
    );
    const output = checkResult(
      stage.output,
      await stage.finish(input, outputs, depsFor(), taskOutputs),
      stage.name,
      'stage output',
    );
    report('done', parts.length, parts.length);
    return { output, parts: parts.length };
  } finally {
    options.signal?.removeEventListener('abort', abort);
  }
}

async function runParts(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  parts: PlannedPart[],
  concurrency: number,
  controller: AbortController,
  depsFor: (part: PlannedPart, count: number, attempt: number) => StageDeps,
  onDone: (done: number) => void,
  storageRetryMs: number,
  logger: Logger,
): Promise<unknown[]> {
  let done = 0;
  onDone(0);
  return inLanes(stage, parts, concurrency, controller, async (part) => {
    const output = await withAttempts(stage, storageRetryMs, logger, (attempt) =>
      runPart(stage, depsFor(part, parts.length, attempt), part),
    );
    onDone(++done);
    return output;
  });
}

/** The stage's fan-in tasks, `concurrency` at a time, over the part outputs in memory; their results in task order. */
async function runFanInTasks(
  stage: FanOutStageDefinition<unknown, unknown, unknown, unknown>,
  input: unknown,
  partOutputs: unknown[],
  concurrency: number,
  controller: AbortController,
  depsFor: () => StageDeps,
  storageRetryMs: number,
  logger: Logger,
): Promise<unknown[]> {
  const tasks = await planFanInTasks(stage, input, partOutputs, depsFor(), { writeParts: false });
  return inLanes(stage, tasks, concurrency, controller, (task) =>
    withAttempts(stage, storageRetryMs, logger, () => runFanInTask(stage, input, task.task, depsFor(), partOutputs)),
  );
}

/**
 * `work` on every item, `concurrency` at a time; the results by item index. The first item that
 * fails for good stops the others (they see the aborted signal) and is what this throws.
 */
async function inLanes<Item extends { index: number }>(
  stage: AnyStage,
  items: Item[],
  concurrency: number,
  controller: AbortController,
  work: (item: Item) => Promise<unknown>,
): Promise<unknown[]> {
  const outputs = new Array<unknown>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length && !controller.signal.aborted) {
      const item = items[next++];
      outputs[item.index] = await work(item);
    }
  };
  const lanes = Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, () =>
    lane().catch((error: unknown) => {
      controller.abort(error);
      throw error;
    }),
  );
  const settled = await Promise.allSettled(lanes);
  const failure = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failure) throw failure.reason;
  if (controller.signal.aborted) throw new HatError('STAGE_ABORTED', `stage "${stage.name}" was interrupted`);
  return outputs;
}

/** The stage's attempts and backoff, as BullMQ would apply them; permanent errors end at once. */
async function withAttempts<T>(
  stage: AnyStage,
  storageRetryMs: number,
  logger: Logger,
  work: (attempt: number) => Promise<T>,
): Promise<T> {
  const attempts = stage.queue?.attempts ?? defaultAttempts;
  let outageSince: number | undefined;
  let outageWaits = 0;
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt);
    } catch (error) {
      const permanent = HatError.isInstance(error) && !error.retryable;
      if (!permanent && isStorageFault(error)) {
        // As under BullMQ: a storage outage is waited out before it spends attempts.
        outageSince ??= Date.now();
        const left = storageRetryMs - (Date.now() - outageSince);
        if (left > 0) {
          outageWaits += 1;
          attempt -= 1;
          const delayMs = Math.min(left, backoffDelay(outageWaits, 1_000, error), 30_000);
          const cause = error instanceof Error ? error.message : String(error);
          logger.warn(
            { err: error, delayMs, timeLeftMs: left },
            `storage fault (${cause}); the work waits and tries again in ${Math.round(delayMs / 100) / 10} s, ${Math.round(left / 100) / 10} s of HAT_STORAGE_RETRY_MS left`,
          );
          await sleep(delayMs);
          continue;
        }
      }
      if (permanent || attempt >= attempts) throw error;
      await sleep(backoffDelay(attempt, stage.queue?.backoffMs ?? defaultBackoffMs, error));
    }
  }
}
