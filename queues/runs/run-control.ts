import type { Job } from 'bullmq';
import { BadInputError, HatError, errorCodeOf } from '../../shared/errors';
import { z } from 'zod';
import { enqueueRun, treeParents } from './flows';
import type { RunPlan } from './run-config';
import { parseJobKey, partIdOf } from '../stage-kit/job-ids';
import { findStalledJobs, type StalledJob } from '../bullmq/stalled-jobs';
import { parseJobData, stageJobDataSchema, type StageJobResult } from '../bullmq/job-data';
import { runJobDataSchema, stageKindOf, type RunJobData } from './run-job-data';
import type { QueueContext } from '../bullmq/queue-context';
import { isRedisConnectionError } from '../bullmq/redis-connection';
import { runsQueueName } from '../stage-kit/stage-names';
import { runLayout } from './run-layout';
import {
  checkpointMarkerKey,
  handoffJobDataSchema,
  handoffNodeName,
  registerCommandOf,
  trainingRequestKey,
  type HandoffJobData,
} from './run-handoff';
import type { StageJobProgress } from '../bullmq/stage-job-processor';
import { summarizeStageOutput, type StageFigure } from '../stage-kit/stage-summary';

/**
 * Operator views and actions on runs (`hat runs ...`, `hat run --wait`), read from BullMQ: the
 * run's parent job (id = run id) and the stage jobs its data lists.
 */

export type RunState = 'waiting' | 'running' | 'completed' | 'failed' | 'cancelled';
/**
 * `held`: the stage completed with a decision to hold (the gate held its candidate), not a
 * failure; `not-run`: a hold below it kept it from running (it completed without doing its work);
 * `cancelled`: a cancel stopped it or removed its job (the name the run manifest and report use).
 */
export type StageState = 'waiting' | 'running' | 'retrying' | 'completed' | 'held' | 'not-run' | 'failed' | 'cancelled';

export interface StageStatus {
  name: string;
  /** The registered stage it runs, when it differs from the name. */
  kind?: string;
  jobId: string;
  /** The handoff whose checkpoint adds it (absent: it starts with the run). */
  handoff?: string;
  /** For a round of an on-policy stage: the policy version it samples with. */
  policyVersion?: number;
  state: StageState;
  /** Where a running fanned-out stage is. */
  phase?: StageJobProgress['phase'];
  partsTotal: number;
  partsDone: number;
  partsFailed: number;
  /**
   * Parts still marked active whose worker is gone (killed: its connection closed) or stopped
   * renewing their lock (paused, hung); the stalled check hands them to another worker.
   */
  partsStalled?: number;
  /** Those parts (and the stage job itself when it is the one stalled), with when each is handed back. */
  stalled?: StalledPartStatus[];
  /** Attempts the stage job made (plan / fan-in retries). */
  attempts: number;
  manifestUri?: string;
  /** Key figures of a completed stage (acceptance rate, tokens, SLO verdict, ...), as in the run report. */
  figures?: StageFigure[];
  error?: string;
  /** Held stages: what was held and why; stages held back: by which stage and why. */
  note?: string;
  startedAt?: string;
  finishedAt?: string;
}

/** A part (or stage job) that lost its worker. */
export interface StalledPartStatus {
  /** `part-00003`; absent for the stage job itself. */
  part?: string;
  jobId: string;
  /** `worker-lost`: its worker's connection to Redis is gone (killed); `lock-lapsed`: its worker is connected but let the lock lapse (paused, hung). */
  cause: StalledJob['cause'];
  /** The worker that held it (host.pid.tag). */
  worker?: string;
  /** In about how long the stalled check hands it to another worker, ms; absent when no worker serves the queue. */
  handBackInMs?: number;
}

/** Where a run's trainer handoff is. */
export interface HandoffStatus {
  /**
   * `waiting-for-stages`: the `after` stages run; `waiting-for-checkpoint`: the training request is
   * out; `running`: the checkpoint is registered and the `before` stages run.
   */
  state: 'waiting-for-stages' | 'waiting-for-checkpoint' | 'running' | 'completed' | 'failed' | 'cancelled';
  /** Its name (`train` for a run config's single `handoff:`). */
  name: string;
  jobId: string;
  /** The policy version its checkpoint is (handoffs after an on-policy stage's rounds). */
  policyVersion?: number;
  after: string[];
  before: string[];
  requestUri: string;
  checkpointUri: string;
  requestedAt?: string;
  /** No checkpoint by then fails the run with CHECKPOINT_TIMEOUT. */
  deadline?: string;
  checkpoint?: { endpoint?: string; model?: string; modelDir?: string; policyVersion?: number; simulated?: boolean };
  /** How to register the checkpoint. */
  registerCommand: string;
  error?: string;
}

export interface RunStatus {
  runId: string;
  state: RunState;
  source: string;
  createdAt: string;
  finishedAt?: string;
  durationMs?: number;
  artifactsRoot: string;
  /** Where the run manifest and report are (written when the run job finishes). */
  runManifestUri: string;
  reportHtmlUri: string;
  error?: string;
  stages: StageStatus[];
  /** The trainer handoffs in chain order, when the run has any. */
  handoffs?: HandoffStatus[];
  /** What the config's `latest` inputs resolved to. */
  resolvedInputs?: RunJobData['resolvedInputs'];
}

export interface RunSummary {
  runId: string;
  state: RunState;
  source: string;
  createdAt: string;
  finishedAt?: string;
  stages: string[];
}

async function loadRun(context: QueueContext, runId: string): Promise<{ job: Job; data: RunJobData }> {
  const job = await context.runsQueue.getJob(runId);
  if (!job || job.name !== 'run')
    throw new BadInputError(
      'RUN_NOT_FOUND',
      `no run "${runId}" in Redis (prefix ${context.prefix}); see \`hat runs list\``,
    );
  return { job, data: parseJobData(runJobDataSchema, job.data, `runs:${runId}`) };
}

function runStateOf(jobState: string, failedReason: string | undefined, anyStageStarted: boolean): RunState {
  if (jobState === 'completed') return 'completed';
  if (jobState === 'failed') return errorCodeOf(failedReason) === 'RUN_CANCELLED' ? 'cancelled' : 'failed';
  return anyStageStarted ? 'running' : 'waiting';
}

/** `child <prefix>:<queue>:<id> failed` (BullMQ's reason for a parent failed by a child). */
export function failedChildKey(reason: string): { queue: string; id: string } | undefined {
  const match = /^child (\S+) failed$/.exec(reason.trim());
  return match ? parseJobKey(match[1]) : undefined;
}

/** The failure of a job, followed down through "child ... failed" to the job that really failed (a part names itself). */
export async function failureDetail(
  getJob: (queue: string, id: string) => Promise<Job | undefined>,
  queue: string,
  id: string,
  depth = 0,
): Promise<string | undefined> {
  const job = await getJob(queue, id);
  if (!job?.failedReason) return undefined;
  const child = failedChildKey(job.failedReason);
  if (child && depth < 8) {
    const inner = await failureDetail(getJob, child.queue, child.id, depth + 1);
    if (inner) return inner;
  }
  return job.name === 'part' ? `${job.failedReason} (job ${queue}/${id})` : job.failedReason;
}

/** Why a stage job failed, as people want to read it: the part's own error, or which upstream failed. */
async function stageFailure(context: QueueContext, name: string, job: Job): Promise<string | undefined> {
  if (!job.failedReason) return undefined;
  const child = failedChildKey(job.failedReason);
  if (child && child.queue === runsQueueName) return `the trainer handoff it waits for failed`;
  if (child && child.queue !== name) return `upstream stage ${child.queue} failed`;
  return (
    (await failureDetail(
      async (queue, id) => (await context.queue(queue).getJob(id)) ?? undefined,
      name,
      job.id ?? '',
    )) ?? job.failedReason
  );
}

/** The run and every stage: state, parts done/total, errors, where the report goes. */
export async function getRunStatus(context: QueueContext, runId: string): Promise<RunStatus> {
  const { job, data } = await loadRun(context, runId);
  const jobState = await job.getState();
  const finishedRun = jobState === 'completed' || jobState === 'failed';
  // A stage the handoff holds back has no job until a checkpoint is registered: waiting, or never to run once the run ended.
  const stages = await Promise.all(
    data.stages.map(async (entry) => ({
      ...(await stageStatus(
        context,
        entry.name,
        entry.jobId,
        entry.afterHandoff === true && !finishedRun,
        stageKindOf(entry),
      )),
      ...(entry.kind ? { kind: entry.kind } : {}),
      ...(entry.afterHandoff ? { handoff: entry.handoff ?? data.handoffs?.[0]?.name } : {}),
      ...(entry.policyVersion !== undefined ? { policyVersion: entry.policyVersion } : {}),
    })),
  );
  const state = runStateOf(
    jobState,
    job.failedReason,
    stages.some((stage) => stage.state !== 'waiting'),
  );
  const layout = runLayout(data.artifactsRoot, data.runId);
  const handoffs = data.handoffs
    ? await Promise.all(data.handoffs.map((entry) => handoffStatus(context, data, entry, layout.root)))
    : undefined;
  const finished = state === 'completed' || state === 'failed' || state === 'cancelled';
  return {
    runId: data.runId,
    state,
    source: data.source,
    createdAt: new Date(data.createdAt).toISOString(),
    ...(finished && job.finishedOn
      ? { finishedAt: new Date(job.finishedOn).toISOString(), durationMs: Math.max(0, job.finishedOn - data.createdAt) }
      : {}),
    artifactsRoot: layout.root,
    runManifestUri: layout.runManifestUri,
    reportHtmlUri: layout.reportHtmlUri,
    ...(jobState === 'failed' && job.failedReason ? { error: job.failedReason } : {}),
    stages,
    ...(handoffs ? { handoffs } : {}),
    ...(data.resolvedInputs ? { resolvedInputs: data.resolvedInputs } : {}),
  };
}

async function handoffStatus(
  context: QueueContext,
  run: RunJobData,
  entry: NonNullable<RunJobData['handoffs']>[number],
  root: string,
): Promise<HandoffStatus> {
  const base = {
    name: entry.name,
    jobId: entry.jobId,
    after: entry.after,
    before: entry.before,
    ...(entry.policyVersion !== undefined ? { policyVersion: entry.policyVersion } : {}),
    requestUri: `${root}/${trainingRequestKey(run.runId, entry.name)}`,
    checkpointUri: `${root}/${checkpointMarkerKey(run.runId, entry.name)}`,
    registerCommand: registerCommandOf(run.runId, entry.name),
  };
  const job = await context.runsQueue.getJob(entry.jobId);
  // A later handoff of the chain has no job until the one before it is past its checkpoint.
  if (!job) return { ...base, state: run.cancelledAt !== undefined ? 'cancelled' : 'waiting-for-stages' };
  const data = handoffJobDataSchema.safeParse(job.data);
  const step: HandoffJobData | undefined = data.success ? data.data : undefined;
  const jobState = await job.getState();
  const state: HandoffStatus['state'] =
    jobState === 'failed'
      ? errorCodeOf(job.failedReason) === 'RUN_CANCELLED'
        ? 'cancelled'
        : 'failed'
      : jobState === 'completed'
        ? 'completed'
        : step?.step === 'post'
          ? 'running'
          : step?.step === 'wait-checkpoint'
            ? 'waiting-for-checkpoint'
            : 'waiting-for-stages';
  const checkpoint = step?.checkpoint;
  return {
    ...base,
    state,
    ...(step?.requestedAt ? { requestedAt: new Date(step.requestedAt).toISOString() } : {}),
    ...(step?.deadline && state === 'waiting-for-checkpoint'
      ? { deadline: new Date(step.deadline).toISOString() }
      : {}),
    ...(checkpoint
      ? {
          checkpoint: {
            ...(checkpoint.endpoint ? { endpoint: checkpoint.endpoint } : {}),
            ...(checkpoint.model ? { model: checkpoint.model } : {}),
            ...(checkpoint.modelDir ? { modelDir: checkpoint.modelDir } : {}),
            ...(checkpoint.policyVersion !== undefined ? { policyVersion: checkpoint.policyVersion } : {}),
            ...(checkpoint.simulated ? { simulated: true } : {}),
          },
        }
      : {}),
    ...(jobState === 'failed' && job.failedReason ? { error: job.failedReason } : {}),
  };
}

async function stageStatus(
  context: QueueContext,
  name: string,
  jobId: string,
  awaitingHandoff = false,
  kind = name,
): Promise<StageStatus> {
  const base = { name, jobId, partsTotal: 0, partsDone: 0, partsFailed: 0, attempts: 0 };
  const job = await context.queue(kind).getJob(jobId);
  // A job that is gone was removed by a cancel (or by hand from the dashboard): cancelled either way.
  if (!job) return { ...base, state: awaitingHandoff ? 'waiting' : 'cancelled' };
  const data = stageJobDataSchema.safeParse(job.data);
  const partsTotal = data.success ? (data.data.partCount ?? 0) : 0;
  const upstream = data.success ? data.data.upstream.length : 0;
  const progress = (typeof job.progress === 'object' ? job.progress : {}) as Partial<StageJobProgress>;
  const jobState = await job.getState();
  const timing = {
    ...(job.processedOn
      ? {
          startedAt: new Date(
            data.success && data.data.startedAt ? data.data.startedAt : job.processedOn,
          ).toISOString(),
        }
      : {}),
    ...(job.finishedOn ? { finishedAt: new Date(job.finishedOn).toISOString() } : {}),
  };
  const common = {
    ...base,
    partsTotal,
    attempts: job.attemptsMade,
    ...(progress.phase ? { phase: progress.phase } : {}),
    ...timing,
  };
  if (jobState === 'completed') {
    const result = job.returnvalue as StageJobResult | undefined;
    if (result?.heldBy)
      return {
        ...common,
        state: 'not-run',
        note: `held by the ${result.heldBy.stage}: ${result.heldBy.reasons.join('; ')}`,
      };
    const figures = figuresOf(kind, result?.output);
    const hold = result?.hold;
    return {
      ...common,
      state: hold ? 'held' : 'completed',
      ...(hold ? { note: `held${hold.subject ? ` ${hold.subject}` : ''}: ${hold.reasons.join('; ')}` } : {}),
      partsTotal: result?.parts ?? partsTotal,
      partsDone: result?.parts ?? partsTotal,
      ...(result?.manifestUri ? { manifestUri: result.manifestUri } : {}),
      ...(figures ? { figures } : {}),
    };
  }
  let partsDone = 0;
  let partsFailed = 0;
  if (partsTotal > 0) {
    const counts = await job.getDependenciesCount({ processed: true, failed: true });
    // Processed children: upstream stage jobs, parts and (once the parts are done) fan-in tasks.
    partsDone = Math.min(partsTotal, Math.max(0, (counts.processed ?? 0) - upstream));
    partsFailed = counts.failed ?? 0;
  }
  const fannedOut = data.success && data.data.step !== 'plan';
  const state: StageState =
    jobState === 'failed'
      ? errorCodeOf(job.failedReason) === 'RUN_CANCELLED'
        ? 'cancelled'
        : 'failed'
      : jobState === 'active' || (jobState === 'waiting-children' && fannedOut)
        ? 'running'
        : jobState === 'delayed' || job.attemptsMade > 0
          ? 'retrying'
          : 'waiting';
  const error = jobState === 'failed' ? await stageFailure(context, kind, job) : undefined;
  const stalled = state === 'running' ? await stalledParts(context, kind, job, jobState === 'active') : [];
  const partsStalled = stalled.filter((entry) => entry.part !== undefined).length;
  return {
    ...common,
    state,
    partsDone,
    partsFailed,
    ...(partsStalled > 0 ? { partsStalled } : {}),
    ...(stalled.length > 0 ? { stalled } : {}),
    ...(error ? { error } : {}),
  };
}

/**
 * The stage job's active parts (and the stage job itself when it is active) that lost their
 * worker (see stalled-jobs.ts). Only active jobs are looked at (as many as the workers'
 * concurrency): two reads each, and one CLIENT LIST.
 */
async function stalledParts(
  context: QueueContext,
  kind: string,
  stageJob: Job,
  stageJobActive: boolean,
): Promise<StalledPartStatus[]> {
  const queue = context.queue(kind);
  const parentKey = `${stageJob.queueQualifiedName}:${stageJob.id ?? ''}`;
  const active = await queue.getActive();
  const jobs = active.filter((job) => job.parentKey === parentKey || (stageJobActive && job.id === stageJob.id));
  const found = await findStalledJobs(context.connection, queue, jobs, {
    stalledIntervalMs: context.env.HAT_STALLED_INTERVAL_MS,
  });
  const byId = new Map(jobs.map((job) => [job.id, job]));
  return found.map((entry) => {
    const index = (byId.get(entry.jobId)?.data as { index?: unknown } | undefined)?.index;
    return {
      ...(entry.jobId !== stageJob.id && typeof index === 'number' ? { part: partIdOf(index) } : {}),
      ...entry,
    };
  });
}

/** A status is shown even when its figures cannot be (an output written by another code version). */
function figuresOf(stage: string, output: unknown): StageFigure[] | undefined {
  try {
    return summarizeStageOutput(stage, output)?.figures;
  } catch {
    return undefined;
  }
}

/** Runs known to Redis, newest first. */
export async function listRuns(context: QueueContext, limit = 50): Promise<RunSummary[]> {
  const jobs = await context.runsQueue.getJobs(
    ['waiting-children', 'waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed'],
    0,
    -1,
    false,
  );
  const runs = jobs
    .filter((job): job is Job => Boolean(job) && job.name === 'run')
    .sort((left, right) => right.timestamp - left.timestamp);
  const summaries: RunSummary[] = [];
  for (const job of runs.slice(0, limit)) {
    const data = runJobDataSchema.safeParse(job.data);
    if (!data.success) continue;
    const jobState = await job.getState();
    summaries.push({
      runId: data.data.runId,
      state: runStateOf(jobState, job.failedReason, jobState === 'active' || jobState === 'waiting-children'),
      source: data.data.source,
      createdAt: new Date(data.data.createdAt).toISOString(),
      ...(job.finishedOn && (jobState === 'completed' || jobState === 'failed')
        ? { finishedAt: new Date(job.finishedOn).toISOString() }
        : {}),
      stages: data.data.stages.map((stage) => stage.name),
    });
  }
  return summaries;
}

/**
 * Cancels a run: marks it cancelled (stage jobs check the mark before planning and fanning in),
 * then removes every job of the run that has not started. Jobs already running finish; the run
 * job then writes its manifest with status `cancelled`.
 */
export async function cancelRun(
  context: QueueContext,
  runId: string,
  now: number,
): Promise<{ runId: string; pendingBefore: number }> {
  const { job, data } = await loadRun(context, runId);
  const state = await job.getState();
  if (state === 'completed' || state === 'failed') {
    throw new BadInputError(
      'RUN_FINISHED',
      `run ${runId} has already ${state === 'completed' ? 'completed' : 'failed'}; there is nothing to cancel`,
    );
  }
  const pending = await job.getDependenciesCount({ unprocessed: true });
  if (data.cancelledAt === undefined) await job.updateData({ ...data, cancelledAt: now });
  await job.removeUnprocessedChildren();
  return { runId, pendingBefore: pending.unprocessed ?? 0 };
}

/** Keys of a parent's children that failed it (BullMQ's "failed" dependencies). */
async function failedChildren(job: Job): Promise<string[]> {
  const keys = new Set<string>();
  let cursor = 0;
  for (;;) {
    const page = await job.getDependencies({ failed: { cursor, count: 1_000 } });
    const before = keys.size;
    for (const key of page.failed ?? []) keys.add(key);
    cursor = page.nextFailedCursor ?? 0;
    if (!cursor || keys.size === before) break;
  }
  return [...keys];
}

/** Node names bottom-up (children before parents) over the trees `treeParents` makes. */
function bottomUp(nodes: ReadonlyArray<{ name: string; dependsOn: string[] }>): string[] {
  const parents = treeParents(nodes);
  const ordered: string[] = [];
  const visit = (name: string) => {
    for (const child of nodes.filter((node) => parents.get(node.name) === name)) visit(child.name);
    ordered.push(name);
  };
  for (const root of nodes.filter((node) => parents.get(node.name) === undefined)) visit(root.name);
  return ordered;
}

/**
 * Retries a failed run, re-running only what failed: the failed parts of each failed stage,
 * then that stage (it waits for its parts again and fans in with the parts that had completed),
 * bottom-up through the flow, and last the run job. Completed parts and stages are left alone.
 * A failed trainer handoff is retried in its place with a fresh deadline (a timed-out wait starts
 * again); stages it had added that failed are retried before it.
 */
export async function retryRun(
  context: QueueContext,
  runId: string,
): Promise<{ runId: string; retriedParts: number; retriedStages: string[]; resumed?: boolean }> {
  const { job, data } = await loadRun(context, runId);
  const state = await job.getState();
  if (state === 'failed' && errorCodeOf(job.failedReason) === 'RUN_CANCELLED')
    return resumeCancelledRun(context, job, data);
  if (state !== 'failed') {
    throw new BadInputError('RUN_NOT_FAILED', `run ${runId} is ${state}; only failed or cancelled runs can be retried`);
  }
  const reset = { resetAttemptsMade: true, resetAttemptsStarted: true };
  let retriedParts = 0;
  const retriedStages: string[] = [];
  const retryStage = async (name: string): Promise<boolean> => {
    const entry = data.stages.find((stage) => stage.name === name);
    const queue = entry ? stageKindOf(entry) : name;
    const stageJob = entry ? await context.queue(queue).getJob(entry.jobId) : undefined;
    if (!stageJob || (await stageJob.getState()) !== 'failed') return false;
    for (const key of await failedChildren(stageJob)) {
      const child = parseJobKey(key);
      if (!child || child.queue !== queue) continue;
      const part = await context.queue(queue).getJob(child.id);
      if (part && (await part.getState()) === 'failed') {
        await part.retry('failed', reset);
        retriedParts++;
      }
    }
    await stageJob.retry('failed', reset);
    retriedStages.push(name);
    return true;
  };
  const handoffs = data.handoffs ?? [];
  const segmentOf = (stage: RunJobData['stages'][number]) =>
    stage.afterHandoff ? (stage.handoff ?? handoffs[0]?.name) : undefined;
  // One group: the stages a handoff adds (or the first flow's), and the next handoff above the ones it waits for.
  const retryGroup = async (segment: string | undefined): Promise<boolean> => {
    const members = data.stages.filter((stage) => segmentOf(stage) === segment);
    const within = (name: string) => members.some((stage) => stage.name === name);
    const next = handoffs[segment === undefined ? 0 : handoffs.findIndex((handoff) => handoff.name === segment) + 1];
    const nodes = [
      ...members.map((stage) => ({ name: stage.name, dependsOn: stage.dependsOn.filter(within) })),
      ...(next ? [{ name: handoffNodeName(next.name), dependsOn: next.after.filter(within) }] : []),
    ];
    let retried = false;
    for (const name of bottomUp(nodes))
      retried =
        (next && name === handoffNodeName(next.name) ? await retryHandoff(next) : await retryStage(name)) || retried;
    return retried;
  };
  const retryHandoff = async (handoff: NonNullable<RunJobData['handoffs']>[number]): Promise<boolean> => {
    const retriedHeld = await retryGroup(handoff.name);
    const handoffJob = await context.runsQueue.getJob(handoff.jobId);
    const handoffState = handoffJob ? await handoffJob.getState() : undefined;
    if (handoffJob && handoffState === 'failed') {
      const { deadline: _deadline, ...rest } = handoffJob.data as Record<string, unknown>;
      await handoffJob.updateData(rest);
      await handoffJob.retry('failed', reset);
      retriedStages.push(handoff.name);
      return true;
    }
    if (handoffJob && handoffState === 'completed' && retriedHeld) {
      // It waits for the stages it added again, then hands their results up.
      await handoffJob.retry('completed', reset);
      return true;
    }
    return retriedHeld;
  };
  await retryGroup(undefined);
  await job.retry('failed', reset);
  return { runId, retriedParts, retriedStages };
}

/**
 * Resumes a cancelled run: the cancel removed its waiting jobs, so the run's job tree is removed
 * and its stored plan enqueued again under the same ids. Nothing already written is redone: a part
 * whose outputs and marker are complete returns them as they are, and stages rewrite the same
 * bytes. Only a run whose every job has stopped (the run job failed as cancelled) is resumed.
 */
async function resumeCancelledRun(
  context: QueueContext,
  job: Job,
  data: RunJobData,
): Promise<{ runId: string; retriedParts: number; retriedStages: string[]; resumed: true }> {
  const parsed = data.plan === undefined ? undefined : runPlanSchema.safeParse(data.plan);
  if (!parsed?.success) {
    throw new BadInputError(
      'RUN_NOT_RESUMABLE',
      `run ${data.runId} was cancelled by a version that did not keep the run's plan; enqueue its config again under a new runId`,
    );
  }
  const plan = parsed.data as unknown as RunPlan;
  await job.remove({ removeChildren: true });
  await enqueueRun(context, plan);
  return { runId: data.runId, retriedParts: 0, retriedStages: plan.stages.map((stage) => stage.name), resumed: true };
}

/** The shape a stored plan must have to be enqueued again (the rest is checked by the stages). */
const runPlanSchema = z
  .object({
    runId: z.string().min(1),
    configHash: z.string().min(1),
    artifactsRoot: z.string().min(1),
    seed: z.string(),
    createdAt: z.number(),
    source: z.string(),
    stages: z.array(z.object({ name: z.string(), jobId: z.string() }).passthrough()),
  })
  .passthrough();

/** Polls a run until it finishes (or the signal aborts), calling `onStatus` on every poll. */
export async function watchRun(
  context: QueueContext,
  runId: string,
  options: {
    intervalMs?: number;
    signal?: AbortSignal;
    onStatus?: (status: RunStatus) => void;
    /** How long to keep trying while Redis does not answer, ms; then REDIS_UNAVAILABLE. Default: fail at once. */
    redisUnavailableMs?: number;
    /** Called once per outage when Redis stops answering, and with `undefined` when it answers again. */
    onRedisUnavailable?: (error: Error | undefined) => void;
    now?: () => number;
  } = {},
): Promise<RunStatus> {
  const interval = options.intervalMs ?? 500;
  const now = options.now ?? Date.now;
  let unavailableSince: number | undefined;
  for (;;) {
    let status: RunStatus;
    try {
      status = await getRunStatus(context, runId);
    } catch (error) {
      if (!isRedisConnectionError(error) || options.redisUnavailableMs === undefined) throw error;
      if (unavailableSince === undefined) {
        unavailableSince = now();
        options.onRedisUnavailable?.(error as Error);
      }
      const waited = now() - unavailableSince;
      if (waited >= options.redisUnavailableMs) {
        throw new HatError(
          'REDIS_UNAVAILABLE',
          `Redis has not answered for ${Math.round(waited / 1000)} s while following run ${runId} (${(error as Error).message}); ` +
            `the run may still be running: follow it with \`hat runs show ${runId}\` once Redis is back`,
          { retryable: true },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, interval));
      continue;
    }
    if (unavailableSince !== undefined) {
      unavailableSince = undefined;
      options.onRedisUnavailable?.(undefined);
    }
    options.onStatus?.(status);
    if (status.state === 'completed' || status.state === 'failed' || status.state === 'cancelled') return status;
    if (options.signal?.aborted) return status;
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}
