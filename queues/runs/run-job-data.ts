import { z } from 'zod';
import { resolvedInputSchema } from './latest-inputs';
import { runHandoffEntrySchema } from './run-handoff';

/**
 * What Redis carries for the run-level jobs of queue `runs`: the run's parent job and scheduled
 * kickoffs. Stage and part job data are in queues/bullmq/job-data.ts.
 */

/** One stage of a run, as the run's parent job records it. */
export const runStageEntrySchema = z.object({
  name: z.string().min(1),
  /** The registered stage (queue) when it differs from the name. */
  kind: z.string().min(1).optional(),
  jobId: z.string().min(1),
  /** Stages this one reads from (its `${stages.<name>...}` references). */
  dependsOn: z.array(z.string()).default([]),
  /** Enqueued by a trainer handoff once a checkpoint is registered (absent: part of the first flow). */
  afterHandoff: z.boolean().optional(),
  /** The handoff that enqueues it (absent with `afterHandoff`: the single handoff, `train`). */
  handoff: z.string().optional(),
  /** For a round of an on-policy stage: the policy version it samples with. */
  policyVersion: z.number().int().positive().optional(),
});

/** The queue of a stage entry or job: its kind, else its name. */
export function stageKindOf(entry: { name?: string; stage?: string; kind?: string }): string {
  return entry.kind ?? entry.name ?? entry.stage ?? '';
}
export type RunStageEntry = z.infer<typeof runStageEntrySchema>;

/** The run's parent job (queue `runs`, name `run`, id = run id). */
export const runJobDataSchema = z.object({
  v: z.literal(1),
  runId: z.string().min(1),
  configHash: z.string().min(1),
  artifactsRoot: z.string().min(1),
  seed: z.string(),
  /** Epoch ms when the run was enqueued. */
  createdAt: z.number(),
  /** `cli`, `schedule:<name>`, `demo`, ... */
  source: z.string().default('cli'),
  stages: z.array(runStageEntrySchema),
  /** Set by `hat runs cancel`. */
  cancelledAt: z.number().optional(),
  /** The trainer handoffs in chain order, when the run has any (queues/runs/run-handoff.ts). */
  handoffs: z.array(runHandoffEntrySchema).optional(),
  /** What the config's `latest` inputs resolved to when the run was created. */
  resolvedInputs: z.array(resolvedInputSchema).optional(),
  /**
   * The run's whole plan (stage inputs are URIs and small parameters), so `hat runs retry` can
   * resume a cancelled run: its removed jobs are enqueued again and finished parts are reused.
   */
  plan: z.unknown().optional(),
});
export type RunJobData = z.infer<typeof runJobDataSchema>;

/** A scheduled kickoff (queue `runs`, name `kickoff`): the run config to start at each firing. */
export const kickoffJobDataSchema = z.object({
  v: z.literal(1),
  schedule: z.string().min(1),
  /** The run config as parsed from its YAML (validated again at each firing). */
  config: z.unknown(),
  /** Where the config came from, for messages. */
  configFile: z.string().optional(),
});
export type KickoffJobData = z.infer<typeof kickoffJobDataSchema>;
