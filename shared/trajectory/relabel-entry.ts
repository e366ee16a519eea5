import { z } from 'zod';

/**
 * One entry of the relabel list (`relabel.jsonl.gz`): this task needs a new reply under this
 * variant (a changed constraint the recorded reply does not meet). collect's `relabel` input
 * plays these tasks again under `variants/<variantHash>/`.
 */
export const relabelEntrySchema = z.object({
  taskId: z.string(),
  /** The recorded (source) trajectory. */
  trajectoryId: z.string(),
  reason: z.string(),
  /** Hash of the variant (its directory under variants/). */
  variantHash: z.string(),
  detail: z.string(),
});
export type RelabelEntry = z.infer<typeof relabelEntrySchema>;
