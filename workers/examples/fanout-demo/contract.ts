import { z } from 'zod';
import type { FanOutContract } from '../../../queues/stage-kit/define-stage';

/**
 * Example stage (framework tests and `hat demo`): fans out into parts that each write a small
 * gzip JSONL object of seeded records, then fans in and writes the stage manifest last. Its
 * fault knobs let tests and demos show retries and bad-input failures.
 */
const partIndexes = z.array(z.number().int().nonnegative()).default([]);

export const fanoutDemoInputSchema = z
  .object({
    /** Parts to fan out into. Default 8. */
    parts: z.number().int().min(1).max(10_000).default(8),
    /** Records each part writes. Default 4. */
    recordsPerPart: z.number().int().min(1).max(10_000).default(4),
    /** Simulated work per part, ms (cut short when the job is handed back). Default 0. */
    partDelayMs: z.number().int().min(0).max(600_000).default(0),
    /** Fault injection. */
    faults: z
      .object({
        /** Parts that throw a TransientError on their first attempt (then succeed). */
        transientOnFirstAttempt: partIndexes,
        /** Parts that throw a BadInputError (fail once, never retried, write nothing). */
        badInput: partIndexes,
      })
      .strict()
      .default({ transientOnFirstAttempt: [], badInput: [] }),
  })
  .strict();
export type FanoutDemoInput = z.infer<typeof fanoutDemoInputSchema>;

export const fanoutDemoPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  records: z.number().int().positive(),
  delayMs: z.number().int().nonnegative(),
  fault: z.enum(['none', 'transient-once', 'bad-input']),
});
export type FanoutDemoPartInput = z.infer<typeof fanoutDemoPartInputSchema>;

export const fanoutDemoPartOutputSchema = z.object({
  key: z.string(),
  uri: z.string(),
  records: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  sha256: z.string(),
});
export type FanoutDemoPartOutput = z.infer<typeof fanoutDemoPartOutputSchema>;

export const fanoutDemoOutputSchema = z.object({
  manifestUri: z.string(),
  parts: z.number().int().nonnegative(),
  records: z.number().int().nonnegative(),
});
export type FanoutDemoOutput = z.infer<typeof fanoutDemoOutputSchema>;

export const fanoutDemoContract: FanOutContract<
  FanoutDemoInput,
  FanoutDemoOutput,
  FanoutDemoPartInput,
  FanoutDemoPartOutput
> = {
  name: 'fanout-demo',
  description: 'example stage: fans out into parts writing seeded JSONL records, fans in with a manifest',
  input: fanoutDemoInputSchema,
  output: fanoutDemoOutputSchema,
  partInput: fanoutDemoPartInputSchema,
  partOutput: fanoutDemoPartOutputSchema,
  queue: { attempts: 4, backoffMs: 100 },
};
