/**
 * A trainer handoff job (queue `runs`, name `handoff`, id `<runId>.<handoff>.handoff`); the design
 * is in queues/runs/run-handoff.ts. Steps, recorded in the job data so a retry resumes where it was:
 * - `wait-stages`: waits for its children (the `after` stages), then writes
 *   `runs/<runId>/<handoff>/request.json` and sets the deadline.
 * - `wait-checkpoint`: looks for `runs/<runId>/<handoff>/checkpoint.json`; while it is missing the
 *   job moves itself to delayed for `pollSeconds` (`hat checkpoint register` promotes it at once)
 *   and fails with `[CHECKPOINT_TIMEOUT]` past the deadline. Found: the `before` stages are added
 *   as its children with the checkpoint filled in (and the next handoff of the chain above the
 *   stages it waits for), under the job ids planned with the run, so a retry adds nothing twice.
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
import type { Clock } from '../../queues/stage-kit/define-stage';
import { buildStageForest, type ExtraFlowNode, type FlowStage } from '../../queues/runs/flows';
import { flattenStageResults, isStageJobResult, parseJobData, type StageJobResult } from '../../queues/bullmq/job-data';
import { runLayout } from '../../queues/runs/run-layout';
import {
  TRAINING_REQUEST_SCHEMA_VERSION,
  checkpointMarkerKey,
  checkpointMarkerSchema,
  checkpointValuesOf,
  fillCheckpointReferences,
  handoffFlowJob,
  handoffJobDataSchema,
  handoffNodeName,
  registerCommandOf,
  trainerFailureKey,
  trainingRequestKey,
  type CheckpointMarker,
  type TrainerFailure,
  type HandoffJobData,
  type HandoffOutput,
  type TrainingRequest,
} from '../../queues/runs/run-handoff';
import { getStage } from '../../queues/stage-kit/stage-registry';

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
  /** A job of a queue (a round an earlier handoff started, which this one polls for). */
  getJob(queue: string, id: string): Promise<Job | undefined>;
}

export async function processHandoff(
  runtime: HandoffRuntime,
  job: Job,
  token: string,
): Promise<StageJobResult<HandoffOutput>> {
  let data = parseJobData(handoffJobDataSchema, job.data, `runs:${job.id}`);
  const store = runtime.storeFor(data.artifactsRoot);
  const layout = runLayout(data.artifactsRoot, data.runId);
  const requestUri = `${layout.root}/${trainingRequestKey(data.runId, data.name)}`;
  const checkpointUri = `${layout.root}/${checkpointMarkerKey(data.runId, data.name)}`;

  if (data.step === 'wait-stages') {
    if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
    // A round that started before the previous checkpoint (maxStaleness) is not below this job: poll for it.
    const pending = await pendingAwaitedStage(runtime, data);
    if (pending !== undefined) {
      await job.moveToDelayed(runtime.clock.now() + Math.min(data.pollIntervalMs, 5_000), token);
      throw new DelayedError();
    }
    const upstream = flattenStageResults(Object.values(await job.getChildrenValues()).filter(isStageJobResult));
    const requestedAt = runtime.clock.now();
    const request = await trainingRequest(runtime, data, upstream, requestedAt, checkpointUri);
    await store.put(trainingRequestKey(data.runId, data.name), `${JSON.stringify(request, null, 2)}\n`, {
      contentType: 'application/json',
    });
    data = {
      ...data,
      step: 'wait-checkpoint',
      requestedAt,
      deadline: requestedAt + data.timeoutMs,
      ...(request.dropped ? { dropped: request.dropped } : {}),
    };
    await job.updateData(data);
    runtime.logger.info(
      {
        runId: data.runId,
        handoff: data.name,
        request: requestUri,
        deadline: new Date(data.deadline as number).toISOString(),
        ...(request.dropped ? { dropped: request.dropped } : {}),
      },
      'training request written; waiting for a checkpoint',
    );
  }

  if (data.step === 'wait-checkpoint') {
    if (await runtime.isRunCancelled(data.runId))
      throw new HatError(
        'RUN_CANCELLED',
        `run ${data.runId} was cancelled while waiting for the ${data.name} checkpoint`,
      );
    const now = runtime.clock.now();
    if (data.deadline === undefined) {
      // `hat runs retry` after a timeout clears the deadline: a fresh wait starts now.
      data = { ...data, deadline: now + data.timeoutMs };
      await job.updateData(data);
    }
    await throwOnTrainerFailure(store, data.runId, data.name);
    const found = await readCheckpointMarker(store, data.runId, checkpointUri, data.name);
    const marker =
      found && found.policyVersion === undefined && data.policyVersion !== undefined
        ? { ...found, policyVersion: data.policyVersion }
        : found;
    if (!marker) {
      const deadline = data.deadline as number;
      if (now >= deadline) {
        throw new HatError(
          'CHECKPOINT_TIMEOUT',
          `run ${data.runId}: no checkpoint was registered for handoff ${data.name} within ${formatMinutes(data.timeoutMs)} of the training request ${requestUri}; ` +
            `train on it, then \`${registerCommandOf(data.runId, data.name)}\` (or write ${checkpointUri}) and \`hat runs retry ${data.runId}\` to wait again`,
        );
      }
      await job.moveToDelayed(Math.min(deadline, now + data.pollIntervalMs), token);
      throw new DelayedError();
    }
    await checkTokenizer(store, data.runId, data.name, marker, requestUri);
    await runtime.addFlows(postStageFlows(data, marker, job, runtime.jobDataLimit));
    data = { ...data, step: 'post', checkpoint: marker, checkpointAt: now };
    await job.updateData(data);
    runtime.logger.info(
      {
        runId: data.runId,
        handoff: data.name,
        endpoint: marker.endpoint,
        model: marker.model,
        modelDir: marker.modelDir,
        policyVersion: marker.policyVersion,
        stages: data.post.map((stage) => stage.name),
      },
      'checkpoint registered; the stages that wait for it are enqueued',
    );
  }

  if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
  const upstream = Object.values(await job.getChildrenValues()).filter(isStageJobResult);
  const output: HandoffOutput = {
    handoff: data.name,
    requestUri,
    checkpointUri,
    checkpoint: data.checkpoint as CheckpointMarker,
    requestedAt: data.requestedAt ?? 0,
    checkpointAt: data.checkpointAt ?? 0,
    ...(data.dropped !== undefined ? { dropped: data.dropped } : {}),
  };
  return {
    kind: 'stage',
    stage: handoffNodeName(data.name),
    output,
    parts: 0,
    startedAt: output.requestedAt,
    finishedAt: output.checkpointAt,
    upstream,
  };
}

/** The first `awaits` stage that has not completed yet; throws when one failed or the run was cancelled. */
async function pendingAwaitedStage(runtime: HandoffRuntime, data: HandoffJobData): Promise<string | undefined> {
  for (const awaited of data.awaits) {
    const stageJob = await runtime.getJob(awaited.queue, awaited.jobId);
    const state = stageJob ? await stageJob.getState() : 'unknown';
    if (state === 'completed') continue;
    if (state === 'failed')
      throw new HatError(
        'STAGE_FAILED',
        `run ${data.runId}: handoff ${data.name} waits for stage ${awaited.name}, which failed (${stageJob?.failedReason ?? 'no reason given'})`,
      );
    if (await runtime.isRunCancelled(data.runId))
      throw new HatError(
        'RUN_CANCELLED',
        `run ${data.runId} was cancelled while handoff ${data.name} waited for stage ${awaited.name}`,
      );
    // A completed job may have been removed: its manifest says it completed.
    if (state === 'unknown') {
      const { store, key } = runtime.openObject(
        runLayout(data.artifactsRoot, data.runId).stageManifestUri(awaited.name),
      );
      if (await store.head(key)) continue;
    }
    return awaited.name;
  }
  return undefined;
}

/**
 * With maxStaleness s, the trainer of handoff H (policy version V+1) trains from version V: a
 * dataset sampled with a version below V - s is too old, so it is left out of the request and
 * counted. The stages' records all carry the one version their stage sampled with.
 */
export function staleDatasets(
  data: Pick<HandoffJobData, 'policyVersion' | 'maxStaleness'>,
  datasets: TrainingRequest['datasets'],
): { kept: TrainingRequest['datasets']; dropped: NonNullable<TrainingRequest['dropped']> } {
  if (data.maxStaleness === undefined || data.policyVersion === undefined) return { kept: datasets, dropped: [] };
  const oldest = data.policyVersion - 1 - data.maxStaleness;
  const kept: TrainingRequest['datasets'] = [];
  const dropped: NonNullable<TrainingRequest['dropped']> = [];
  for (const dataset of datasets) {
    if (dataset.policyVersion !== undefined && dataset.policyVersion < oldest) {
      const records = dataset.objects
        .filter((object) => object.kind !== 'groups')
        .reduce((sum, object) => sum + (object.records ?? 0), 0);
      dropped.push({
        stage: dataset.stage,
        policyVersion: dataset.policyVersion,
        records,
        reason: `sampled with policy v${dataset.policyVersion}, older than v${oldest} (v${data.policyVersion - 1} - maxStaleness ${data.maxStaleness})`,
      });
    } else kept.push(dataset);
  }
  return { kept, dropped };
}

function formatMinutes(ms: number): string {
  const minutes = ms / 60_000;
  return minutes >= 1 ? `${Number(minutes.toFixed(1))} min` : `${Math.round(ms / 1000)} s`;
}

/** The marker when it exists; BadInputError for one that is not a checkpoint of this run. */
export async function readCheckpointMarker(
  store: ArtifactStore,
  runId: string,
  uri: string,
  handoff?: string,
): Promise<CheckpointMarker | undefined> {
  const key = checkpointMarkerKey(runId, handoff);
  if (!(await store.head(key))) return undefined;
  let value: unknown;
  try {
    value = JSON.parse((await store.getBuffer(key)).toString('utf8'));
  } catch (error) {
    throw new BadInputError(
      'BAD_CHECKPOINT_MARKER',
      `${uri} is not valid JSON (${(error as Error).message}); rewrite it with \`${registerCommandOf(runId, handoff)}\``,
    );
  }
  const parsed = checkpointMarkerSchema.safeParse(value);
  if (!parsed.success) {
    const problems = new ProblemCollector();
    problems.addAll(zodProblems(parsed.error, uri));
    problems.throwIfAny(
      'BAD_CHECKPOINT_MARKER',
      `${uri} is not a checkpoint marker ({"endpoint": "<url>", "model": "<name>"} or {"modelDir": "<dir>"}); rewrite it with \`${registerCommandOf(runId, handoff)}\``,
    );
  }
  const marker = parsed.data as CheckpointMarker;
  if (marker.runId !== undefined && marker.runId !== runId) {
    throw new BadInputError(
      'BAD_CHECKPOINT_MARKER',
      `${uri} names run ${marker.runId}, not ${runId}; it was copied from another run. Register this run's checkpoint with \`${registerCommandOf(runId, handoff)}\``,
    );
  }
  if (handoff !== undefined && marker.handoff !== undefined && marker.handoff !== handoff) {
    throw new BadInputError(
      'BAD_CHECKPOINT_MARKER',
      `${uri} names handoff ${marker.handoff}, not ${handoff}; register the ${handoff} checkpoint with \`${registerCommandOf(runId, handoff)}\``,
    );
  }
  return marker;
}

/**
 * A trainer an executor started has failed: the handoff fails with its exit code and last lines
 * (never retried by BullMQ: `hat runs retry` trains again). The marker is removed first, so a
 * retried handoff waits for the new attempt instead of failing on the old one.
 */
async function throwOnTrainerFailure(store: ArtifactStore, runId: string, handoff: string): Promise<void> {
  const key = trainerFailureKey(runId, handoff);
  if (!(await store.head(key))) return;
  const failure = JSON.parse((await store.getBuffer(key)).toString('utf8')) as Partial<TrainerFailure>;
  await store.delete(key);
  const refused = failure.exitCode === 2;
  const lines = (failure.lastLines ?? []).slice(-12).join('\n');
  throw new HatError(
    refused ? 'TRAINING_REFUSED' : 'TRAINING_FAILED',
    `the trainer of handoff ${handoff} (run ${runId}) ${refused ? 'refused its data (exit 2)' : `failed (exit ${failure.exitCode ?? failure.signal ?? 'unknown'})`}` +
      `${failure.logUri ? `; log: ${failure.logUri}` : ''}; ${refused ? 'fix what it names, then' : 'after fixing the cause,'} \`hat runs retry ${runId}\` trains again. Last lines:\n${lines}`,
  );
}

/** A checkpoint that says which tokenizer it has must have the one the data was tokenized with. */
async function checkTokenizer(
  store: ArtifactStore,
  runId: string,
  handoff: string,
  marker: CheckpointMarker,
  requestUri: string,
): Promise<void> {
  if (marker.tokenizerFingerprint === undefined) return;
  const request = JSON.parse(
    (await store.getBuffer(trainingRequestKey(runId, handoff))).toString('utf8'),
  ) as Partial<TrainingRequest>;
  const expected = request.tokenizer?.fingerprint;
  if (expected !== undefined && expected !== marker.tokenizerFingerprint) {
    throw new BadInputError(
      'TOKENIZER_MISMATCH',
      `the checkpoint of run ${runId} has tokenizer fingerprint ${marker.tokenizerFingerprint}, but its training data (${requestUri}) was tokenized with ${expected}; ` +
        "register a checkpoint trained on that data, or rerun with a shard stage that uses the checkpoint's tokenizer",
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
    // An `after` stage added before an earlier handoff is not below this job; its manifest key is deterministic.
    const manifestUri =
      upstream.get(name)?.manifestUri ??
      (upstream.has(name) ? undefined : runLayout(data.artifactsRoot, data.runId).stageManifestUri(name));
    if (!manifestUri) continue;
    const { store, key } = runtime.openObject(manifestUri);
    if (!upstream.has(name) && !(await store.head(key))) continue;
    const manifest = await readManifest(store, key);
    const policyVersion = (manifest.stats as { policyVersion?: unknown }).policyVersion;
    datasets.push({
      stage: name,
      ...(typeof policyVersion === 'number' ? { policyVersion } : {}),
      manifestUri,
      objects: manifest.objects
        .filter((object) => !['html', 'md', 'svg'].includes(object.format))
        .map((object) => ({
          uri: object.uri,
          ...(object.kind ? { kind: object.kind } : {}),
          format: object.format,
          ...(object.records !== undefined ? { records: object.records } : {}),
          bytes: object.bytes,
          sha256: object.sha256,
        })),
    });
    const recorded = (
      manifest.stats as { tokenizer?: { name?: unknown; fingerprint?: unknown; templateHash?: unknown } }
    ).tokenizer;
    if (!tokenizer && typeof recorded?.fingerprint === 'string') {
      tokenizer = {
        fingerprint: recorded.fingerprint,
        ...(typeof recorded.name === 'string' ? { name: recorded.name } : {}),
        ...(typeof recorded.templateHash === 'string' ? { templateHash: recorded.templateHash } : {}),
      };
    }
  }
  const { kept, dropped } = staleDatasets(data, datasets);
  const base = await baseCheckpoint(runtime, data);
  return {
    schemaVersion: TRAINING_REQUEST_SCHEMA_VERSION,
    runId: data.runId,
    handoff: data.name,
    requestedAt: new Date(requestedAt).toISOString(),
    deadline: new Date(requestedAt + data.timeoutMs).toISOString(),
    codeVersion: codeVersion(),
    datasets: kept,
    ...(data.maxStaleness !== undefined ? { maxStaleness: data.maxStaleness, dropped } : {}),
    ...(tokenizer ? { tokenizer } : {}),
    hyperparameters: data.hyperparameters,
    ...(data.trainer ? { trainer: data.trainer } : {}),
    ...(base ? { base } : {}),
    ...(data.policyVersion !== undefined ? { policyVersion: data.policyVersion } : {}),
    checkpoint: {
      markerUri: checkpointUri,
      registerCommand: registerCommandOf(data.runId, data.name),
      required: requiredCheckpointFields(data),
    },
    then: data.before,
  };
}

/**
 * The checkpoint training continues from: the previous handoff's (given by it), none (`base:
 * none`, a new model), or an earlier handoff's marker (`base: <handoff>`), read from the store.
 */
async function baseCheckpoint(runtime: HandoffRuntime, data: HandoffJobData): Promise<HandoffJobData['base']> {
  if (data.baseFrom === undefined || data.baseFrom === data.base?.handoff) return data.base;
  if (data.baseFrom === 'none') return undefined;
  const layout = runLayout(data.artifactsRoot, data.runId);
  const markerUri = `${layout.root}/${checkpointMarkerKey(data.runId, data.baseFrom)}`;
  const checkpoint = await readCheckpointMarker(
    runtime.storeFor(data.artifactsRoot),
    data.runId,
    markerUri,
    data.baseFrom,
  );
  if (!checkpoint)
    throw new HatError(
      'CHECKPOINT_MISSING',
      `run ${data.runId}: handoff ${data.name} continues from handoff ${data.baseFrom}, whose checkpoint ${markerUri} is not there; register it (${registerCommandOf(data.runId, data.baseFrom)}) and retry the run`,
    );
  return { handoff: data.baseFrom, markerUri, checkpoint };
}

/** The checkpoint fields the stages that wait for this handoff reference (endpoint and model when they name none). */
function requiredCheckpointFields(data: HandoffJobData): string[] {
  const text = JSON.stringify([data.post, data.next ?? null]);
  const fields = new Set<string>();
  for (const match of text.matchAll(/\$\{\s*checkpoints\.([A-Za-z0-9_-]+)\.([A-Za-z]+)\s*\}/g))
    if (match[1] === data.name) fields.add(match[2]);
  return fields.size > 0 ? [...fields] : ['endpoint', 'model'];
}

/**
 * The stages that wait for this checkpoint as flows under the handoff job, their configs given
 * it, with the next handoff of the chain (its own waiting stages given it too) above the stages it
 * waits for.
 */
function postStageFlows(data: HandoffJobData, marker: CheckpointMarker, job: Job, jobDataLimit: number): FlowJob[] {
  const problems = new ProblemCollector();
  const values = checkpointValuesOf(marker);
  const stages: FlowStage[] = [];
  for (const post of data.post) {
    const missing = new Set<string>();
    const filled = fillCheckpointReferences(post.template, data.name, values, missing);
    if (missing.size > 0) {
      problems.add({
        path: `stages.${post.name}`,
        message: `references ${[...missing].map((field) => `\${checkpoints.${data.name}.${field}}`).join(', ')}, which the registered checkpoint does not have; register it again with them`,
      });
      continue;
    }
    const stage = getStage(post.kind ?? post.name);
    const result = stage.input.safeParse(filled);
    if (!result.success) {
      problems.addAll(zodProblems(result.error, undefined, `stages.${post.name}`));
      continue;
    }
    stages.push({
      name: post.name,
      ...(post.kind ? { kind: post.kind } : {}),
      jobId: post.jobId,
      input: result.data,
      inputHash: hashValue(result.data),
      outputPrefix: post.outputPrefix,
      dependsOn: post.dependsOn,
    });
  }
  const where = marker.endpoint ? `${marker.endpoint}, model ${marker.model}` : `model dir ${marker.modelDir}`;
  problems.throwIfAny(
    'CHECKPOINT_CONFIG_INVALID',
    `the checkpoint registered for handoff ${data.name} of run ${data.runId} (${where}) makes stage configs invalid; register a valid checkpoint`,
  );
  // The next handoff trains from this checkpoint (and on data sampled with it): its request names it.
  const base = {
    handoff: data.name,
    markerUri: `${runLayout(data.artifactsRoot, data.runId).root}/${checkpointMarkerKey(data.runId, data.name)}`,
    checkpoint: marker,
  };
  const next = data.next
    ? { ...(fillCheckpointReferences(data.next, data.name, values) as HandoffJobData), base }
    : undefined;
  const extra: ExtraFlowNode | undefined = next
    ? {
        name: handoffNodeName(next.name),
        dependsOn: next.after.filter((name) => stages.some((stage) => stage.name === name)),
        build: (children, isRoot) => handoffFlowJob(next, children, isRoot, jobDataLimit),
      }
    : undefined;
  const roots = buildStageForest(
    stages,
    { runId: data.runId, seed: data.seed, artifactsRoot: data.artifactsRoot, jobDataLimit },
    extra,
  );
  const parent = { id: job.id as string, queue: job.queueQualifiedName };
  return roots.map((root) => ({ ...root, opts: { ...root.opts, parent } }));
}
