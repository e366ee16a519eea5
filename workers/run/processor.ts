/**
 * The run-level parent job (queue `runs`). Two job names:
 * - `run`: runs after every stage job below it has finished (or failed: stage jobs directly
 *   under the run are ignored on failure, so this job still runs). Reads the stage results
 *   (`getChildrenValues()`, each carrying its upstream stages), follows failures down to the part
 *   that failed, and writes `runs/<runId>/run-report.json`, `run-report.html` and, last,
 *   `run-manifest.json`. Idempotent: a rerun rewrites the same three objects. Completes when
 *   every stage completed; otherwise fails once with `[RUN_FAILED]` / `[RUN_CANCELLED]` (after
 *   writing the manifest), so `hat runs list` and `hat run --wait` see the outcome.
 * - `kickoff`: a job scheduler firing. Resolves the config's `latest` inputs now (newest log
 *   partition, current harness version), then plans the run with a run id derived from the
 *   scheduled time, so a retried kickoff enqueues nothing twice.
 * - `handoff`: the trainer handoff of a run (handoff-processor.ts).
 * Retried: store and Redis errors. Never: an invalid scheduled config or an unresolvable
 * `latest` input (bad input).
 */
import { UnrecoverableError, WaitingChildrenError, type FlowJob, type Job } from 'bullmq';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { readManifest } from '../../shared/artifacts/manifest';
import type { HatEnv } from '../../shared/config/env';
import { redactUrlCredentialsIn } from '../../shared/config/url-credentials';
import { HatError, ProblemCollector, errorCodeOf } from '../../shared/errors';
import type { Logger } from '../../shared/log/logger';
import { codeVersion } from '../../shared/version';
import type { Clock } from '../../queues/stage-kit/define-stage';
import type { EnqueueRunResult } from '../../queues/runs/flows';
import { flattenStageResults, isStageJobResult, parseJobData, type StageJobResult } from '../../queues/bullmq/job-data';
import { kickoffJobDataSchema, runJobDataSchema, stageKindOf, type RunJobData } from '../../queues/runs/run-job-data';
import { scheduledAtOf, scheduledRunId } from '../../queues/runs/job-scheduler';
import { resolveLatestInputs } from '../../queues/runs/latest-inputs';
import { plainLocator, planRun, type RunPlan } from '../../queues/runs/run-config';
import { handoffNodeName, type CheckpointMarker, type HandoffOutput } from '../../queues/runs/run-handoff';
import { failedChildKey, failureDetail } from '../../queues/runs/run-control';
import { runLayout, runManifestKey, runReportKeys } from '../../queues/runs/run-layout';
import { toWorkerError } from '../../queues/bullmq/stage-job-processor';
import type { StageSummary } from '../../queues/stage-kit/stage-summary';
import { processHandoff, type HandoffRuntime } from './handoff-processor';
import { RUN_MANIFEST_SCHEMA_VERSION, type HandoffOutcome, type RunManifest, type StageOutcome } from './run-manifest';
import { buildRunReport, renderRunReportHtml } from './run-report';
import { applyGateOutcome, stageCountsAsDone } from './gate-outcome';

export interface RunJobRuntime extends HandoffRuntime {
  /** The key figures of a completed stage from its output (the stage contract's `summarize`); undefined when it has none. */
  summarize?(stage: string, output: unknown): StageSummary | undefined;
  env: Pick<HatEnv, 'HAT_ARTIFACTS'>;
  logger: Logger;
  clock: Clock;
  storeFor(rootUri: string): ArtifactStore;
  openObject(uri: string): { store: ArtifactStore; key: string };
  /** A job of any queue of this prefix. */
  getJob(queue: string, id: string): Promise<Job | undefined>;
  enqueue(plan: RunPlan): Promise<EnqueueRunResult>;
  addFlows(flows: FlowJob[]): Promise<void>;
}

/** What a completed run job returns. */
export interface RunJobResult {
  kind: 'run';
  runId: string;
  status: RunManifest['status'];
  runManifestUri: string;
  reportHtmlUri: string;
}

export interface KickoffResult {
  kind: 'kickoff';
  runId: string;
  enqueued: boolean;
}

export function createRunJobProcessor(runtime: RunJobRuntime) {
  return async (job: Job, token?: string): Promise<RunJobResult | KickoffResult | StageJobResult<HandoffOutput>> => {
    try {
      if (job.name === 'kickoff') return await processKickoff(runtime, job);
      if (job.name === 'handoff') return await processHandoff(runtime, job, token ?? '');
      return await processRun(runtime, job, token ?? '');
    } catch (error) {
      throw toWorkerError(withRunErrorCode(error, job.name));
    }
  };
}

/**
 * Errors without a `[CODE]` (a raw Node or SDK error from a store) get one, so the run's failure
 * reads like every other failure (`hat runs show`, the dashboard, `hat run --wait`).
 */
function withRunErrorCode(error: unknown, jobName: string): unknown {
  if (!(error instanceof Error) || HatError.isInstance(error) || /^\[[A-Z0-9_]+\]/.test(error.message)) return error;
  // BullMQ's control-flow errors pass as they are.
  if (
    ['UnrecoverableError', 'WaitingChildrenError', 'WaitingError', 'DelayedError', 'RateLimitError'].includes(
      error.name,
    )
  )
    return error;
  const what = jobName === 'run' ? "write the run's report and manifest" : `process the ${jobName} job`;
  return new HatError('RUN_JOB_FAILED', `cannot ${what}: ${error.message}`, { cause: error, retryable: true });
}

async function processKickoff(runtime: RunJobRuntime, job: Job): Promise<KickoffResult> {
  const data = parseJobData(kickoffJobDataSchema, job.data, `runs:${job.id}`);
  const scheduledAt = scheduledAtOf(job);
  // Resolved when the firing runs, not when the schedule was set: tonight's partition.
  const latest = await resolveLatestInputs(data.config, {
    openObject: runtime.openObject,
    now: new Date(runtime.clock.now()),
  });
  const locator = plainLocator(data.configFile);
  const problems = new ProblemCollector();
  for (const problem of latest.problems) problems.add(locator.problem(problem.path, problem.message));
  problems.throwIfAny(
    'NO_LATEST_INPUT',
    `schedule ${data.schedule}: the run config's latest inputs cannot be resolved; no run was started`,
  );
  const plan = planRun(data.config, {
    env: runtime.env,
    now: scheduledAt,
    runId: scheduledRunId(data.schedule, scheduledAt),
    source: `schedule:${data.schedule}`,
    file: data.configFile,
    resolvedInputs: latest.resolved,
  });
  const result = await runtime.enqueue(plan);
  runtime.logger.info(
    { schedule: data.schedule, runId: plan.runId, enqueued: result.enqueued },
    result.enqueued ? 'scheduled run enqueued' : 'scheduled run already enqueued',
  );
  return { kind: 'kickoff', runId: plan.runId, enqueued: result.enqueued };
}

/** Most loss-curve points the run manifest keeps per handoff (evenly thinned, the last kept). */
const lossCurvePoints = 200;

/** The training summary with the loss curve from the trainer's result (`reportUri`); without it when unreadable. */
async function withLossCurve(
  runtime: RunJobRuntime,
  training: NonNullable<CheckpointMarker['training']>,
): Promise<NonNullable<NonNullable<HandoffOutcome['checkpoint']>['training']>> {
  if (!training.reportUri) return training;
  try {
    const { store, key } = runtime.openObject(training.reportUri);
    const result = JSON.parse((await store.getBuffer(key)).toString('utf8')) as {
      lossCurve?: Array<{ step: number; loss: number }>;
    };
    const curve = (result.lossCurve ?? []).filter(
      (point) => Number.isFinite(point.step) && Number.isFinite(point.loss),
    );
    const stride = Math.max(1, Math.ceil(curve.length / lossCurvePoints));
    const thinned = curve.filter((_, index) => index % stride === 0 || index === curve.length - 1);
    return { ...training, lossCurve: thinned.map((point) => ({ step: point.step, loss: point.loss })) };
  } catch (error) {
    runtime.logger.warn({ uri: training.reportUri, error: (error as Error).message }, 'training report unreadable');
    return training;
  }
}

async function processRun(runtime: RunJobRuntime, job: Job, token: string): Promise<RunJobResult> {
  // Stage jobs put back by `hat runs retry` make this job wait for them again.
  if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
  const data = parseJobData(runJobDataSchema, job.data, `runs:${job.id}`);
  const results = flattenStageResults(Object.values(await job.getChildrenValues()).filter(isStageJobResult));
  const handoffs: HandoffOutcome[] = [];
  for (const entry of data.handoffs ?? [])
    handoffs.push(
      await handoffOutcome(
        runtime,
        data,
        entry,
        results.get(handoffNodeName(entry.name)) as StageJobResult<HandoffOutput> | undefined,
      ),
    );
  const outcomes: StageOutcome[] = [];
  for (const entry of data.stages) {
    const segment = entry.afterHandoff ? (entry.handoff ?? handoffs[0]?.name) : undefined;
    const result = results.get(entry.name) ?? (await completedBelowFailure(runtime, entry));
    outcomes.push(
      await stageOutcome(
        runtime,
        data,
        entry,
        result,
        handoffs.find((handoff) => handoff.name === segment),
      ),
    );
  }
  const store = runtime.storeFor(data.artifactsRoot);
  // A gate that held its candidate made a decision; the stages it held back did not fail.
  const { stages, gate } = await applyGateOutcome(store, data.runId, outcomes);

  const status: RunManifest['status'] =
    data.cancelledAt !== undefined
      ? 'cancelled'
      : stages.every((stage) => stageCountsAsDone(stage, gate)) &&
          handoffs.every((handoff) => handoff.status === 'completed')
        ? 'completed'
        : 'failed';
  const finishedAt = runtime.clock.now();
  const layout = runLayout(data.artifactsRoot, data.runId);
  // The report and manifest show no URL secret, whatever a stage's error text or summary quoted.
  const base = redactUrlCredentialsIn({
    schemaVersion: RUN_MANIFEST_SCHEMA_VERSION,
    runId: data.runId,
    status,
    configHash: data.configHash,
    seed: data.seed,
    artifactsRoot: layout.root,
    source: data.source,
    codeVersion: codeVersion(),
    createdAt: new Date(data.createdAt).toISOString(),
    finishedAt: new Date(finishedAt).toISOString(),
    durationMs: Math.max(0, finishedAt - data.createdAt),
    stages,
    ...(data.resolvedInputs ? { resolvedInputs: data.resolvedInputs } : {}),
    ...(handoffs.length > 0 ? { handoffs } : {}),
    ...(gate ? { gate } : {}),
  } as const);
  const report = buildRunReport(base);
  const reportKeys = runReportKeys(data.runId);
  const jsonInfo = await store.put(reportKeys.json, `${JSON.stringify(report, null, 2)}\n`, {
    contentType: 'application/json',
  });
  const htmlInfo = await store.put(
    reportKeys.html,
    renderRunReportHtml(report, {
      manifestUri: layout.runManifestUri,
      runRootUri: `${layout.root}/runs/${data.runId}`,
    }),
    { contentType: 'text/html; charset=utf-8' },
  );
  const manifest: RunManifest = {
    ...base,
    stages: [...stages],
    reportJsonUri: jsonInfo.uri,
    reportHtmlUri: htmlInfo.uri,
  };
  const manifestInfo = await store.put(runManifestKey(data.runId), `${JSON.stringify(manifest, null, 2)}\n`, {
    contentType: 'application/json',
  });
  runtime.logger.info({ runId: data.runId, status, manifest: manifestInfo.uri }, 'run finished');

  if (status === 'cancelled')
    throw new UnrecoverableError(`[RUN_CANCELLED] run ${data.runId} was cancelled; run manifest: ${manifestInfo.uri}`);
  // A handoff that timed out or whose trainer failed says why the run failed better than its stages.
  const failedHandoff = handoffs.find(
    (handoff) =>
      handoff.status === 'failed' &&
      ['CHECKPOINT_TIMEOUT', 'TRAINING_FAILED', 'TRAINING_REFUSED'].includes(errorCodeOf(handoff.error) ?? ''),
  );
  if (status === 'failed' && failedHandoff)
    throw new UnrecoverableError(`${failedHandoff.error}; run manifest: ${manifestInfo.uri}`);
  if (status === 'failed') {
    const unfinished = stages.filter((stage) => !stageCountsAsDone(stage, gate));
    const first = unfinished.find((stage) => stage.status === 'failed') ?? unfinished[0];
    throw new UnrecoverableError(
      `[RUN_FAILED] run ${data.runId}: ${unfinished.length} of ${stages.length} stage(s) did not complete` +
        `${first ? ` (${first.name} ${first.status}: ${first.error ?? 'no error recorded'})` : ''}; run manifest: ${manifestInfo.uri}`,
    );
  }
  return { kind: 'run', runId: data.runId, status, runManifestUri: manifestInfo.uri, reportHtmlUri: htmlInfo.uri };
}

/** How a trainer handoff ended, from its result or its job. */
async function handoffOutcome(
  runtime: RunJobRuntime,
  run: RunJobData,
  entry: NonNullable<RunJobData['handoffs']>[number],
  result: StageJobResult<HandoffOutput> | undefined,
): Promise<HandoffOutcome> {
  const base = {
    name: entry.name,
    jobId: entry.jobId,
    after: entry.after,
    before: entry.before,
    ...(entry.policyVersion !== undefined ? { policyVersion: entry.policyVersion } : {}),
  };
  if (result) {
    const { requestUri, checkpointUri, checkpoint, requestedAt, checkpointAt, dropped } = result.output;
    return {
      ...base,
      status: 'completed',
      requestUri,
      checkpointUri,
      checkpoint: {
        ...(checkpoint.endpoint ? { endpoint: checkpoint.endpoint } : {}),
        ...(checkpoint.model ? { model: checkpoint.model } : {}),
        ...(checkpoint.modelDir ? { modelDir: checkpoint.modelDir } : {}),
        ...(checkpoint.policyVersion !== undefined ? { policyVersion: checkpoint.policyVersion } : {}),
        ...(checkpoint.simulated ? { simulated: true } : {}),
        ...(checkpoint.registeredBy ? { registeredBy: checkpoint.registeredBy } : {}),
        ...(checkpoint.training ? { training: await withLossCurve(runtime, checkpoint.training) } : {}),
        ...(checkpoint.lineage ? { lineage: checkpoint.lineage } : {}),
      },
      requestedAt: new Date(requestedAt).toISOString(),
      checkpointAt: new Date(checkpointAt).toISOString(),
      waitedMs: Math.max(0, checkpointAt - requestedAt),
      ...(dropped !== undefined ? { dropped } : {}),
    };
  }
  const job = await runtime.getJob('runs', entry.jobId);
  const requestedAt = (job?.data as { requestedAt?: number } | undefined)?.requestedAt;
  const timing = requestedAt ? { requestedAt: new Date(requestedAt).toISOString() } : {};
  if (!job?.failedReason)
    return { ...base, status: run.cancelledAt !== undefined ? 'cancelled' : 'not-run', ...timing };
  const upstreamFailure = failedChildKey(job.failedReason);
  if (upstreamFailure)
    return {
      ...base,
      status: 'not-run',
      ...timing,
      error: `${upstreamFailure.queue === 'runs' ? 'the handoff' : 'stage'} ${upstreamFailure.queue === 'runs' ? upstreamFailure.id : upstreamFailure.queue} it waits for failed`,
    };
  return {
    ...base,
    status: errorCodeOf(job.failedReason) === 'RUN_CANCELLED' ? 'cancelled' : 'failed',
    ...timing,
    error: job.failedReason,
  };
}

async function stageOutcome(
  runtime: RunJobRuntime,
  run: RunJobData,
  entry: RunJobData['stages'][number],
  result: StageJobResult | undefined,
  handoff: HandoffOutcome | undefined,
): Promise<StageOutcome> {
  const kind = stageKindOf(entry);
  const base = {
    name: entry.name,
    ...(entry.kind ? { kind: entry.kind } : {}),
    jobId: entry.jobId,
    dependsOn: entry.dependsOn,
    ...(handoff ? { handoff: handoff.name } : {}),
    ...(entry.policyVersion !== undefined ? { policyVersion: entry.policyVersion } : {}),
  };
  // A stage's own job is the source of truth: results reach the run only through its direct
  // children, so an upstream stage whose downstream failed or was cancelled is read from its job.
  const job = await runtime.getJob(kind, entry.jobId);
  if (!result && isStageJobResult(job?.returnvalue) && job.returnvalue.stage === entry.name) result = job.returnvalue;
  if (result?.heldBy) {
    // Held back by a decision below it (the gate held its candidate): not run, and not a failure.
    return {
      ...base,
      status: 'not-run',
      parts: 0,
      error: `held by the ${result.heldBy.stage}: ${result.heldBy.reasons.join('; ')}`,
    };
  }
  if (result) {
    const counts = result.manifestUri ? await manifestCounts(runtime, result.manifestUri) : {};
    const summary = summarizeStage(runtime, kind, result.output);
    // A stage that is no round but samples a checkpoint's version (`policyVersion: "${checkpoints.opd.policyVersion}"`) says which.
    const sampledVersion = (job?.data as { input?: { policyVersion?: unknown } } | undefined)?.input?.policyVersion;
    return {
      ...base,
      ...(base.policyVersion === undefined && typeof sampledVersion === 'number'
        ? { policyVersion: sampledVersion }
        : {}),
      status: 'completed',
      ...(result.manifestUri ? { manifestUri: result.manifestUri } : {}),
      parts: result.parts,
      ...counts,
      startedAt: new Date(result.startedAt).toISOString(),
      finishedAt: new Date(result.finishedAt).toISOString(),
      durationMs: Math.max(0, result.finishedAt - result.startedAt),
      ...(summary ? { figures: summary.figures, links: summary.links } : {}),
    };
  }
  const partCount = (job?.data as { partCount?: number } | undefined)?.partCount ?? 0;
  const timing =
    job?.processedOn && job.finishedOn
      ? {
          startedAt: new Date(job.processedOn).toISOString(),
          finishedAt: new Date(job.finishedOn).toISOString(),
          durationMs: Math.max(0, job.finishedOn - job.processedOn),
        }
      : {};
  if (!job && entry.afterHandoff && handoff && handoff.status !== 'completed') {
    return {
      ...base,
      status: run.cancelledAt !== undefined ? 'cancelled' : 'not-run',
      parts: 0,
      error: `waits for the trainer handoff ${handoff.name}, which ${handoff.error ? `failed: ${handoff.error}` : `is ${handoff.status}`}`,
    };
  }
  if (!job || !job.failedReason) {
    return { ...base, status: run.cancelledAt !== undefined ? 'cancelled' : 'not-run', parts: partCount };
  }
  const upstreamFailure = failedChildKey(job.failedReason);
  if (
    upstreamFailure &&
    upstreamFailure.queue !== kind &&
    run.stages.some((stage) => stageKindOf(stage) === upstreamFailure.queue)
  ) {
    return { ...base, status: 'not-run', parts: partCount, error: `upstream stage ${upstreamFailure.queue} failed` };
  }
  const error = await failureDetail(runtime.getJob, kind, entry.jobId);
  const status =
    errorCodeOf(error) === 'RUN_CANCELLED' || (run.cancelledAt !== undefined && !error) ? 'cancelled' : 'failed';
  return { ...base, status, parts: partCount, ...timing, ...(error ? { error } : {}) };
}

/**
 * The result of a stage that completed although a stage above it failed (results normally travel
 * up the tree; a gate that held its candidate fails above the eval it read).
 */
async function completedBelowFailure(
  runtime: RunJobRuntime,
  entry: RunJobData['stages'][number],
): Promise<StageJobResult | undefined> {
  const job = await runtime.getJob(stageKindOf(entry), entry.jobId);
  if (!job?.finishedOn || job.failedReason || !isStageJobResult(job.returnvalue)) return undefined;
  return job.returnvalue;
}

/** The stage's key figures; a summary that throws (an output from another code version) is logged, not fatal. */
function summarizeStage(runtime: RunJobRuntime, stage: string, output: unknown): StageSummary | undefined {
  try {
    return runtime.summarize?.(stage, output);
  } catch (error) {
    runtime.logger.warn({ stage, err: error }, 'cannot summarize the stage output for the run report');
    return undefined;
  }
}

async function manifestCounts(runtime: RunJobRuntime, uri: string): Promise<{ objects?: number; records?: number }> {
  try {
    const { store, key } = runtime.openObject(uri);
    const manifest = await readManifest(store, key);
    const withRecords = manifest.objects.filter((object) => object.records !== undefined);
    return {
      objects: manifest.objects.length,
      ...(withRecords.length > 0
        ? { records: withRecords.reduce((sum, object) => sum + (object.records ?? 0), 0) }
        : {}),
    };
  } catch (error) {
    // The report still lists the stage; a manifest that cannot be read is noted in the log.
    runtime.logger.warn({ uri, err: error }, 'cannot read stage manifest for the run report');
    return {};
  }
}
