import { z } from 'zod';
import type { StageContract } from '../../../queues/stage-kit/define-stage';

/**
 * Example stage (framework tests, benchmarks, chaining demos): one job that does nothing but
 * check that the manifests it is given exist.
 */
export const noopInputSchema = z
  .object({
    /** Free text echoed in the output. Default `noop`. */
    label: z.string().max(200).default('noop'),
    /** Manifest URIs to check (e.g. `${stages.fanout-demo.manifestUri}`). Default none. */
    inputs: z.array(z.string().regex(/^(s3|file):\/\//, 'must be an artifact URI (s3:// or file://)')).default([]),
  })
  .strict();
export type NoopInput = z.infer<typeof noopInputSchema>;

export const noopOutputSchema = z.object({
  label: z.string(),
  /** Every input manifest with the number of objects it lists. */
  inputs: z.array(z.object({ uri: z.string(), objects: z.number().int().nonnegative() })),
});
export type NoopOutput = z.infer<typeof noopOutputSchema>;

export const noopContract: StageContract<NoopInput, NoopOutput> = {
  name: 'noop',
  description: 'example stage: does nothing but check its input manifests exist',
  input: noopInputSchema,
  output: noopOutputSchema,
  queue: { attempts: 3, backoffMs: 200 },
};
