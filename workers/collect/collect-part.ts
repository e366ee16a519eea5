import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { partIdOf } from '../../queues/stage-kit/job-ids';
import { JsonlWriter, writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { BadInputError, HatError, TransientError, isRetryable } from '../../shared/errors';
import { harnessHash } from '../../shared/harness/harness-hash';
import type { Harness } from '../../shared/harness/harness-types';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import type { ModelClient, SamplingSettings } from '../../shared/models/model-client';
import { runEpisode } from '../../shared/simulator/agent-loop';
import { taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';
import { trajectorySchema, type Trajectory } from '../../shared/trajectory/trajectory';
import { trajectoryLine } from '../../shared/text/trajectory-line';
import { readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import { reviewEntrySchema, type CollectPartInput, type CollectPartOutput, type ReviewEntry } from './collect-contract';
import { addSample, emptyCounts, type CollectCounts } from './collect-stats';
import { EpisodeTeacher, openTeacher } from './open-teacher';
import { selectSamples } from './select-samples';
import { loadCollectTasks } from './collect-tasks';
import { writtenObjectOf } from '../../queues/stage-kit/written-object';

/**
 * One part of the collect stage: its slice of tasks, N episodes each with the teacher, the
 * selection rule per task, and three objects written in task order whatever order the episodes
 * finished in: accepted trajectories, rejected ones (each with `meta.rejection`), and the part's
 * review list.
 */

/** Object keys of a part's outputs (deterministic: the same part always writes the same keys). */
export function collectPartKeys(deps: Pick<StageDeps, 'output'>, index: number) {
  const id = partIdOf(index);
  return {
    tasks: deps.output.key(`tasks/${id}.jsonl.gz`),
    accepted: deps.output.key(`${id}.accepted.jsonl.gz`),
    rejected: deps.output.key(`${id}.rejected.jsonl.gz`),
    review: deps.output.key(`_parts/${id}.review.jsonl.gz`),
  };
}

/** Loads the harness a part names (absent: the sample harness) and checks it is the one the plan saw. */
export async function loadPlannedHarness(
  harness: CollectPartInput['harness'],
  openObject: StageDeps['openObject'],
): Promise<{ harness: Harness; hash: string }> {
  const uri = harness.uri ?? sampleHarnessDirectory();
  const loaded = await loadHarnessFromUri(uri, openObject);
  const hash = harnessHash(loaded);
  if (hash !== harness.hash) {
    throw new BadInputError(
      'HARNESS_CHANGED',
      `collect.harness: ${uri} has hash ${hash.slice(0, 12)} now but ${harness.hash.slice(0, 12)} when the stage was planned; a harness must not change during a run: rerun the stage`,
    );
  }
  return { harness: loaded, hash };
}

/** Sampling of one sample: with several samples per task, each gets its own request seed. */
export function samplingOf(
  part: Pick<CollectPartInput, 'sampling' | 'samplesPerTask'>,
  sampleIndex: number,
): SamplingSettings | undefined {
  if (part.samplesPerTask === 1) return part.sampling;
  return { ...part.sampling, seed: (part.sampling?.seed ?? 0) + sampleIndex };
}

interface EpisodeResult {
  trajectory: Trajectory;
  /** The error the teacher threw, when the episode ended in model_error. */
  failure?: unknown;
}

interface EpisodeContext {
  part: CollectPartInput;
  tasks: Task[];
  harness: Harness;
  hash: string;
  teacher: ModelClient;
  deps: StageDeps;
}

/** What the part's verdict on its teacher needs of the episodes played (checkTeacherAnswered). */
interface TeacherTally {
  played: number;
  /** Whether any episode ended otherwise than in a model error. */
  answered: boolean;
  firstFailure?: unknown;
  lastFailure?: unknown;
  anyRetryable: boolean;
  /** The longest Retry-After of the failures, ms. */
  retryAfterMs: number;
}

function abortedError(deps: StageDeps): unknown {
  return deps.signal.reason ?? new HatError('STAGE_ABORTED', `collect ${deps.part?.id ?? ''} was interrupted`);
}

/** Tasks a part may have played and not yet written, per lane: beyond it, lanes wait for the writes. */
const pendingTasksPerLane = 4;

/**
 * Runs every (task, sample) episode, `concurrency` at a time, and hands each task's episodes to
 * `write` in task order as soon as the task and every task before it are done, so a part holds
 * the episodes of a few tasks per lane, not all of its tasks' (1,000 trajectories of about 18 KB
 * each, times the parts a worker runs at once). A teacher that fails every episode with a
 * retryable error (its own retries spent) trips a breaker after a few in a row and no success at
 * all: the remaining episodes are not started, since a down server would only fail them too,
 * slowly.
 */
async function playEpisodes(
  context: EpisodeContext,
  write: (taskIndex: number, results: EpisodeResult[]) => Promise<void>,
): Promise<{ stopped: boolean; tally: TeacherTally }> {
  const { part, tasks, deps } = context;
  const results = new Map<number, EpisodeResult[]>();
  const remaining = tasks.map(() => part.samplesPerTask);
  const total = tasks.length * part.samplesPerTask;
  const lanes = Math.max(1, Math.min(part.concurrency, total));
  const breakerThreshold = Math.max(4, 2 * lanes);
  const tally: TeacherTally = { played: 0, answered: false, anyRetryable: false, retryAfterMs: 0 };
  let next = 0;
  let written = 0;
  let writing = false;
  let writeFailure: unknown;
  /** Lanes waiting for the writes to catch up. */
  let waiting: Array<() => void> = [];
  const wakeLanes = () => {
    const woken = waiting;
    waiting = [];
    for (const wake of woken) wake();
  };
  let failedInARow = 0;
  let stopped = false;
  deps.progress({ done: 0, total: tasks.length });

  /** Writes the done tasks that follow the last one written, one call at a time. */
  const writeDone = async () => {
    if (writing) return;
    writing = true;
    try {
      while (remaining[written] === 0 && writeFailure === undefined) {
        const taskResults = results.get(written) ?? [];
        results.delete(written);
        await write(written, taskResults);
        written++;
        deps.progress({ done: written, total: tasks.length });
        wakeLanes();
      }
    } catch (error) {
      writeFailure = error;
      wakeLanes();
    } finally {
      writing = false;
    }
  };
  const waitForWrites = () => new Promise<void>((resolve) => waiting.push(resolve));

  const lane = async () => {
    while (!stopped && next < total) {
      if (deps.signal.aborted) throw abortedError(deps);
      if (writeFailure !== undefined) throw writeFailure;
      if (Math.floor(next / part.samplesPerTask) - written >= pendingTasksPerLane * lanes) {
        await waitForWrites();
        continue;
      }
      const slot = next++;
      const taskIndex = Math.floor(slot / part.samplesPerTask);
      const sampleIndex = slot % part.samplesPerTask;
      const task = tasks[taskIndex];
      const teacher = new EpisodeTeacher(context.teacher);
      // A signal of its own per episode: the client listens on it per call, and many lanes listening on the job's one signal would pile up listeners.
      const signal = AbortSignal.any(
        part.episodeTimeoutMs === undefined ? [deps.signal] : [deps.signal, AbortSignal.timeout(part.episodeTimeoutMs)],
      );
      const trajectory = await runEpisode({
        policy: teacher,
        harness: context.harness,
        harnessHash: context.hash,
        task,
        maxSteps: part.maxSteps,
        maxTurns: part.maxTurns,
        sampling: samplingOf(part, sampleIndex),
        sampleIndex,
        seed: part.seed,
        signal,
        ...(part.variant ? { variant: part.variant } : {}),
      });
      // A job being cancelled or handed back is not an episode outcome: stop, record nothing.
      if (deps.signal.aborted) throw abortedError(deps);
      let taskResults = results.get(taskIndex);
      if (!taskResults) results.set(taskIndex, (taskResults = []));
      taskResults[sampleIndex] = {
        trajectory,
        ...(trajectory.status === 'model_error' ? { failure: teacher.failure } : {}),
      };
      tally.played++;
      if (trajectory.status === 'model_error') {
        tallyFailure(tally, teacher.failure);
        if (isRetryable(teacher.failure)) {
          failedInARow++;
          if (!tally.answered && failedInARow >= breakerThreshold) stopped = true;
        }
      } else {
        tally.answered = true;
        failedInARow = 0;
      }
      if (--remaining[taskIndex] === 0) await writeDone();
      // Scripted teachers answer without real I/O: let timers (lock renewal, progress) run.
      await yieldToEventLoop();
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  await writeDone();
  if (writeFailure !== undefined) throw writeFailure;
  return { stopped, tally };
}

function tallyFailure(tally: TeacherTally, failure: unknown): void {
  if (tally.firstFailure === undefined) tally.firstFailure = failure;
  tally.lastFailure = failure;
  if (isRetryable(failure)) tally.anyRetryable = true;
  if (failure instanceof TransientError) tally.retryAfterMs = Math.max(tally.retryAfterMs, failure.retryAfterMs ?? 0);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The part's verdict on its teacher: when every episode it ran ended in a model error, the
 * failure is not the tasks'. Retryable errors (a down or overloaded server, after the client's
 * retries) fail the part with TEACHER_UNAVAILABLE so the queue retries it later, honouring the
 * longest Retry-After seen; errors no retry can fix (a rejected request, a missing model) fail
 * it for good with TEACHER_REJECTED.
 */
function checkTeacherAnswered(tally: TeacherTally, stopped: boolean, partId: string): void {
  if (tally.played === 0 || tally.answered) return;
  if (stopped || tally.anyRetryable) {
    throw new TransientError(
      'TEACHER_UNAVAILABLE',
      `collect ${partId}: every one of the ${tally.played} episodes played failed to reach the teacher${stopped ? ' (the rest were not started)' : ''}; the part is retried later. Last error: ${messageOf(tally.lastFailure)}`,
      { retryAfterMs: tally.retryAfterMs > 0 ? tally.retryAfterMs : undefined, cause: tally.lastFailure },
    );
  }
  throw new BadInputError(
    'TEACHER_REJECTED',
    `collect ${partId}: the teacher refused every one of the ${tally.played} episodes; fix collect.teacher. First error: ${messageOf(tally.firstFailure)}`,
    { cause: tally.firstFailure },
  );
}

/**
 * The part's tasks and their slice object: generated here and written (the same bytes the plan
 * would write) when the part input says `generate`, else the slice the plan wrote, checked to be
 * the one planned.
 */
async function partTasks(
  part: CollectPartInput,
  deps: StageDeps,
): Promise<{ tasks: Task[]; written: NonNullable<CollectPartInput['tasks']> }> {
  const partId = partIdOf(part.index);
  if (part.generate !== undefined) {
    const { tasks } = await loadCollectTasks({ generate: part.generate }, deps.openObject);
    const written = await writeJsonl(deps.store, collectPartKeys(deps, part.index).tasks, tasks, {
      schema: taskSchema,
    });
    return { tasks, written: writtenObjectOf(written) };
  }
  if (part.tasks === undefined)
    throw new BadInputError('BAD_JOB_DATA', `collect ${partId}: the part input names neither tasks nor generate`);
  const { records: tasks, sha256 } = await readRecordRange(deps.openObject, part.tasks.uri, taskSchema);
  if (sha256 !== part.tasks.sha256 || tasks.length !== part.tasks.records) {
    throw new BadInputError(
      'TASKS_CHANGED',
      `collect ${partId}: ${part.tasks.uri} is not the task slice this part was planned with; the stage was re-planned with other input: rerun the stage`,
    );
  }
  return { tasks, written: part.tasks };
}

export async function collectPart(part: CollectPartInput, deps: StageDeps): Promise<CollectPartOutput> {
  const startedAt = deps.clock.now();
  const partId = partIdOf(part.index);
  const { harness, hash } = await loadPlannedHarness(part.harness, deps.openObject);
  const { tasks, written: taskSlice } = await partTasks(part, deps);

  const keys = collectPartKeys(deps, part.index);
  const accepted = JsonlWriter.open<Trajectory>(deps.store, keys.accepted, {
    schema: trajectorySchema,
    stringify: trajectoryLine,
  });
  const rejected = JsonlWriter.open<Trajectory>(deps.store, keys.rejected, {
    schema: trajectorySchema,
    stringify: trajectoryLine,
  });
  const review = JsonlWriter.open<ReviewEntry>(deps.store, keys.review, { schema: reviewEntrySchema });
  const stats: Record<string, CollectCounts> = {};
  /** One task's episodes, in task order: the selection rule, the counts, and the three objects. */
  const writeTask = async (taskIndex: number, results: EpisodeResult[]) => {
    const task = tasks[taskIndex];
    const decisions = selectSamples(
      results.map((result) => result.trajectory),
      part.selection,
    );
    const counts = (stats[task.category] ??= emptyCounts());
    counts.tasks++;
    const reasons: ReviewEntry['reasons'] = [];
    for (const decision of decisions) {
      const { trajectory } = decision;
      addSample(counts, trajectory);
      if (decision.accepted) {
        counts.accepted++;
        counts.samplesPassed++;
        counts.rewardSumAccepted += trajectory.reward.total;
        await accepted.write(trajectory);
        continue;
      }
      if (decision.reason === 'not_selected') counts.samplesPassed++;
      counts.rejected[decision.reason] = (counts.rejected[decision.reason] ?? 0) + 1;
      reasons.push({
        sampleIndex: trajectory.sampleIndex,
        trajectoryId: trajectory.id,
        status: trajectory.status,
        reason: decision.reason,
        reward: trajectory.reward.total,
        detail: decision.detail,
      });
      await rejected.write({
        ...trajectory,
        meta: { ...trajectory.meta, rejection: { reason: decision.reason, detail: decision.detail } },
      });
    }
    if (reasons.length === decisions.length) {
      counts.review++;
      await review.write({ taskId: task.id, category: task.category, attempts: decisions.length, reasons });
    } else {
      counts.tasksAccepted++;
    }
  };

  const teacher = openTeacher(part.teacher, { harness, tasks, logger: deps.logger, random: () => deps.rng.next() });
  try {
    try {
      const { stopped, tally } = await playEpisodes({ part, tasks, harness, hash, teacher, deps }, writeTask);
      checkTeacherAnswered(tally, stopped, partId);
    } finally {
      await teacher.close?.();
    }
  } catch (error) {
    await Promise.all([accepted.abort(error), rejected.abort(error), review.abort(error)]);
    throw error;
  }
  const [acceptedObject, rejectedObject, reviewObject] = await Promise.all([
    accepted.close(),
    rejected.close(),
    review.close(),
  ]);
  return {
    index: part.index,
    tasks: taskSlice,
    teacher: { provider: teacher.provider, model: teacher.modelId, simulated: teacher.simulated ?? false },
    accepted: writtenObjectOf(acceptedObject),
    rejected: writtenObjectOf(rejectedObject),
    review: writtenObjectOf(reviewObject),
    stats,
    startedAt,
    endedAt: deps.clock.now(),
    lineage: part.lineage,
  };
}
