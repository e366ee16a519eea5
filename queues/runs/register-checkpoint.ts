import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { BadInputError, ProblemCollector } from '../../shared/errors';
import { zodProblems } from '../../shared/config/zod-problems';
import { formatPath } from '../../shared/harness/source-document';
import { parseJobData } from '../bullmq/job-data';
import { runJobDataSchema, type RunJobData } from './run-job-data';
import type { QueueContext } from '../bullmq/queue-context';
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
import { modelEndpointOf } from '../../shared/models/model-registry';
import { modelServerProblems } from './run-preflight';

/**
 * The adapter a registered checkpoint's `--endpoint` is described by: the trainer contract serves
 * a checkpoint as an OpenAI-compatible server (stages reach it as `{ adapter: openai, baseUrl:
 * "${checkpoints.<handoff>.endpoint}" }`). Its registry entry says where the model list is.
 */
const checkpointAdapter = 'openai';

/**
 * `hat checkpoint register`: hands a trained checkpoint back to a run waiting at one of its
 * trainer handoffs. Checks the run has that handoff and it has asked for training (or is about
 * to), that the checkpoint is for this run and handoff (`--request`, `--policy-version`), that the
 * endpoint serves the model (unless told not to) and the tokenizer matches the data's (when
 * given); writes `runs/<runId>/<handoff>/checkpoint.json`, then wakes the handoff job so the stages
 * that wait for it start at once instead of at the next poll. Every refusal is bad input (exit 2).
 */

export interface RegisterCheckpointInput {
  runId: string;
  /** The handoff's name; may be left out when the run has one handoff. */
  handoff?: string;
  endpoint?: string;
  model?: string;
  modelDir?: string;
  tokenizerFingerprint?: string;
  checkpointUri?: string;
  /** The training request the checkpoint was trained on: must be this run's and handoff's. */
  requestUri?: string;
  /** The policy version the trainer says this is: must be the one the handoff asks for. */
  policyVersion?: number;
  /** No training happened (the demo's simulated trainer). */
  simulated?: boolean;
  /** A real trainer's lineage and training summary (trainer/ writes them in result.json). */
  lineage?: CheckpointMarker['lineage'];
  training?: CheckpointMarker['training'];
  /** Default `cli`. */
  registeredBy?: string;
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
  handoff: string;
  markerUri: string;
  /** Where the handoff was: `waiting-for-checkpoint` (woken now), `waiting-for-stages` (it finds the marker when they are done), `failed` (retry the run). */
  handoffState: 'waiting-for-checkpoint' | 'waiting-for-stages' | 'failed';
  /** Whether the waiting handoff job was woken. */
  woken: boolean;
  /** True when the same checkpoint was registered already. */
  unchanged: boolean;
}

const optionNames: Record<string, string> = {
  tokenizerFingerprint: 'tokenizer-fingerprint',
  checkpointUri: 'checkpoint-uri',
  modelDir: 'model-dir',
  policyVersion: 'policy-version',
};

export async function registerCheckpoint(
  context: QueueContext,
  input: RegisterCheckpointInput,
): Promise<RegisterCheckpointResult> {
  const runJob = await context.runsQueue.getJob(input.runId);
  if (!runJob || runJob.name !== 'run')
    throw new BadInputError(
      'RUN_NOT_FOUND',
      `no run "${input.runId}" in Redis (prefix ${context.prefix}); see \`hat runs list\``,
    );
  const run = parseJobData(runJobDataSchema, runJob.data, `runs:${input.runId}`);
  const handoffs = run.handoffs ?? [];
  if (handoffs.length === 0) {
    throw new BadInputError(
      'NO_HANDOFF',
      `run ${input.runId} has no trainer handoff, so nothing waits for a checkpoint; add handoffs: { <name>: { after: [...] } } to its run config`,
    );
  }
  const names = handoffs.map((handoff) => handoff.name).join(', ');
  if (input.handoff === undefined && handoffs.length > 1) {
    throw new BadInputError(
      'HANDOFF_REQUIRED',
      `run ${input.runId} has several trainer handoffs (${names}); say which one this checkpoint answers with --handoff <name>`,
    );
  }
  const entry = input.handoff === undefined ? handoffs[0] : handoffs.find((handoff) => handoff.name === input.handoff);
  if (!entry)
    throw new BadInputError(
      'WRONG_HANDOFF',
      `run ${input.runId} has no handoff "${input.handoff}"; its handoffs: ${names}`,
    );
  const handoffJob = await context.runsQueue.getJob(entry.jobId);
  if (!handoffJob) {
    // A later handoff of the chain: its job is added once the one before it has its checkpoint.
    const waiting = await currentHandoff(context, handoffs);
    throw new BadInputError(
      'WRONG_HANDOFF',
      `handoff ${entry.name} of run ${input.runId} has not asked for training yet (its stages wait for ${waiting ? `handoff ${waiting}` : 'an earlier handoff'}); ` +
        `a checkpoint for it cannot have been trained on its data. Register the ${waiting ?? 'earlier'} checkpoint first`,
    );
  }
  const parsed = handoffJobDataSchema.safeParse(handoffJob.data);
  const jobState = await handoffJob.getState();
  if (!parsed.success || jobState === 'completed' || parsed.data.step === 'post') {
    const used = parsed.success ? parsed.data.checkpoint : undefined;
    throw new BadInputError(
      'CHECKPOINT_ALREADY_USED',
      `handoff ${entry.name} of run ${input.runId} ${used ? `already gave ${entry.before.join(', ')} the checkpoint ${used.model ?? used.modelDir}` : 'is past its checkpoint'}; start a new run to use another checkpoint`,
    );
  }
  const layout = runLayout(run.artifactsRoot, input.runId);
  const requestUri = `${layout.root}/${trainingRequestKey(input.runId, entry.name)}`;
  if (input.requestUri !== undefined && input.requestUri !== requestUri) {
    throw new BadInputError(
      'WRONG_CHECKPOINT',
      `--request ${input.requestUri} is not the training request of handoff ${entry.name} of run ${input.runId} (${requestUri}); this checkpoint was trained for another run or handoff`,
    );
  }
  if (
    input.policyVersion !== undefined &&
    entry.policyVersion !== undefined &&
    input.policyVersion !== entry.policyVersion
  ) {
    throw new BadInputError(
      'WRONG_CHECKPOINT',
      `--policy-version ${input.policyVersion}: handoff ${entry.name} of run ${input.runId} asks for policy version ${entry.policyVersion}`,
    );
  }

  const markerResult = checkpointMarkerSchema.safeParse({
    schemaVersion: CHECKPOINT_MARKER_SCHEMA_VERSION,
    runId: input.runId,
    handoff: entry.name,
    ...(input.endpoint !== undefined ? { endpoint: input.endpoint } : {}),
    ...(input.model !== undefined ? { model: input.model } : {}),
    ...(input.modelDir !== undefined ? { modelDir: input.modelDir } : {}),
    ...(input.tokenizerFingerprint ? { tokenizerFingerprint: input.tokenizerFingerprint } : {}),
    ...(input.checkpointUri ? { checkpointUri: input.checkpointUri } : {}),
    ...((input.policyVersion ?? entry.policyVersion) !== undefined
      ? { policyVersion: input.policyVersion ?? entry.policyVersion }
      : {}),
    // A real trainer says so (false); a marker without the field comes from an unknown trainer.
    ...(input.simulated !== undefined ? { simulated: input.simulated } : {}),
    ...(input.lineage ? { lineage: input.lineage } : {}),
    ...(input.training ? { training: input.training } : {}),
    registeredAt: input.now.toISOString(),
    registeredBy: input.registeredBy ?? 'cli',
  });
  if (!markerResult.success) {
    const problems = new ProblemCollector();
    problems.addAll(
      zodProblems(markerResult.error).map((problem) => ({
        ...problem,
        path: `--${optionNames[problem.path ?? ''] ?? problem.path}`,
      })),
    );
    problems.throwIfAny('BAD_CHECKPOINT', 'the checkpoint is not usable; fix the options named below');
  }
  const marker = markerResult.data as CheckpointMarker;

  const endpoint =
    marker.endpoint === undefined
      ? undefined
      : modelEndpointOf({
          adapter: checkpointAdapter,
          baseUrl: marker.endpoint,
          ...(marker.model !== undefined ? { model: marker.model } : {}),
          ...(input.apiKeyEnv ? { apiKeyEnv: input.apiKeyEnv } : {}),
        });
  if (input.checkEndpoint && endpoint !== undefined) {
    const found = await modelServerProblems(endpoint, [], { environment: input.environment });
    if (found.length > 0) {
      const problems = new ProblemCollector();
      problems.addAll(
        found.map((finding) => ({
          path:
            finding.path.length > 0
              ? `--${formatPath(finding.path) === 'baseUrl' ? 'endpoint' : formatPath(finding.path) === 'apiKeyEnv' ? 'api-key-env' : formatPath(finding.path)}`
              : undefined,
          message: finding.message,
        })),
      );
      problems.throwIfAny(
        'CHECKPOINT_ENDPOINT_UNUSABLE',
        `the checkpoint endpoint cannot serve run ${input.runId} (pass --skip-endpoint-check to register it anyway)`,
      );
    }
  }

  const store = input.storeFor(run.artifactsRoot);
  if (marker.tokenizerFingerprint !== undefined && (await store.head(trainingRequestKey(input.runId, entry.name)))) {
    const request = JSON.parse(
      (await store.getBuffer(trainingRequestKey(input.runId, entry.name))).toString('utf8'),
    ) as Partial<TrainingRequest>;
    const expected = request.tokenizer?.fingerprint;
    if (expected !== undefined && expected !== marker.tokenizerFingerprint) {
      throw new BadInputError(
        'TOKENIZER_MISMATCH',
        `--tokenizer-fingerprint ${marker.tokenizerFingerprint} is not the tokenizer run ${input.runId}'s training data was tokenized with (${expected}); register a checkpoint trained on that data`,
      );
    }
  }

  const key = checkpointMarkerKey(input.runId, entry.name);
  const existing = (await store.head(key))
    ? (JSON.parse((await store.getBuffer(key)).toString('utf8')) as Partial<CheckpointMarker>)
    : undefined;
  const unchanged =
    existing?.endpoint === marker.endpoint &&
    existing?.model === marker.model &&
    existing?.modelDir === marker.modelDir;
  if (!unchanged) await store.put(key, `${JSON.stringify(marker, null, 2)}\n`, { contentType: 'application/json' });

  let woken = false;
  if (jobState === 'delayed') {
    // Wake it now instead of at its next poll; it may just have been picked up, which is as good.
    await handoffJob.promote().then(
      () => (woken = true),
      () => undefined,
    );
  }
  const handoffState =
    jobState === 'failed'
      ? 'failed'
      : parsed.data.step === 'wait-checkpoint'
        ? 'waiting-for-checkpoint'
        : 'waiting-for-stages';
  return {
    runId: input.runId,
    handoff: entry.name,
    markerUri: `${layout.root}/${key}`,
    handoffState,
    woken,
    unchanged,
  };
}

/** The handoff of the chain the run is at (the last one with a job). */
async function currentHandoff(
  context: QueueContext,
  handoffs: NonNullable<RunJobData['handoffs']>,
): Promise<string | undefined> {
  let current: string | undefined;
  for (const handoff of handoffs) if (await context.runsQueue.getJob(handoff.jobId)) current = handoff.name;
  return current;
}
