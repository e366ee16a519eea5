/**
 * The trainer handoff job (queue `runs`, name `handoff`, id `<runId>.train.handoff`); the design
 * is in queues/run-handoff.ts. Steps, recorded in the job data so a retry resumes where it was:
 * - `wait-stages`: waits for its children (the `after` stages), then writes
 *   `runs/<runId>/train/request.json` and sets the deadline.
 * - `wait-checkpoint`: looks for `runs/<runId>/train/checkpoint.json`; while it is missing the
 *   job moves itself to delayed for `pollSeconds` (`hat checkpoint register` promotes it at once)
 *   and fails with `[CHECKPOINT_TIMEOUT]` past the deadline. Found: the `before` stages are added
 *   as its children with the checkpoint filled in, under the job ids planned with the run, so a
 *   retry adds nothing twice.
 * - `post`: waits for them, then returns a stage result (`train`) carrying every stage result
 *   below it, so the run job sees the whole tree.
 * Idempotency key: the run id (job id, object keys). Retried: store and Redis faults. Never: a
 * malformed marker, a checkpoint whose tokenizer differs from the data's, a stage config the
 * checkpoint makes invalid, the timeout, a cancelled run.
 */
import { DelayedError, WaitingChildrenError, type FlowJob, type Job } from 'bullmq';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { readManifest } from '../../shared/artifacts/manifest';
import { BadInputError, HatError, ProblemCollector } from '../../shared/errors';
import { hashValue } from '../../shared/hash/hash';
import type { Logger } from '../../shared/log/logger';
import { codeVersion } from '../../shared/version';
import { zodProblems } from '../../shared/config/zod-problems';
import type { Clock } from '../../queues/define-stage';
import { buildStageForest, type FlowStage } from '../../queues/flows';
import { flattenStageResults, isStageJobResult, parseJobData, type StageJobResult } from '../../queues/job-data';
import { runLayout } from '../../queues/run-layout';
import {
  TRAINING_REQUEST_SCHEMA_VERSION,
  checkpointMarkerKey,
  checkpointMarkerSchema,
  fillCheckpointReferences,
  handoffJobDataSchema,
  handoffStageName,
  registerCommandOf,
  trainingRequestKey,
  type CheckpointMarker,
  type HandoffJobData,
  type HandoffOutput,
  type TrainingRequest,
} from '../../queues/run-handoff';
import { getStage } from '../../queues/stage-registry';

/** What the handoff job needs from the process it runs in. */
export interface HandoffRuntime {
  logger: Logger;
  clock: Clock;
  /** HAT_JOB_DATA_LIMIT. */
  jobDataLimit: number;
  storeFor(rootUri: string): ArtifactStore;
  openObject(uri: string): { store: ArtifactStore; key: string };
  /** Adds flows (their roots carry `opts.parent`). */
  addFlows(flows: FlowJob[]): Promise<void>;
  isRunCancelled(runId: string): Promise<boolean>;
}

export async function processHandoff(runtime: HandoffRuntime, job: Job, token: string): Promise<StageJobResult<HandoffOutput>> {
  let data = parseJobData(handoffJobDataSchema, job.data, `runs:${job.id}`);
  const store = runtime.storeFor(data.artifactsRoot);
  const layout = runLayout(data.artifactsRoot, data.runId);
  const requestUri = `${layout.root}/${trainingRequestKey(data.runId)}`;
  const checkpointUri = `${layout.root}/${checkpointMarkerKey(data.runId)}`;

  if (data.step === 'wait-stages') {
    if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
    const upstream = flattenStageResults(Object.values(await job.getChildrenValues()).filter(isStageJobResult));
    const requestedAt = runtime.clock.now();
    const request = await trainingRequest(runtime, data, upstream, requestedAt, checkpointUri);
    await store.put(trainingRequestKey(data.runId), `${JSON.stringify(request, null, 2)}\n`, { contentType: 'application/json' });
    data = { ...data, step: 'wait-checkpoint', requestedAt, deadline: requestedAt + data.timeoutMs };
    await job.updateData(data);
    runtime.logger.info({ runId: data.runId, request: requestUri, deadline: new Date(data.deadline as number).toISOString() }, 'training request written; waiting for a checkpoint');
  }

  if (data.step === 'wait-checkpoint') {
    if (await runtime.isRunCancelled(data.runId)) throw new HatError('RUN_CANCELLED', `run ${data.runId} was cancelled while waiting for a checkpoint`);
    const now = runtime.clock.now();
    if (data.deadline === undefined) {
      // `hat runs retry` after a timeout clears the deadline: a fresh wait starts now.
      data = { ...data, deadline: now + data.timeoutMs };
      await job.updateData(data);
    }
    const marker = await readCheckpointMarker(store, data.runId, checkpointUri);
    if (!marker) {
      const deadline = data.deadline as number;
      if (now >= deadline) {
        throw new HatError(
          'CHECKPOINT_TIMEOUT',
          `run ${data.runId}: no checkpoint was registered within ${formatMinutes(data.timeoutMs)} of the training request ${requestUri}; ` +
            `train on it, then \`${registerCommandOf(data.runId)}\` (or write ${checkpointUri}) and \`hat runs retry ${data.runId}\` to wait again`,
        );
      }
      await job.moveToDelayed(Math.min(deadline, now + data.pollIntervalMs), token);
      throw new DelayedError();
    }
    await checkTokenizer(store, data.runId, marker, requestUri);
    await runtime.addFlows(postStageFlows(data, marker, job, runtime.jobDataLimit));
    data = { ...data, step: 'post', checkpoint: marker, checkpointAt: now };
    await job.updateData(data);
    runtime.logger.info({ runId: data.runId, endpoint: marker.endpoint, model: marker.model, stages: data.before }, 'checkpoint registered; stages after the handoff enqueued');
  }

  if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
  const upstream = Object.values(await job.getChildrenValues()).filter(isStageJobResult);
  const output: HandoffOutput = {
    requestUri,
    checkpointUri,
    checkpoint: data.checkpoint as CheckpointMarker,
    requestedAt: data.requestedAt ?? 0,
    checkpointAt: data.checkpointAt ?? 0,
  };
  return { kind: 'stage', stage: handoffStageName, jobId: job.id ?? '', output, parts: 0, startedAt: output.requestedAt, finishedAt: output.checkpointAt, upstream };
}

function formatMinutes(ms: number): string {
  const minutes = ms / 60_000;
  return minutes >= 1 ? `${Number(minutes.toFixed(1))} min` : `${Math.round(ms / 1000)} s`;
}

/** The marker when it exists; BadInputError for one that is not a checkpoint of this run. */
export async function readCheckpointMarker(store: ArtifactStore, runId: string, uri: string): Promise<CheckpointMarker | undefined> {
  const key = checkpointMarkerKey(runId);
  if (!(await store.head(key))) return undefined;
  let value: unknown;
  try {
    value = JSON.parse((await store.getBuffer(key)).toString('utf8'));
  } catch (error) {
    throw new BadInputError('BAD_CHECKPOINT_MARKER', `${uri} is not valid JSON (${(error as Error).message}); rewrite it with \`${registerCommandOf(runId)}\``);
  }
  const parsed = checkpointMarkerSchema.safeParse(value);
  if (!parsed.success) {
    const problems = new ProblemCollector();
    problems.addAll(zodProblems(parsed.error, uri));
    problems.throwIfAny('BAD_CHECKPOINT_MARKER', `${uri} is not a checkpoint marker ({"endpoint": "<url>", "model": "<name>"}); rewrite it with \`${registerCommandOf(runId)}\``);
  }
  const marker = parsed.data as CheckpointMarker;
  if (marker.runId !== undefined && marker.runId !== runId) {
    throw new BadInputError('BAD_CHECKPOINT_MARKER', `${uri} names run ${marker.runId}, not ${runId}; it was copied from another run. Register this run's checkpoint with \`${registerCommandOf(runId)}\``);
  }
  return marker;
}

/** A checkpoint that says which tokenizer it has must have the one the data was tokenized with. */
async function checkTokenizer(store: ArtifactStore, runId: string, marker: CheckpointMarker, requestUri: string): Promise<void> {
  if (marker.tokenizerFingerprint === undefined) return;
  const request = JSON.parse((await store.getBuffer(trainingRequestKey(runId))).toString('utf8')) as Partial<TrainingRequest>;
  const expected = request.tokenizer?.fingerprint;
  if (expected !== undefined && expected !== marker.tokenizerFingerprint) {
    throw new BadInputError(
      'TOKENIZER_MISMATCH',
      `the checkpoint of run ${runId} has tokenizer fingerprint ${marker.tokenizerFingerprint}, but its training data (${requestUri}) was tokenized with ${expected}; ` +
        'register a checkpoint trained on that data, or rerun with a shard stage that uses the checkpoint\'s tokenizer',
    );
  }
}

/** What the trainer is asked for: the data the `after` stages wrote, and how to answer. */
async function trainingRequest(
  runtime: HandoffRuntime,
  data: HandoffJobData,
  upstream: Map<string, StageJobResult>,
  requestedAt: number,
  checkpointUri: string,
): Promise<TrainingRequest> {
  const datasets: TrainingRequest['datasets'] = [];
  let tokenizer: TrainingRequest['tokenizer'];
  for (const name of data.after) {
    const manifestUri = upstream.get(name)?.manifestUri;
    if (!manifestUri) continue;
    const { store, key } = runtime.openObject(manifestUri);
    const manifest = await readManifest(store, key);
    datasets.push({
      stage: name,
      manifestUri,
      objects: manifest.objects
        .filter((object) => !['html', 'md', 'svg'].includes(object.format))
        .map((object) => ({ uri: object.uri, ...(object.kind ? { kind: object.kind } : {}), format: object.format, ...(object.records !== undefined ? { records: object.records } : {}), bytes: object.bytes, sha256: object.sha256 })),
    });
    const recorded = (manifest.stats as { tokenizer?: { name?: unknown; fingerprint?: unknown; templateHash?: unknown } }).tokenizer;
    if (!tokenizer && typeof recorded?.fingerprint === 'string') {
      tokenizer = {
        fingerprint: recorded.fingerprint,
        ...(typeof recorded.name === 'string' ? { name: recorded.name } : {}),
        ...(typeof recorded.templateHash === 'string' ? { templateHash: recorded.templateHash } : {}),
      };
    }
  }
  return {
    schemaVersion: TRAINING_REQUEST_SCHEMA_VERSION,
    runId: data.runId,
    requestedAt: new Date(requestedAt).toISOString(),
    deadline: new Date(requestedAt + data.timeoutMs).toISOString(),
    codeVersion,
    datasets,
    ...(tokenizer ? { tokenizer } : {}),
    hyperparameters: data.hyperparameters,
    checkpoint: { markerUri: checkpointUri, registerCommand: registerCommandOf(data.runId), required: ['endpoint', 'model'] },
    then: data.before,
  };
}

/** The `before` stages as flows under the handoff job, their configs given the checkpoint. */
function postStageFlows(data: HandoffJobData, marker: CheckpointMarker, job: Job, jobDataLimit: number): FlowJob[] {
  const problems = new ProblemCollector();
  const stages: FlowStage[] = [];
  for (const post of data.post) {
    const stage = getStage(post.name);
    const result = stage.input.safeParse(fillCheckpointReferences(post.template, marker));
    if (!result.success) {
      problems.addAll(zodProblems(result.error, undefined, `stages.${post.name}`));
      continue;
    }
    stages.push({ name: post.name, jobId: post.jobId, input: result.data, inputHash: hashValue(result.data), outputPrefix: post.outputPrefix, dependsOn: post.dependsOn });
  }
  problems.throwIfAny('CHECKPOINT_CONFIG_INVALID', `the checkpoint registered for run ${data.runId} (${marker.endpoint}, model ${marker.model}) makes stage configs invalid; register a valid endpoint and model`);
  const roots = buildStageForest(stages, { runId: data.runId, seed: data.seed, artifactsRoot: data.artifactsRoot, jobDataLimit });
  const parent = { id: job.id as string, queue: job.queueQualifiedName };
  return roots.map((root) => ({ ...root, opts: { ...root.opts, parent } }));
}
