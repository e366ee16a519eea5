/**
 * The run-level parent job (queue `runs`). Two job names:
 * - `run`: runs after every stage job below it has finished (or failed: stage jobs directly
 *   under the run are ignored on failure, so this job still runs). Reads the stage results
 *   (`getChildrenValues()`, each carrying its upstream stages), follows failures down to the part
 *   that failed, and writes `runs/<runId>/run-report.json`, `run-report.html` and, last,
 *   `run-manifest.json`. Idempotent: a rerun rewrites the same three objects. Completes when
 *   every stage completed; otherwise fails once with `[RUN_FAILED]` / `[RUN_CANCELLED]` (after
 *   writing the manifest), so `hat runs list` and `hat run --wait` see the outcome.
 * - `kickoff`: a job scheduler firing. Plans the run from the stored config with a run id derived
 *   from the scheduled time, so a retried kickoff enqueues nothing twice.
 * Retried: store and Redis errors. Never: an invalid scheduled config (bad input).
 */
import { UnrecoverableError, WaitingChildrenError, type Job } from 'bullmq';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { readManifest } from '../../shared/artifacts/manifest';
import type { HatEnv } from '../../shared/config/env';
import { errorCodeOf } from '../../shared/errors';
import type { Logger } from '../../shared/log/logger';
import { codeVersion } from '../../shared/version';
import type { Clock } from '../../queues/define-stage';
import type { EnqueueRunResult } from '../../queues/flows';
import { isStageJobResult, kickoffJobDataSchema, parseJobData, runJobDataSchema, type RunJobData, type StageJobResult } from '../../queues/job-data';
import { parseJobKey } from '../../queues/job-ids';
import { scheduledAtOf, scheduledRunId } from '../../queues/job-scheduler';
import { planRun, type RunPlan } from '../../queues/run-config';
import { runLayout, runManifestKey, runReportKeys } from '../../queues/run-layout';
import { toWorkerError } from '../../queues/stage-job-processor';
import { RUN_MANIFEST_SCHEMA_VERSION, type RunManifest, type StageOutcome } from './run-manifest';
import { buildRunReport, renderRunReportHtml } from './run-report';

export interface RunJobRuntime {
  env: Pick<HatEnv, 'HAT_ARTIFACTS'>;
  logger: Logger;
  clock: Clock;
  storeFor(rootUri: string): ArtifactStore;
  openObject(uri: string): { store: ArtifactStore; key: string };
  /** A job of any queue of this prefix. */
  getJob(queue: string, id: string): Promise<Job | undefined>;
  enqueue(plan: RunPlan): Promise<EnqueueRunResult>;
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
  return async (job: Job, token?: string): Promise<RunJobResult | KickoffResult> => {
    try {
      if (job.name === 'kickoff') return await processKickoff(runtime, job);
      return await processRun(runtime, job, token ?? '');
    } catch (error) {
      throw toWorkerError(error);
    }
  };
}

async function processKickoff(runtime: RunJobRuntime, job: Job): Promise<KickoffResult> {
  const data = parseJobData(kickoffJobDataSchema, job.data, `runs:${job.id}`);
  const scheduledAt = scheduledAtOf(job);
  const plan = planRun(data.config, {
    env: runtime.env,
    now: scheduledAt,
    runId: scheduledRunId(data.schedule, scheduledAt),
    source: `schedule:${data.schedule}`,
    file: data.configFile,
  });
  const result = await runtime.enqueue(plan);
  runtime.logger.info({ schedule: data.schedule, runId: plan.runId, enqueued: result.enqueued }, result.enqueued ? 'scheduled run enqueued' : 'scheduled run already enqueued');
  return { kind: 'kickoff', runId: plan.runId, enqueued: result.enqueued };
}

async function processRun(runtime: RunJobRuntime, job: Job, token: string): Promise<RunJobResult> {
  // Stage jobs put back by `hat runs retry` make this job wait for them again.
  if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
  const data = parseJobData(runJobDataSchema, job.data, `runs:${job.id}`);
  const results = flattenResults(Object.values(await job.getChildrenValues()).filter(isStageJobResult));
  const stages: StageOutcome[] = [];
  for (const entry of data.stages) stages.push(await stageOutcome(runtime, data, entry, results.get(entry.name)));

  const status: RunManifest['status'] =
    data.cancelledAt !== undefined ? 'cancelled' : stages.every((stage) => stage.status === 'completed') ? 'completed' : 'failed';
  const finishedAt = runtime.clock.now();
  const layout = runLayout(data.artifactsRoot, data.runId);
  const store = runtime.storeFor(data.artifactsRoot);
  const base = {
    schemaVersion: RUN_MANIFEST_SCHEMA_VERSION,
    runId: data.runId,
    status,
    configHash: data.configHash,
    seed: data.seed,
    artifactsRoot: layout.root,
    source: data.source,
    codeVersion,
    createdAt: new Date(data.createdAt).toISOString(),
    finishedAt: new Date(finishedAt).toISOString(),
    durationMs: Math.max(0, finishedAt - data.createdAt),
    stages,
  } as const;
  const report = buildRunReport(base);
  const reportKeys = runReportKeys(data.runId);
  const jsonInfo = await store.put(reportKeys.json, `${JSON.stringify(report, null, 2)}\n`, { contentType: 'application/json' });
  const htmlInfo = await store.put(reportKeys.html, renderRunReportHtml(report, { manifestUri: layout.runManifestUri }), { contentType: 'text/html; charset=utf-8' });
  const manifest: RunManifest = { ...base, stages: [...stages], reportJsonUri: jsonInfo.uri, reportHtmlUri: htmlInfo.uri };
  const manifestInfo = await store.put(runManifestKey(data.runId), `${JSON.stringify(manifest, null, 2)}\n`, { contentType: 'application/json' });
  runtime.logger.info({ runId: data.runId, status, manifest: manifestInfo.uri }, 'run finished');

  if (status === 'cancelled') throw new UnrecoverableError(`[RUN_CANCELLED] run ${data.runId} was cancelled; run manifest: ${manifestInfo.uri}`);
  if (status === 'failed') {
    const unfinished = stages.filter((stage) => stage.status !== 'completed');
    const first = unfinished.find((stage) => stage.status === 'failed') ?? unfinished[0];
    throw new UnrecoverableError(
      `[RUN_FAILED] run ${data.runId}: ${unfinished.length} of ${stages.length} stage(s) did not complete` +
        `${first ? ` (${first.name} ${first.status}: ${first.error ?? 'no error recorded'})` : ''}; run manifest: ${manifestInfo.uri}`,
    );
  }
  return { kind: 'run', runId: data.runId, status, runManifestUri: manifestInfo.uri, reportHtmlUri: htmlInfo.uri };
}

/** Stage results by stage name, including the upstream results each one carries. */
function flattenResults(results: StageJobResult[], into = new Map<string, StageJobResult>()): Map<string, StageJobResult> {
  for (const result of results) {
    into.set(result.stage, result);
    flattenResults(result.upstream ?? [], into);
  }
  return into;
}

async function stageOutcome(runtime: RunJobRuntime, run: RunJobData, entry: RunJobData['stages'][number], result: StageJobResult | undefined): Promise<StageOutcome> {
  const base = { name: entry.name, jobId: entry.jobId, dependsOn: entry.dependsOn };
  if (result) {
    const counts = result.manifestUri ? await manifestCounts(runtime, result.manifestUri) : {};
    return {
      ...base,
      status: 'completed',
      ...(result.manifestUri ? { manifestUri: result.manifestUri } : {}),
      parts: result.parts,
      ...counts,
      startedAt: new Date(result.startedAt).toISOString(),
      finishedAt: new Date(result.finishedAt).toISOString(),
      durationMs: Math.max(0, result.finishedAt - result.startedAt),
    };
  }
  const job = await runtime.getJob(entry.name, entry.jobId);
  const partCount = (job?.data as { partCount?: number } | undefined)?.partCount ?? 0;
  const timing =
    job?.processedOn && job.finishedOn
      ? { startedAt: new Date(job.processedOn).toISOString(), finishedAt: new Date(job.finishedOn).toISOString(), durationMs: Math.max(0, job.finishedOn - job.processedOn) }
      : {};
  if (!job || !job.failedReason) {
    return { ...base, status: run.cancelledAt !== undefined ? 'cancelled' : 'not-run', parts: partCount };
  }
  const upstreamFailure = failedChildKey(job.failedReason);
  if (upstreamFailure && upstreamFailure.queue !== entry.name && run.stages.some((stage) => stage.name === upstreamFailure.queue)) {
    return { ...base, status: 'not-run', parts: partCount, error: `upstream stage ${upstreamFailure.queue} failed` };
  }
  const error = await failureDetail(runtime, entry.name, entry.jobId);
  const status = errorCodeOf(error) === 'RUN_CANCELLED' || (run.cancelledAt !== undefined && !error) ? 'cancelled' : 'failed';
  return { ...base, status, parts: partCount, ...timing, ...(error ? { error } : {}) };
}

async function manifestCounts(runtime: RunJobRuntime, uri: string): Promise<{ objects?: number; records?: number }> {
  try {
    const { store, key } = runtime.openObject(uri);
    const manifest = await readManifest(store, key);
    const withRecords = manifest.objects.filter((object) => object.records !== undefined);
    return { objects: manifest.objects.length, ...(withRecords.length > 0 ? { records: withRecords.reduce((sum, object) => sum + (object.records ?? 0), 0) } : {}) };
  } catch (error) {
    // The report still lists the stage; a manifest that cannot be read is noted in the log.
    runtime.logger.warn({ uri, err: error }, 'cannot read stage manifest for the run report');
    return {};
  }
}

/** `child <prefix>:<queue>:<id> failed` (BullMQ's reason for a parent failed by a child). */
function failedChildKey(reason: string): { queue: string; id: string } | undefined {
  const match = /^child (\S+) failed$/.exec(reason.trim());
  return match ? parseJobKey(match[1] as string) : undefined;
}

/** The failure of a job, followed down through "child ... failed" to the job that really failed. */
async function failureDetail(runtime: RunJobRuntime, queue: string, id: string, depth = 0): Promise<string | undefined> {
  const job = await runtime.getJob(queue, id);
  if (!job?.failedReason) return undefined;
  const child = failedChildKey(job.failedReason);
  if (child && depth < 8) {
    const inner = await failureDetail(runtime, child.queue, child.id, depth + 1);
    if (inner) return inner;
  }
  return job.name === 'part' ? `${job.failedReason} (job ${queue}/${id})` : job.failedReason;
}
