import { z } from 'zod';
import { resolvedInputSchema } from '../../queues/runs/latest-inputs';
import { stageFigureSchema, stageLinkSchema } from '../../queues/stage-kit/stage-summary';
import { checkpointLineageSchema, staleDatasetSchema, trainingSummarySchema } from '../../queues/runs/run-handoff';
import { gateOutcomeSchema } from './gate-outcome';

export const RUN_MANIFEST_SCHEMA_VERSION = 1;

/**
 * How one stage of a run ended. `held`: it completed with a decision to hold (the gate held its
 * candidate; a legitimate outcome, not a failure). `not-run`: an upstream stage failed first, or a
 * hold kept it from running (its `error` says which).
 */
export const stageOutcomeStatus = z.enum(['completed', 'held', 'failed', 'cancelled', 'not-run']);
export type StageOutcomeStatus = z.infer<typeof stageOutcomeStatus>;

/** One stage in the run manifest. */
export const stageOutcomeSchema = z.object({
  name: z.string(),
  /** The registered stage it ran, when it differs from the name. */
  kind: z.string().optional(),
  /** The trainer handoff whose checkpoint it ran on (absent: it started with the run). */
  handoff: z.string().optional(),
  /** For a round of an on-policy stage: the policy version it sampled with (its records carry it). */
  policyVersion: z.number().int().positive().optional(),
  status: stageOutcomeStatus,
  jobId: z.string(),
  /** The stage's manifest (completed stages that write one). */
  manifestUri: z.string().optional(),
  /** Parts the stage fanned out into (0: single job). */
  parts: z.number().int().nonnegative(),
  /** Objects and records its manifest lists. */
  objects: z.number().int().nonnegative().optional(),
  records: z.number().int().nonnegative().optional(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  durationMs: z.number().nonnegative().optional(),
  /** `[CODE] message` of the failure, followed down to the part that failed when there was one; for a stage a hold kept from running, `held by the <stage>: <reasons>`. */
  error: z.string().optional(),
  /** For a `held` stage: what it held and why (`held <candidate>: <reasons>`). */
  note: z.string().optional(),
  /** Stages it read from. */
  dependsOn: z.array(z.string()),
  /** Key figures of a completed stage (its contract's `summarize`): acceptance rate, tokens, SLO verdict, ... */
  figures: z.array(stageFigureSchema).optional(),
  /** The stage's own reports and data beyond its manifest. */
  links: z.array(stageLinkSchema).optional(),
});
export type StageOutcome = z.infer<typeof stageOutcomeSchema>;

/** How the trainer handoff of a run ended (queues/runs/run-handoff.ts). */
export const handoffOutcomeSchema = z.object({
  /** `not-run`: a stage it waits for failed first. `failed`: e.g. `[CHECKPOINT_TIMEOUT]`. */
  status: z.enum(['completed', 'failed', 'cancelled', 'not-run']),
  /** Its name (`train` for a run config's single `handoff:`). */
  name: z.string().default('train'),
  jobId: z.string(),
  /** The policy version its checkpoint is (handoffs after an on-policy stage's rounds). */
  policyVersion: z.number().int().positive().optional(),
  after: z.array(z.string()),
  before: z.array(z.string()),
  /** `runs/<runId>/<handoff>/request.json` (written once the `after` stages completed). */
  requestUri: z.string().optional(),
  /** `runs/<runId>/<handoff>/checkpoint.json`. */
  checkpointUri: z.string().optional(),
  /** The checkpoint the `before` stages ran on. */
  checkpoint: z
    .object({
      endpoint: z.string().optional(),
      model: z.string().optional(),
      modelDir: z.string().optional(),
      policyVersion: z.number().int().positive().optional(),
      /** No training happened: the demo's simulated trainer registered a re-seeded dummy model. */
      simulated: z.boolean().optional(),
      registeredBy: z.string().optional(),
      /** A real trainer's summary (objective, steps, loss, proofs) and its loss curve (at most 200 points). */
      training: trainingSummarySchema
        .extend({ lossCurve: z.array(z.object({ step: z.number(), loss: z.number() })).optional() })
        .optional(),
      lineage: checkpointLineageSchema.optional(),
    })
    .optional(),
  requestedAt: z.string().optional(),
  checkpointAt: z.string().optional(),
  /** Time from the request to the checkpoint, ms. */
  waitedMs: z.number().nonnegative().optional(),
  /** Rounds with maxStaleness: datasets left out of the training request as too old (none: []). */
  dropped: z.array(staleDatasetSchema).optional(),
  error: z.string().optional(),
});
export type HandoffOutcome = z.infer<typeof handoffOutcomeSchema>;

/** `runs/<runId>/run-manifest.json`: written last by the run job; links every stage manifest. */
export const runManifestSchema = z.object({
  schemaVersion: z.literal(RUN_MANIFEST_SCHEMA_VERSION),
  runId: z.string(),
  status: z.enum(['completed', 'failed', 'cancelled']),
  configHash: z.string(),
  seed: z.string(),
  artifactsRoot: z.string(),
  source: z.string(),
  codeVersion: z.string(),
  createdAt: z.string(),
  finishedAt: z.string(),
  durationMs: z.number().nonnegative(),
  stages: z.array(stageOutcomeSchema),
  /** What the config's `latest` inputs resolved to when the run was created. */
  resolvedInputs: z.array(resolvedInputSchema).optional(),
  /** The trainer handoffs in chain order, when the run has any. */
  handoffs: z.array(handoffOutcomeSchema).optional(),
  /** The trainer handoff, when the run has one. */
  handoff: handoffOutcomeSchema.optional(),
  /** The promotion gate's decision, when the run has a gate that decided (workers/run/gate-outcome.ts). */
  gate: gateOutcomeSchema.optional(),
  reportJsonUri: z.string(),
  reportHtmlUri: z.string(),
});
export type RunManifest = z.infer<typeof runManifestSchema>;
