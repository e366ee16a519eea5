import { z } from 'zod';
import type { FanOutContract } from '../../../queues/stage-kit/define-stage';

/**
 * Example CPU-heavy stage: each part iterates sha256 many times, which would block an event
 * loop. Marked `cpuHeavy`, so workers run it in sandboxed worker threads.
 */
export const hashDemoInputSchema = z
  .object({
    /** Parts to fan out into. Default 4. */
    parts: z.number().int().min(1).max(1_000).default(4),
    /** sha256 rounds per part. Default 200000. */
    rounds: z.number().int().min(1).max(50_000_000).default(200_000),
  })
  .strict();
export type HashDemoInput = z.infer<typeof hashDemoInputSchema>;

export const hashDemoPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  rounds: z.number().int().positive(),
});
export type HashDemoPartInput = z.infer<typeof hashDemoPartInputSchema>;

export const hashDemoPartOutputSchema = z.object({
  index: z.number().int().nonnegative(),
  digest: z.string(),
  /** worker_threads id the part ran on (0 = the main thread). */
  threadId: z.number().int().nonnegative(),
});
export type HashDemoPartOutput = z.infer<typeof hashDemoPartOutputSchema>;

export const hashDemoOutputSchema = z.object({ manifestUri: z.string(), parts: z.number().int().nonnegative() });
export type HashDemoOutput = z.infer<typeof hashDemoOutputSchema>;

export const hashDemoContract: FanOutContract<HashDemoInput, HashDemoOutput, HashDemoPartInput, HashDemoPartOutput> = {
  name: 'hash-demo',
  description: 'example CPU-heavy stage: iterated sha256 per part, run in sandboxed worker threads',
  input: hashDemoInputSchema,
  output: hashDemoOutputSchema,
  partInput: hashDemoPartInputSchema,
  partOutput: hashDemoPartOutputSchema,
  queue: { attempts: 3, backoffMs: 200, cpuHeavy: true, concurrency: 2 },
};
