import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { BadInputError, ProblemCollector } from '../shared/errors';
import { zodProblems } from '../shared/config/zod-problems';
import { formatPath } from '../shared/harness/source-document';
import { parseJobData, runJobDataSchema } from './job-data';
import type { QueueContext } from './queue-context';
import { runLayout } from './run-layout';
import {
  CHECKPOINT_MARKER_SCHEMA_VERSION,
  checkpointMarkerKey,
  checkpointMarkerSchema,
  handoffJobDataSchema,
  trainingRequestKey,
  type CheckpointMarker,
  type TrainingRequest,
} from './run-handoff';
import { modelServerProblems } from './run-preflight';

/**
 * `hat checkpoint register`: hands a trained checkpoint back to a run waiting at its trainer
 * handoff. Checks the run waits for one, the endpoint serves the model (unless told not to) and
 * the tokenizer matches the data's (when given), writes `runs/<runId>/train/checkpoint.json`, then
 * wakes the handoff job so the stages that wait for it start at once instead of at the next poll.
 */

export interface RegisterCheckpointInput {
  runId: string;
  endpoint: string;
  model: string;
  tokenizerFingerprint?: string;
  checkpointUri?: string;
  /** Environment variable with the key `GET /v1/models` needs, when the server wants one. */
  apiKeyEnv?: string;
  /** Ask the endpoint whether it serves the model. */
  checkEndpoint: boolean;
  environment: NodeJS.ProcessEnv;
  /** The store of the run's artifact root. */
  storeFor(rootUri: string): ArtifactStore;
  now: Date;
}

export interface RegisterCheckpointResult {
  runId: string;
  markerUri: string;
  /** Where the handoff was: `waiting-for-checkpoint` (woken now), `waiting-for-stages` (it finds the marker when they are done), `failed` (retry the run). */
  handoffState: 'waiting-for-checkpoint' | 'waiting-for-stages' | 'failed';
  /** Whether the waiting handoff job was woken. */
  woken: boolean;
  /** True when the same checkpoint was registered already. */
  unchanged: boolean;
}

export async function registerCheckpoint(context: QueueContext, input: RegisterCheckpointInput): Promise<RegisterCheckpointResult> {
  const runJob = await context.runsQueue.getJob(input.runId);
  if (!runJob || runJob.name !== 'run') throw new BadInputError('RUN_NOT_FOUND', `no run "${input.runId}" in Redis (prefix ${context.prefix}); see \`hat runs list\``);
  const run = parseJobData(runJobDataSchema, runJob.data, `runs:${input.runId}`);
  if (!run.handoff) {
    throw new BadInputError('NO_HANDOFF', `run ${input.runId} has no trainer handoff, so nothing waits for a checkpoint; add handoff: { after: [...], before: [...] } to its run config`);
  }
  const handoffJob = await context.runsQueue.getJob(run.handoff.jobId);
  const parsed = handoffJobDataSchema.safeParse(handoffJob?.data);
  const jobState = handoffJob ? await handoffJob.getState() : 'missing';
  if (!handoffJob || !parsed.success || jobState === 'completed' || parsed.data.step === 'post') {
    const used = parsed.success ? parsed.data.checkpoint : undefined;
    throw new BadInputError(
      'CHECKPOINT_ALREADY_USED',
      `run ${input.runId} ${used ? `already runs ${run.handoff.before.join(', ')} on ${used.model} at ${used.endpoint}` : 'is past its trainer handoff'}; start a new run to use another checkpoint`,
    );
  }

  const markerResult = checkpointMarkerSchema.safeParse({
    schemaVersion: CHECKPOINT_MARKER_SCHEMA_VERSION,
    runId: input.runId,
    endpoint: input.endpoint,
    model: input.model,
    ...(input.tokenizerFingerprint ? { tokenizerFingerprint: input.tokenizerFingerprint } : {}),
    ...(input.checkpointUri ? { checkpointUri: input.checkpointUri } : {}),
    registeredAt: input.now.toISOString(),
    registeredBy: 'cli',
  });
  if (!markerResult.success) {
    const problems = new ProblemCollector();
    problems.addAll(zodProblems(markerResult.error).map((problem) => ({ ...problem, path: `--${problem.path === 'tokenizerFingerprint' ? 'tokenizer-fingerprint' : problem.path === 'checkpointUri' ? 'checkpoint-uri' : problem.path}` })));
    problems.throwIfAny('BAD_CHECKPOINT', 'the checkpoint is not usable; fix the options named below');
  }
  const marker = markerResult.data as CheckpointMarker;

  if (input.checkEndpoint) {
    const found = await modelServerProblems({ baseUrl: marker.endpoint, model: marker.model, ...(input.apiKeyEnv ? { apiKeyEnv: input.apiKeyEnv } : {}) }, [], { environment: input.environment });
    if (found.length > 0) {
      const problems = new ProblemCollector();
      problems.addAll(found.map((finding) => ({ path: finding.path.length > 0 ? `--${formatPath(finding.path) === 'baseUrl' ? 'endpoint' : formatPath(finding.path) === 'apiKeyEnv' ? 'api-key-env' : formatPath(finding.path)}` : undefined, message: finding.message })));
      problems.throwIfAny('CHECKPOINT_ENDPOINT_UNUSABLE', `the checkpoint endpoint cannot serve run ${input.runId} (pass --skip-endpoint-check to register it anyway)`);
    }
  }

  const store = input.storeFor(run.artifactsRoot);
  if (marker.tokenizerFingerprint !== undefined && (await store.head(trainingRequestKey(input.runId)))) {
    const request = JSON.parse((await store.getBuffer(trainingRequestKey(input.runId))).toString('utf8')) as Partial<TrainingRequest>;
    const expected = request.tokenizer?.fingerprint;
    if (expected !== undefined && expected !== marker.tokenizerFingerprint) {
      throw new BadInputError('TOKENIZER_MISMATCH', `--tokenizer-fingerprint ${marker.tokenizerFingerprint} is not the tokenizer run ${input.runId}'s training data was tokenized with (${expected}); register a checkpoint trained on that data`);
    }
  }

  const key = checkpointMarkerKey(input.runId);
  const existing = (await store.head(key)) ? (JSON.parse((await store.getBuffer(key)).toString('utf8')) as Partial<CheckpointMarker>) : undefined;
  const unchanged = existing?.endpoint === marker.endpoint && existing?.model === marker.model;
  if (!unchanged) await store.put(key, `${JSON.stringify(marker, null, 2)}\n`, { contentType: 'application/json' });

  let woken = false;
  if (jobState === 'delayed') {
    // Wake it now instead of at its next poll; it may just have been picked up, which is as good.
    await handoffJob.promote().then(
      () => (woken = true),
      () => undefined,
    );
  }
  const handoffState = jobState === 'failed' ? 'failed' : parsed.data.step === 'wait-checkpoint' ? 'waiting-for-checkpoint' : 'waiting-for-stages';
  return { runId: input.runId, markerUri: `${runLayout(run.artifactsRoot, input.runId).root}/${key}`, handoffState, woken, unchanged };
}
