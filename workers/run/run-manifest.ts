import { z } from 'zod';

export const RUN_MANIFEST_SCHEMA_VERSION = 1;

/** How one stage of a run ended. `not-run`: an upstream stage failed first. */
export const stageOutcomeStatus = z.enum(['completed', 'failed', 'cancelled', 'not-run']);
export type StageOutcomeStatus = z.infer<typeof stageOutcomeStatus>;

/** One stage in the run manifest. */
export const stageOutcomeSchema = z.object({
  name: z.string(),
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
  /** `[CODE] message` of the failure, followed down to the part that failed when there was one. */
  error: z.string().optional(),
  /** Stages it read from. */
  dependsOn: z.array(z.string()),
});
export type StageOutcome = z.infer<typeof stageOutcomeSchema>;

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
  reportJsonUri: z.string(),
  reportHtmlUri: z.string(),
});
export type RunManifest = z.infer<typeof runManifestSchema>;
