import type { FlowJob } from 'bullmq';
import { z } from 'zod';
import { stagePrefix } from '../shared/artifacts/artifact-layout';
import { assertJobId } from './job-ids';
import { checkJobDataSize, runJobOptions } from './job-options';
import { runsQueueName } from './queue-names';
import type { RunPlan } from './run-config';

/**
 * The trainer handoff of a run: training happens outside the pipeline, between stages.
 *
 * ```yaml
 * handoff:
 *   after: [shard]                   # these complete, then the training request is written
 *   before: [distill, rl, replay]    # these wait for a registered checkpoint
 *   timeoutMinutes: 720
 *   hyperparameters: { learningRate: 1.0e-5, epochs: 2 }
 * stages:
 *   rl:
 *     policy: { adapter: openai, baseUrl: "${checkpoint.endpoint}", model: "${checkpoint.model}" }
 * ```
 *
 * A run with a handoff is one BullMQ flow plus a second one added later. The first holds the
 * stages that do not wait for the checkpoint and a `handoff` job (queue `runs`, id
 * `<runId>.train.handoff`) above the `after` stages. When they complete, the handoff job writes
 * `runs/<runId>/train/request.json` (dataset manifests, suggested hyperparameters, tokenizer
 * fingerprint, code version) and waits for `runs/<runId>/train/checkpoint.json`, written by
 * `hat checkpoint register` (which also wakes it) or by the trainer itself, re-checking as a
 * delayed job (no worker slot is held while it waits). Then it adds the `before` stages as its
 * own children, their `${checkpoint.endpoint}` / `${checkpoint.model}` filled in from the marker,
 * with the job ids planned when the run was created, so a retried handoff adds nothing twice.
 * No marker before the deadline fails the handoff with `[CHECKPOINT_TIMEOUT]`.
 */

/** Name of the handoff in stage lists, reports and object keys (`runs/<runId>/train/`). */
export const handoffStageName = 'train';

/** The handoff job's id. */
export function handoffJobId(runId: string): string {
  return assertJobId(`${runId}.${handoffStageName}.handoff`);
}

/** `runs/<runId>/train/request.json`: what the trainer gets. */
export function trainingRequestKey(runId: string): string {
  return `${stagePrefix(runId, handoffStageName)}request.json`;
}

/** `runs/<runId>/train/checkpoint.json`: its presence releases the stages that wait. */
export function checkpointMarkerKey(runId: string): string {
  return `${stagePrefix(runId, handoffStageName)}checkpoint.json`;
}

const stageNameList = z.array(z.string().min(1)).min(1);

/** The `handoff:` section of a run config. */
export const handoffConfigSchema = z
  .object({
    /** Stages that complete before the training request is written (e.g. `[shard]`). */
    after: stageNameList,
    /** Stages that wait for the registered checkpoint (e.g. `[distill, rl, replay]`). */
    before: stageNameList,
    /** How long to wait for a checkpoint after the request is written, minutes. Default 1440 (a day). */
    timeoutMinutes: z.number().positive().max(30 * 24 * 60).default(24 * 60),
    /** How often the trainer's own marker is looked for, seconds (`hat checkpoint register` wakes the run at once). Default 60. */
    pollSeconds: z.number().int().min(1).max(3600).default(60),
    /** Suggested hyperparameters, passed through to the request as written. Default {}. */
    hyperparameters: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();
export type HandoffConfig = z.infer<typeof handoffConfigSchema>;

/** Fields `${checkpoint.<field>}` may name. */
export const checkpointFields = ['endpoint', 'model'] as const;
export type CheckpointField = (typeof checkpointFields)[number];
export const checkpointReferencePattern = /^checkpoint\.([A-Za-z]+)$/;

/**
 * Values that stand in for the checkpoint while a run is planned: the `before` stages are
 * validated against their schemas with them. `.invalid` is a reserved name that never resolves.
 */
export const checkpointPlaceholders: Record<CheckpointField, string> = { endpoint: 'http://checkpoint.invalid/v1', model: 'checkpoint.invalid' };

/** Fills `${checkpoint.endpoint}` / `${checkpoint.model}` in every string of a value. */
export function fillCheckpointReferences(value: unknown, checkpoint: Record<CheckpointField, string>): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{\s*checkpoint\.([A-Za-z]+)\s*\}/g, (whole, field: string) => ((checkpointFields as readonly string[]).includes(field) ? checkpoint[field as CheckpointField] : whole));
  }
  if (Array.isArray(value)) return value.map((item) => fillCheckpointReferences(item, checkpoint));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, fillCheckpointReferences(item, checkpoint)]));
  return value;
}

/** Whether a value names the checkpoint anywhere. */
export function mentionsCheckpoint(value: unknown): boolean {
  if (typeof value === 'string') return /\$\{\s*checkpoint\./.test(value);
  if (Array.isArray(value)) return value.some(mentionsCheckpoint);
  if (value !== null && typeof value === 'object') return Object.values(value).some(mentionsCheckpoint);
  return false;
}

const httpUrl = z.string().refine((value) => {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}, 'must be an http:// or https:// URL, e.g. http://trainer-serve:8000/v1');
const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lowercase hex sha256');

export const CHECKPOINT_MARKER_SCHEMA_VERSION = 1;

/**
 * `runs/<runId>/train/checkpoint.json`. A trainer that writes it directly needs only `endpoint`
 * and `model`; `hat checkpoint register` fills in the rest.
 */
export const checkpointMarkerSchema = z.object({
  schemaVersion: z.literal(CHECKPOINT_MARKER_SCHEMA_VERSION).default(CHECKPOINT_MARKER_SCHEMA_VERSION),
  /** When given, must be the run's id (a marker copied from another run is refused). */
  runId: z.string().optional(),
  /** OpenAI-compatible base URL serving the new checkpoint, e.g. `http://serve:8000/v1`. */
  endpoint: httpUrl,
  /** Model id the endpoint serves it under (what `GET /v1/models` lists). */
  model: z.string().min(1).max(500),
  /** Tokenizer fingerprint of the checkpoint; when given it must equal the request's. */
  tokenizerFingerprint: sha256Hex.optional(),
  /** Where the weights are (for lineage only). */
  checkpointUri: z.string().min(1).max(2000).optional(),
  registeredAt: z.string().optional(),
  /** `cli` for `hat checkpoint register`, else whatever the trainer says. */
  registeredBy: z.string().max(200).optional(),
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

/** `runs/<runId>/train/request.json`. */
export interface TrainingRequest {
  schemaVersion: typeof TRAINING_REQUEST_SCHEMA_VERSION;
  runId: string;
  /** ISO-8601. */
  requestedAt: string;
  /** ISO-8601: no checkpoint by then fails the run with CHECKPOINT_TIMEOUT. */
  deadline: string;
  /** Code version of the pipeline that wrote the data. */
  codeVersion: string;
  /** The `after` stages' manifests and the data objects they list (Parquet shards, JSONL exports). */
  datasets: Array<{ stage: string; manifestUri: string; objects: TrainingDatasetObject[] }>;
  /** Tokenizer the data was tokenized with (the shard stage's), when a stage recorded one. */
  tokenizer?: { name?: string; fingerprint: string; templateHash?: string };
  /** Suggested hyperparameters from the run config, as written. */
  hyperparameters: Record<string, unknown>;
  /** How to hand the checkpoint back. */
  checkpoint: { markerUri: string; registerCommand: string; required: ['endpoint', 'model'] };
  /** Stages that run on the new checkpoint. */
  then: string[];
}

/** One `before` stage as the handoff job keeps it until the checkpoint is known. */
export const postStageSchema = z.object({
  name: z.string().min(1),
  jobId: z.string().min(1),
  /** The stage config with every reference resolved except `${checkpoint.*}`. */
  template: z.unknown(),
  outputPrefix: z.string(),
  /** `before` stages it reads (the flow among them mirrors these). */
  dependsOn: z.array(z.string()),
});
export type PostStage = z.infer<typeof postStageSchema>;

/** The handoff job (queue `runs`, name `handoff`). */
export const handoffJobDataSchema = z.object({
  v: z.literal(1),
  runId: z.string().min(1),
  artifactsRoot: z.string().min(1),
  seed: z.string(),
  after: z.array(z.string()),
  before: z.array(z.string()),
  /** Stage jobs directly below it (they finish before it starts). */
  upstream: z.array(z.string()).default([]),
  timeoutMs: z.number().int().positive(),
  pollIntervalMs: z.number().int().positive(),
  hyperparameters: z.record(z.string(), z.unknown()).default({}),
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
});
export type HandoffJobData = z.infer<typeof handoffJobDataSchema>;

/** The handoff as a planned run carries it. */
export interface PlannedHandoff {
  jobId: string;
  after: string[];
  before: string[];
  timeoutMs: number;
  pollIntervalMs: number;
  hyperparameters: Record<string, unknown>;
}

/** The handoff's entry in the run job's data. */
export const runHandoffEntrySchema = z.object({ jobId: z.string().min(1), after: z.array(z.string()), before: z.array(z.string()) });
export type RunHandoffEntry = z.infer<typeof runHandoffEntrySchema>;

/** What the handoff job returns: a stage result (so the run sees every stage below it) whose output describes the handoff. */
export interface HandoffOutput {
  requestUri: string;
  checkpointUri: string;
  checkpoint: CheckpointMarker;
  /** Epoch ms. */
  requestedAt: number;
  checkpointAt: number;
}

/** `hat checkpoint register ...` for a run, as messages and the request spell it. */
export function registerCommandOf(runId: string): string {
  return `hat checkpoint register ${runId} --endpoint <url> --model <name>`;
}

/** The handoff job of a planned run, above `children` (the `after` stages' flow roots). */
export function handoffFlowJob(plan: RunPlan, children: FlowJob[], underRun: boolean, jobDataLimit: number): FlowJob {
  const handoff = plan.handoff;
  if (!handoff) throw new Error('handoffFlowJob needs a plan with a handoff');
  const data: HandoffJobData = {
    v: 1,
    runId: plan.runId,
    artifactsRoot: plan.artifactsRoot,
    seed: plan.seed,
    after: handoff.after,
    before: handoff.before,
    upstream: children.map((child) => (child.data as { stage?: string }).stage ?? child.name),
    timeoutMs: handoff.timeoutMs,
    pollIntervalMs: handoff.pollIntervalMs,
    hyperparameters: handoff.hyperparameters,
    post: plan.stages
      .filter((stage) => stage.afterHandoff)
      .map((stage) => ({
        name: stage.name,
        jobId: stage.jobId,
        template: stage.template,
        outputPrefix: stage.outputPrefix,
        dependsOn: stage.dependsOn.filter((name) => handoff.before.includes(name)),
      })),
    step: 'wait-stages',
  };
  checkJobDataSize(data, jobDataLimit, { label: 'the trainer handoff', jobId: handoff.jobId });
  // Waiting is a delayed job, not a failed attempt; the attempts cover store and Redis faults.
  const opts = { ...runJobOptions(jobDataLimit), attempts: 5, jobId: handoff.jobId, ...(underRun ? { ignoreDependencyOnFailure: true } : { failParentOnFailure: true }) };
  return { name: 'handoff', queueName: runsQueueName, data, opts, ...(children.length > 0 ? { children } : {}) };
}
