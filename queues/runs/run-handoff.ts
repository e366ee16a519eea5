import type { FlowJob } from 'bullmq';
import { z } from 'zod';
import { httpEndpointUrl } from '../../shared/models/openai/openai-model-config';
import { stagePrefix } from '../../shared/artifacts/artifact-layout';
import { assertJobId } from '../stage-kit/job-ids';
import { checkJobData, runJobOptions } from '../bullmq/job-options';
import { runsQueueName } from '../stage-kit/stage-names';
import type { RunPlan } from './run-config';

/**
 * Trainer handoffs of a run: training happens outside the pipeline, between stages.
 *
 * ```yaml
 * handoffs:
 *   sft: { after: [sft_data], timeoutMinutes: 720, hyperparameters: { learningRate: 1.0e-5 } }
 *   opd: { after: [opd] }
 * stages:
 *   opd:
 *     stage: distill
 *     student: { adapter: onnx, modelDir: "${checkpoints.sft.modelDir}" }
 *   rl:
 *     policy: { adapter: openai, baseUrl: "${checkpoints.opd.endpoint}", model: "${checkpoints.opd.model}" }
 * ```
 * (or the single `handoff: { after, before }` of older configs: a handoff named `train` whose
 * stages say `${checkpoint.<field>}`.) A stage that references a handoff's checkpoint anywhere in
 * its config, or reads a stage that does, waits for it. The handoffs form a chain (each waits for
 * the one before through its `after` stages; queues/runs/run-config.ts checks it).
 *
 * A run is one BullMQ flow plus one more per handoff, added later. The first holds the stages
 * that wait for no checkpoint and the first handoff job (queue `runs`, id `<runId>.<handoff>.handoff`)
 * above its `after` stages. When they complete, the handoff job writes
 * `runs/<runId>/handoffs/<handoff>/request.json` (dataset manifests, suggested hyperparameters,
 * tokenizer fingerprint, the policy version asked for, code version) and waits for
 * `checkpoint.json` beside it, written by `hat checkpoint register` (which also wakes it) or by
 * the trainer itself, re-checking as a delayed job (no worker slot is held while it waits). Then
 * it adds the stages its checkpoint releases as its own children, their `${checkpoints.<handoff>.*}`
 * filled in from the marker, with the next handoff of the chain (its job data nested in this
 * one's, given this checkpoint too) above the stages it waits for, all under the job ids planned
 * when the run was created, so a retried handoff adds nothing twice. No marker before the
 * deadline fails the handoff with `[CHECKPOINT_TIMEOUT]`.
 */

/** Name of the handoff a run config's single `handoff:` section gets (stage lists, reports, `runs/<runId>/train/`). */
export const handoffStageName = 'train';

/** Names of stages and handoffs: they go into job ids, object keys and `${...}` references. */
export const runNodeNamePattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** A handoff job's id: `<runId>.<handoff>.handoff`. */
export function handoffJobId(runId: string, handoff = handoffStageName): string {
  return assertJobId(`${runId}.${handoff}.handoff`);
}

/**
 * Where a handoff's files go: `runs/<runId>/handoffs/<handoff>/` (a handoff may share its name
 * with a stage, as `opd` the distill stage and `opd` its handoff); the single `handoff:` of a run
 * config keeps `runs/<runId>/train/`.
 */
export function handoffPrefix(runId: string, handoff = handoffStageName): string {
  return handoff === handoffStageName
    ? stagePrefix(runId, handoffStageName)
    : `${stagePrefix(runId, 'handoffs')}${handoff}/`;
}

/** `<handoff prefix>request.json`: what the trainer gets. */
export function trainingRequestKey(runId: string, handoff = handoffStageName): string {
  return `${handoffPrefix(runId, handoff)}request.json`;
}

/**
 * `<handoff prefix>trainer-failure.json`: written by an executor whose trainer failed (exit code,
 * last log lines); the waiting handoff job reads it, removes it and fails with them, so the run
 * report and `hat runs show` say why, and `hat runs retry` starts training again.
 */
export function trainerFailureKey(runId: string, handoff = handoffStageName): string {
  return `${handoffPrefix(runId, handoff)}trainer-failure.json`;
}

/** What an executor writes to `trainerFailureKey` when its trainer fails. */
export interface TrainerFailure {
  /** The trainer's exit code: 2 bad input (refused before training), else a failure of the work. */
  exitCode: number | null;
  signal?: string | null;
  /** The last lines the trainer wrote. */
  lastLines: string[];
  logUri?: string;
  failedAt: string;
}

/** `<handoff prefix>checkpoint.json`: its presence releases the stages that wait. */
export function checkpointMarkerKey(runId: string, handoff = handoffStageName): string {
  return `${handoffPrefix(runId, handoff)}checkpoint.json`;
}

/** A handoff among stages (flow trees, stage results, the run graph): `handoff:<name>`, never a stage's name. */
export function handoffNodeName(handoff: string): string {
  return `handoff:${handoff}`;
}

const stageNameList = z.array(z.string().min(1)).min(1);

/** Who answers a handoff: the pipeline's trainer (`trainer/`), started by an executor, or someone else. */
export const trainerExecutors = ['external', 'command', 'kubernetes', 'ray', 'slurm', 'simulated'] as const;
export type TrainerExecutor = (typeof trainerExecutors)[number];

/**
 * `handoffs.<name>.trainer`: how training starts once the request is written, and the trainer's
 * config. `external` (default): nobody here starts it; a trainer registers the checkpoint.
 * `command`: `hat demo`, `hat train <runId>` or `hat run --wait` run the pipeline's trainer as a
 * local process (`python -m hat_trainer train --request <uri>`). `kubernetes`, `ray`, `slurm`: the
 * templates in infra/trainer/ run the same command on a cluster (it writes the marker itself).
 * `simulated`: the demo's simulated trainer (no training). `config` goes into the request as
 * written; the trainer reads it (docs/trainer.md lists the keys).
 */
export const trainerConfigSchema = z
  .object({
    executor: z.enum(trainerExecutors).default('external'),
    config: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();
export type TrainerConfig = z.infer<typeof trainerConfigSchema>;

const handoffFields = {
  /** Stages that complete before the training request is written (e.g. `[shard]`). */
  after: stageNameList,
  /** How long to wait for a checkpoint after the request is written, minutes. Default 1440 (a day). */
  timeoutMinutes: z
    .number()
    .positive()
    .max(30 * 24 * 60)
    .default(24 * 60),
  /** How often the trainer's own marker is looked for, seconds (`hat checkpoint register` wakes the run at once). Default 60. */
  pollSeconds: z.number().int().min(1).max(3600).default(60),
  /** Suggested hyperparameters, passed through to the request as written. Default {}. */
  hyperparameters: z.record(z.string(), z.unknown()).default({}),
  /** Who trains and how (see trainerConfigSchema). Default: an external trainer. */
  trainer: trainerConfigSchema.optional(),
};

/** The single `handoff:` section of a run config (named `train`). */
export const handoffConfigSchema = z
  .object({
    ...handoffFields,
    /** Stages that wait for the registered checkpoint (e.g. `[distill, rl, replay]`). */
    before: stageNameList,
  })
  .strict();
export type HandoffConfig = z.infer<typeof handoffConfigSchema>;

/**
 * One entry of `handoffs: { <name>: {...} }`. A stage waits for it when it references
 * `${checkpoints.<name>.<field>}` anywhere in its config, or is listed in `before`.
 */
export const namedHandoffConfigSchema = z
  .object({
    ...handoffFields,
    /** Stages that wait for the checkpoint without referencing it. Default []. */
    before: z.array(z.string().min(1)).default([]),
    /**
     * The handoff this one comes after when no stage between them waits for it: lineages that
     * train side by side in one run (an experiment's arms) still follow one another. Its `after`
     * stages may then be any earlier stages (they are waited for). Default: none.
     */
    follows: z.string().regex(runNodeNamePattern).optional(),
    /**
     * The checkpoint training continues from (the request's `base`): `previous` (the handoff
     * before it in the chain, the default), `none` (a new model: an experiment arm that starts
     * from scratch), or the name of an earlier handoff.
     */
    base: z.string().regex(runNodeNamePattern).default('previous'),
  })
  .strict();
export type NamedHandoffConfig = z.infer<typeof namedHandoffConfigSchema>;

/** Fields `${checkpoints.<handoff>.<field>}` may name (what a checkpoint marker can carry). */
export const checkpointFields = ['endpoint', 'model', 'modelDir', 'checkpointUri', 'policyVersion'] as const;
export type CheckpointField = (typeof checkpointFields)[number];
/** `checkpoints.<handoff>.<field>` (and the single handoff's `checkpoint.<field>`) inside `${...}`. */
export const checkpointReferencePattern = /^checkpoints?\.(?:([A-Za-z0-9_-]+)\.)?([A-Za-z]+)$/;
const checkpointReferenceInText = /\$\{\s*checkpoints\.([A-Za-z0-9_-]+)\.([A-Za-z]+)\s*\}/g;

/**
 * Values that stand in for a checkpoint while a run is planned: the stages that wait for it are
 * validated against their schemas with them. `.invalid` is a reserved name that never resolves.
 */
export const checkpointPlaceholders: Record<CheckpointField, string> = {
  endpoint: 'http://checkpoint.invalid/v1',
  model: 'checkpoint.invalid',
  modelDir: '/checkpoint.invalid/model',
  checkpointUri: 's3://checkpoint.invalid/weights',
  policyVersion: '1',
};

/** What a checkpoint offers a reference: its fields as strings (absent ones are undefined). */
export type CheckpointValues = Partial<Record<CheckpointField, string>>;

export function checkpointValuesOf(marker: Partial<CheckpointMarker>): CheckpointValues {
  const values: CheckpointValues = {};
  for (const field of checkpointFields) {
    const value = marker[field];
    if (value !== undefined) values[field] = String(value);
  }
  return values;
}

/**
 * Fills `${checkpoints.<handoff>.<field>}` in every string of a value with `checkpoint`'s fields;
 * references to other handoffs are kept for them. `missing` collects referenced fields the
 * checkpoint does not have (they are kept as written).
 */
export function fillCheckpointReferences(
  value: unknown,
  handoff: string,
  checkpoint: CheckpointValues,
  missing?: Set<string>,
): unknown {
  if (typeof value === 'string') {
    // A field that is nothing but `${checkpoints.<handoff>.policyVersion}` gets the number (e.g. an rl stage's `policyVersion`).
    const whole = /^\$\{\s*checkpoints\.([A-Za-z0-9_-]+)\.policyVersion\s*\}$/.exec(value);
    if (
      whole &&
      whole[1] === handoff &&
      checkpoint.policyVersion !== undefined &&
      /^\d+$/.test(checkpoint.policyVersion)
    )
      return Number(checkpoint.policyVersion);
    return value.replace(checkpointReferenceInText, (whole, name: string, field: string) => {
      if (name !== handoff) return whole;
      const filled = checkpoint[field as CheckpointField];
      if (filled === undefined) missing?.add(field);
      return filled ?? whole;
    });
  }
  if (Array.isArray(value)) return value.map((item) => fillCheckpointReferences(item, handoff, checkpoint, missing));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, fillCheckpointReferences(item, handoff, checkpoint, missing)]),
    );
  }
  return value;
}

/** Every handoff whose checkpoint a value names. */
export function checkpointsNamedIn(value: unknown, into = new Set<string>()): Set<string> {
  if (typeof value === 'string') for (const match of value.matchAll(checkpointReferenceInText)) into.add(match[1]);
  else if (Array.isArray(value)) value.forEach((item) => checkpointsNamedIn(item, into));
  else if (value !== null && typeof value === 'object')
    Object.values(value).forEach((item) => checkpointsNamedIn(item, into));
  return into;
}

/** Fills every handoff's placeholders (planning validates waiting stages this way). */
export function fillCheckpointPlaceholders(value: unknown): unknown {
  let filled = value;
  for (const handoff of checkpointsNamedIn(value))
    filled = fillCheckpointReferences(filled, handoff, checkpointPlaceholders);
  return filled;
}

// A key in the URL would sit in the marker, the run's job data and every stage config that reads it.
const httpUrl = httpEndpointUrl('http://trainer-serve:8000/v1');
const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lowercase hex sha256');

export const CHECKPOINT_MARKER_SCHEMA_VERSION = 1;

/**
 * `runs/<runId>/<handoff>/checkpoint.json`. A trainer that writes it directly needs only
 * `endpoint` and `model` (a served checkpoint) or `modelDir` (an exported model directory the
 * workers can read); `hat checkpoint register` fills in the rest.
 */
/** A real trainer's lineage of a checkpoint: the request, its data, the base and the trainer config. */
export const checkpointLineageSchema = z.object({
  requestUri: z.string().max(2000),
  requestSha256: sha256Hex,
  dataSha256s: z.array(sha256Hex).max(1000),
  baseCheckpoint: z.string().max(2000).optional(),
  trainerConfigHash: sha256Hex,
  codeVersion: z.string().max(200).optional(),
});

/** What training did (small: it travels in job data); the loss curve stays in `reportUri`. */
export const trainingSummarySchema = z.object({
  objective: z.enum(['sft', 'opd', 'rl']),
  steps: z.number().int().nonnegative(),
  finalLoss: z.number().nullable(),
  tokensPerSecond: z.number().nonnegative().optional(),
  /** Token-in, token-out proof: max |recomputed - rollout| log-prob before the first update. */
  titoMaxAbsDiff: z.number().nonnegative().optional(),
  /** ONNX export against PyTorch: max |logit difference|. */
  onnxMaxAbsLogitDiff: z.number().nonnegative().optional(),
  reverseKlBefore: z.number().optional(),
  reverseKlAfter: z.number().optional(),
  /** RL: records, and those with a non-zero advantage (a group of equal rewards teaches nothing). */
  advantages: z.object({ records: z.number().int().nonnegative(), nonZero: z.number().int().nonnegative() }).optional(),
  reportUri: z.string().max(2000).optional(),
});

export const checkpointMarkerSchema = z
  .object({
    schemaVersion: z.literal(CHECKPOINT_MARKER_SCHEMA_VERSION).default(CHECKPOINT_MARKER_SCHEMA_VERSION),
    /** When given, must be the run's id (a marker copied from another run is refused). */
    runId: z.string().optional(),
    /** When given, must be the handoff's name (a marker meant for another handoff is refused). */
    handoff: z.string().optional(),
    /** OpenAI-compatible base URL serving the new checkpoint, e.g. `http://serve:8000/v1`. */
    endpoint: httpUrl.optional(),
    /** Model id the endpoint serves it under (what `GET /v1/models` lists). */
    model: z.string().min(1).max(500).optional(),
    /** A model directory (ONNX export, Optimum layout) the workers can read, for in-process students and policies. */
    modelDir: z.string().min(1).max(2000).optional(),
    /** Tokenizer fingerprint of the checkpoint; when given it must equal the request's. */
    tokenizerFingerprint: sha256Hex.optional(),
    /** Where the weights are (for lineage only). */
    checkpointUri: z.string().min(1).max(2000).optional(),
    /** The policy version this checkpoint is (an on-policy stage's rounds count them); default: the one the request asks for. */
    policyVersion: z.number().int().positive().optional(),
    /** True when no training happened (the demo's simulated trainer re-seeds a dummy model). */
    simulated: z.boolean().optional(),
    registeredAt: z.string().optional(),
    /** `cli` for `hat checkpoint register`, else whatever the trainer says. */
    registeredBy: z.string().max(200).optional(),
    /** Where the checkpoint came from (a real trainer says): the request, its data and the base. */
    lineage: checkpointLineageSchema.optional(),
    /** What training did: the objective, steps, loss and the proofs; `reportUri` holds the loss curve. */
    training: trainingSummarySchema.optional(),
  })
  .superRefine((marker, context) => {
    if (marker.endpoint === undefined && marker.modelDir === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['endpoint'],
        message: 'give endpoint and model (a served checkpoint) or modelDir (an exported model directory)',
      });
    }
    if (marker.endpoint !== undefined && marker.model === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['model'],
        message: 'a served checkpoint needs the model id its endpoint serves it under',
      });
    }
  });
export type CheckpointMarker = z.infer<typeof checkpointMarkerSchema>;

export const TRAINING_REQUEST_SCHEMA_VERSION = 1;

/** One dataset object the trainer should read. */
export interface TrainingDatasetObject {
  uri: string;
  kind?: string;
  format: string;
  records?: number;
  bytes: number;
  sha256: string;
}

/** `runs/<runId>/<handoff>/request.json`. */
export interface TrainingRequest {
  schemaVersion: typeof TRAINING_REQUEST_SCHEMA_VERSION;
  runId: string;
  /** The handoff's name (`train` for a run config's single `handoff:`). */
  handoff: string;
  /** ISO-8601. */
  requestedAt: string;
  /** ISO-8601: no checkpoint by then fails the run with CHECKPOINT_TIMEOUT. */
  deadline: string;
  /** Code version of the pipeline that wrote the data. */
  codeVersion: string;
  /** The `after` stages' manifests and the data objects they list (Parquet shards, JSONL exports). */
  datasets: Array<{
    stage: string;
    kind?: string;
    policyVersion?: number;
    manifestUri: string;
    objects: TrainingDatasetObject[];
  }>;
  /** Tokenizer the data was tokenized with (the shard stage's), when a stage recorded one. */
  tokenizer?: { name?: string; fingerprint: string; templateHash?: string };
  /** Suggested hyperparameters from the run config, as written. */
  hyperparameters: Record<string, unknown>;
  /** The handoff's `trainer:` section: executor and the trainer's config. */
  trainer?: TrainerConfig;
  /** The checkpoint the data was sampled with / training continues from: the previous handoff's. Absent for the first. */
  base?: BaseCheckpoint;
  /** For a handoff after an on-policy stage's round: the checkpoint asked for is this policy version. */
  policyVersion?: number;
  /** Rounds with maxStaleness: how many versions behind the one trained from a dataset may be. */
  maxStaleness?: number;
  /** Rounds with maxStaleness: the datasets left out as too old, with their record counts. */
  dropped?: StaleDataset[];
  /** How to hand the checkpoint back. */
  checkpoint: { markerUri: string; registerCommand: string; required: string[] };
  /** Stages that run on the new checkpoint. */
  then: string[];
}

/** The previous handoff's checkpoint, as the request names it. */
export interface BaseCheckpoint {
  handoff: string;
  markerUri: string;
  checkpoint: CheckpointMarker;
}

/** A dataset a handoff left out of its request because its policy version was too old (maxStaleness). */
export const staleDatasetSchema = z.object({
  stage: z.string(),
  policyVersion: z.number().int().positive(),
  records: z.number().int().nonnegative(),
  reason: z.string(),
});
export type StaleDataset = z.infer<typeof staleDatasetSchema>;

/** One stage that waits for a handoff's checkpoint, as the handoff job keeps it until it is registered. */
export const postStageSchema = z.object({
  name: z.string().min(1),
  /** The stage kind (its queue); absent: the name. */
  kind: z.string().min(1).optional(),
  jobId: z.string().min(1),
  /** The stage config with every reference resolved except `${checkpoints.*}`. */
  template: z.unknown(),
  outputPrefix: z.string(),
  /** Stages of the same group it reads (the flow among them mirrors these). */
  dependsOn: z.array(z.string()),
});
export type PostStage = z.infer<typeof postStageSchema>;

const handoffJobDataShape = {
  v: z.literal(1),
  runId: z.string().min(1),
  /** The handoff's name; default `train`. */
  name: z.string().min(1).default(handoffStageName),
  artifactsRoot: z.string().min(1),
  seed: z.string(),
  after: z.array(z.string()),
  /** Every stage that waits for this checkpoint, directly or through another stage. */
  before: z.array(z.string()),
  /** Stage jobs directly below it (they finish before it starts). */
  upstream: z.array(z.string()).default([]),
  timeoutMs: z.number().int().positive(),
  pollIntervalMs: z.number().int().positive(),
  hyperparameters: z.record(z.string(), z.unknown()).default({}),
  trainer: trainerConfigSchema.optional(),
  /** The previous handoff's checkpoint (set when that handoff adds this one). */
  base: z.object({ handoff: z.string(), markerUri: z.string(), checkpoint: checkpointMarkerSchema }).optional(),
  /** Where training continues from when not the previous handoff: `none`, or an earlier handoff's name. */
  baseFrom: z.string().min(1).optional(),
  /** The policy version the checkpoint will be (handoffs after an on-policy stage). */
  policyVersion: z.number().int().positive().optional(),
  /** Rounds with maxStaleness: datasets whose policy version is below (policyVersion - 1) - maxStaleness are dropped from the request and counted. */
  maxStaleness: z.number().int().min(0).optional(),
  /** `after` stages an earlier handoff added (a round that started early): polled for until they complete. */
  awaits: z
    .array(z.object({ name: z.string().min(1), queue: z.string().min(1), jobId: z.string().min(1) }))
    .default([]),
  post: z.array(postStageSchema),
  /** `wait-stages` until the `after` stages complete, `wait-checkpoint` once the request is out, `post` once the `before` stages are added. */
  step: z.enum(['wait-stages', 'wait-checkpoint', 'post']).default('wait-stages'),
  /** Epoch ms the request was written. */
  requestedAt: z.number().optional(),
  /** Epoch ms after which waiting fails (cleared by `hat runs retry` for a fresh wait). */
  deadline: z.number().optional(),
  /** The checkpoint the `before` stages were given. */
  checkpoint: checkpointMarkerSchema.optional(),
  /** Epoch ms the checkpoint was found. */
  checkpointAt: z.number().optional(),
  /** Datasets left out of the request as too old (maxStaleness), once it is written. */
  dropped: z.array(staleDatasetSchema).optional(),
};

/** The handoff job (queue `runs`, name `handoff`). `next`: the following handoff, added with `post` once this checkpoint is known. */
export type HandoffJobData = z.infer<z.ZodObject<typeof handoffJobDataShape>> & { next?: HandoffJobData };
export const handoffJobDataSchema: z.ZodType<HandoffJobData> = z.lazy(() =>
  z.object({ ...handoffJobDataShape, next: handoffJobDataSchema.optional() }),
);

/** A handoff as a planned run carries it. */
export interface PlannedHandoff {
  name: string;
  jobId: string;
  after: string[];
  /** Stages that wait for its checkpoint, directly or through another stage (config order). */
  before: string[];
  timeoutMs: number;
  pollIntervalMs: number;
  hyperparameters: Record<string, unknown>;
  trainer?: TrainerConfig;
  /** The policy version its checkpoint will be (handoffs after an on-policy stage's rounds). */
  policyVersion?: number;
  /** Rounds with maxStaleness: datasets older than the version trained from minus this are dropped from the request. */
  maxStaleness?: number;
  /** The handoff it follows without a stage between them (`follows`): its `after` stages are polled for. */
  follows?: string;
  /** `none` or an earlier handoff: where training continues from, when not the previous handoff. */
  baseFrom?: string;
  /** Handoffs before it in the chain. */
  order: number;
}

/** A handoff's entry in the run job's data. */
export const runHandoffEntrySchema = z.object({
  name: z.string().min(1).default(handoffStageName),
  jobId: z.string().min(1),
  after: z.array(z.string()),
  before: z.array(z.string()),
  policyVersion: z.number().int().positive().optional(),
});
export type RunHandoffEntry = z.infer<typeof runHandoffEntrySchema>;

/** What the handoff job returns: a stage result (so the run sees every stage below it) whose output describes the handoff. */
export interface HandoffOutput {
  handoff: string;
  requestUri: string;
  checkpointUri: string;
  checkpoint: CheckpointMarker;
  /** Epoch ms. */
  requestedAt: number;
  checkpointAt: number;
  /** Rounds with maxStaleness: datasets left out of the request as too old. */
  dropped?: StaleDataset[];
}

/** `hat checkpoint register ...` for a handoff, as messages and the request spell it. */
export function registerCommandOf(runId: string, handoff = handoffStageName): string {
  return `hat checkpoint register ${runId}${handoff === handoffStageName ? '' : ` --handoff ${handoff}`} --endpoint <url> --model <name> (or --model-dir <dir>)`;
}

/** The stages a handoff adds once its checkpoint is known, and the handoff after it. */
export interface HandoffSegment {
  post: PostStage[];
  next?: HandoffJobData;
}

/** The job data of a planned handoff, with the stages that wait for it and the handoffs after it nested. */
export function handoffJobData(
  plan: RunPlan,
  handoff: PlannedHandoff,
  upstream: string[],
  awaits: HandoffJobData['awaits'] = [],
): HandoffJobData {
  const following = plan.handoffs.find((candidate) => candidate.order === handoff.order + 1);
  const segment = plan.stages.filter((stage) => stage.segment === handoff.name);
  const inSegment = (name: string) => segment.some((stage) => stage.name === name);
  // A round that started before this handoff's checkpoint (maxStaleness), or an earlier stage a
  // handoff that `follows` this one names, is not below the next handoff: it polls for it.
  const awaitedByNext =
    following?.maxStaleness !== undefined || following?.follows !== undefined
      ? plan.stages.filter(
          (stage) =>
            following.after.includes(stage.name) &&
            !inSegment(stage.name) &&
            (stage.afterHandoff || following.follows !== undefined),
        )
      : [];
  return {
    v: 1,
    runId: plan.runId,
    name: handoff.name,
    artifactsRoot: plan.artifactsRoot,
    seed: plan.seed,
    after: handoff.after,
    before: handoff.before,
    upstream,
    timeoutMs: handoff.timeoutMs,
    pollIntervalMs: handoff.pollIntervalMs,
    hyperparameters: handoff.hyperparameters,
    ...(handoff.trainer ? { trainer: handoff.trainer } : {}),
    ...(handoff.policyVersion !== undefined ? { policyVersion: handoff.policyVersion } : {}),
    ...(handoff.maxStaleness !== undefined ? { maxStaleness: handoff.maxStaleness } : {}),
    ...(handoff.baseFrom !== undefined ? { baseFrom: handoff.baseFrom } : {}),
    awaits,
    post: segment.map((stage) => ({
      name: stage.name,
      ...(stage.kind !== stage.name ? { kind: stage.kind } : {}),
      jobId: stage.jobId,
      template: stage.template,
      outputPrefix: stage.outputPrefix,
      dependsOn: stage.dependsOn.filter((name) => segment.some((other) => other.name === name)),
    })),
    step: 'wait-stages',
    ...(following
      ? {
          next: handoffJobData(
            plan,
            following,
            following.after.filter(inSegment),
            awaitedByNext.map((stage) => ({ name: stage.name, queue: stage.kind, jobId: stage.jobId })),
          ),
        }
      : {}),
  };
}

/** A handoff job above `children` (its `after` stages' flow roots); `data` from handoffJobData. */
export function handoffFlowJob(
  data: HandoffJobData,
  children: FlowJob[],
  underParent: boolean,
  jobDataLimit: number,
): FlowJob {
  const jobId = handoffJobId(data.runId, data.name);
  const withUpstream: HandoffJobData = {
    ...data,
    upstream: children.map((child) => (child.data as { stage?: string }).stage ?? child.name),
  };
  checkJobData(withUpstream, jobDataLimit, { label: `the trainer handoff ${data.name}`, jobId });
  // Waiting is a delayed job, not a failed attempt; the attempts cover store and Redis faults.
  const opts = {
    ...runJobOptions(jobDataLimit),
    attempts: 5,
    jobId,
    ...(underParent ? { ignoreDependencyOnFailure: true } : { failParentOnFailure: true }),
  };
  return {
    name: 'handoff',
    queueName: runsQueueName,
    data: withUpstream,
    opts,
    ...(children.length > 0 ? { children } : {}),
  };
}
